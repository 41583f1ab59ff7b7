package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/weir-io/weir/routing"
)

// `weir admin traffic`: how many bytes cross zones, by kind, what that costs a month,
// and what Kafka would move for the same produce and consume volume. It reads the
// brokers' weir_traffic_bytes_total (routing.Traffic) from their /metrics.

const trafficHelp = `Usage: weir admin traffic [flags]

Scrapes every broker's /metrics twice, --interval apart, and prints the bytes each pair of
zones moved in between, per kind (routing.Traffic's weir_traffic_bytes_total):
client_records (produced and fetched record batches), client_other, link (inter-broker
connections: proxied produces, read-replica follows), wal_read (reads of another zone's
broker's WAL), controller and gossip. A byte between two brokers (link, gossip) is
counted once, at its sender: list every broker.

Then: the share of produced + consumed record bytes that crossed zones, the share of all
cross-zone bytes to them, and a monthly estimate at --price-per-gb (extrapolated from the
interval; a month is 730 hours, a GB 2^30 bytes), beside what Apache Kafka would move for
the same volume. The Kafka model: replication factor 3 with one replica per zone (3 zones),
clients not rack-aware, partition leaders spread evenly over the zones:
  - every produced byte is replicated to the 2 followers in the other zones: 2 crossings;
  - a producer's request goes to a leader in another zone 2/3 of the time: 2/3 crossing;
  - a consumer fetches from the leader, in another zone 2/3 of the time: 2/3 crossing;
so Kafka moves 8/3 × produced + 2/3 × consumed bytes across zones (rack-aware consumers,
KIP-392, would save the last term; the first two stay).

The default price, 0.02 USD per GB crossing zones, is AWS's: data transfer between the
Availability Zones of a Region is billed 0.01 USD/GB out of the sending zone and 0.01 USD/GB
into the receiving one (EC2 on-demand pricing, "Data Transfer within the same AWS Region",
https://aws.amazon.com/ec2/pricing/on-demand/). Clients whose zone the brokers could not
tell (peer zone "unknown") are routed to the real leaders and are not counted as crossing;
the monthly estimate adds 2/3 of their record bytes on a line of its own.

`

type trafficOptions struct {
	endpoints []string
	interval  time.Duration
	price     float64
	fsMBps    float64
	json      bool
	timeout   time.Duration
}

func runAdminTraffic(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("weir admin traffic", flag.ContinueOnError)
	metrics := fs.String("metrics", "127.0.0.1:9644", "comma-separated /metrics addresses of every broker (host:port, or URLs); weir dev serves every broker's on one")
	o := trafficOptions{}
	fs.DurationVar(&o.interval, "interval", 10*time.Second, "time between the two scrapes; 0 scrapes once and reports the totals since the brokers started (no monthly estimate)")
	fs.Float64Var(&o.price, "price-per-gb", 0.02, "USD per GB (2^30 bytes) crossing zones; AWS: 0.01 out of one zone + 0.01 into the other")
	fs.Float64Var(&o.fsMBps, "fs-throughput-mbps", 0, "the WAL file system's provisioned throughput in MB/s (FSx for ONTAP: its throughput capacity): show the brokers' share of it")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of one scrape")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), trafficHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.endpoints = metricsURLs(*metrics)
	switch {
	case len(o.endpoints) == 0:
		return errors.New("traffic: --metrics names no address")
	case o.interval < 0 || o.price < 0 || math.IsNaN(o.price) || math.IsInf(o.price, 0) || !(o.fsMBps >= 0) || math.IsInf(o.fsMBps, 0):
		return errors.New("traffic: --interval, --price-per-gb and --fs-throughput-mbps must be >= 0")
	}
	cl := &http.Client{Timeout: o.timeout}
	var first map[string]trafficSample
	var firstFS map[string]fsSample
	if o.interval > 0 {
		var err error
		if first, err = scrapeTraffic(ctx, cl, o.endpoints); err != nil {
			return err
		}
		if firstFS, err = scrapeFS(ctx, cl, o.endpoints); err != nil {
			return err
		}
		select {
		case <-time.After(o.interval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	second, err := scrapeTraffic(ctx, cl, o.endpoints)
	if err != nil {
		return err
	}
	secondFS, err := scrapeFS(ctx, cl, o.endpoints)
	if err != nil {
		return err
	}
	if len(second) == 0 {
		return fmt.Errorf("traffic: no %s at %s (are these brokers' /metrics, of a build that counts traffic?)", routing.MetricName, strings.Join(o.endpoints, ", "))
	}
	rep := computeTraffic(first, second, o.interval, o.price)
	rep.Endpoints = o.endpoints
	rep.FileSystem = computeFS(firstFS, secondFS, rep.IntervalSeconds, rep.ProducedBytes, o.fsMBps)
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTraffic(out, rep)
	printFS(out, rep.FileSystem)
	return nil
}

// metricsURLs turns a comma-separated --metrics list into /metrics URLs.
func metricsURLs(list string) []string {
	var out []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, metricsURL(m))
		}
	}
	return out
}

func metricsURL(addr string) string {
	if strings.Contains(addr, "://") {
		if i := strings.Index(addr, "://"); !strings.Contains(addr[i+3:], "/") {
			return addr + "/metrics"
		}
		return addr
	}
	return "http://" + addr + "/metrics"
}

// trafficSample is one series of weir_traffic_bytes_total.
type trafficSample struct {
	local, peer, kind, dir string
	value                  float64
}

// scrapeTraffic reads weir_traffic_bytes_total from every endpoint, keyed by endpoint
// and the series' whole label set (weir dev labels each broker's with node=...).
func scrapeTraffic(ctx context.Context, cl *http.Client, endpoints []string) (map[string]trafficSample, error) {
	out := map[string]trafficSample{}
	for _, ep := range endpoints {
		mfs, err := scrapeFamilies(ctx, cl, ep)
		if err != nil {
			return nil, fmt.Errorf("traffic: %w", err)
		}
		mf := mfs[routing.MetricName]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			var s trafficSample
			var id []string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "local_zone":
					s.local = lp.GetValue()
				case "peer_zone":
					s.peer = lp.GetValue()
				case "kind":
					s.kind = lp.GetValue()
				case "direction":
					s.dir = lp.GetValue()
				}
				id = append(id, lp.GetName()+"="+lp.GetValue())
			}
			if m.GetCounter() == nil {
				continue
			}
			s.value = m.GetCounter().GetValue()
			sort.Strings(id)
			out[ep+"|"+strings.Join(id, ",")] = s
		}
	}
	return out, nil
}

// scrapeFamilies reads one /metrics endpoint's metric families (text format).
func scrapeFamilies(ctx context.Context, cl *http.Client, ep string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", ep, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", ep, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", ep, err)
	}
	return mfs, nil
}

// trafficRow is the bytes one zone sent another, of one kind.
type trafficRow struct {
	From        string  `json:"from"`
	To          string  `json:"to"`
	Kind        string  `json:"kind"`
	Bytes       float64 `json:"bytes"`
	BytesPerSec float64 `json:"bytes_per_sec,omitempty"`
	// Cross: between two different known zones; Unknown: a zone is unknown.
	Cross   bool `json:"cross_zone"`
	Unknown bool `json:"zone_unknown,omitempty"`
}

type trafficMonth struct {
	// CrossGB is what crossed zones, extrapolated to a month; USD at the price.
	WeirCrossGB  float64 `json:"weir_cross_zone_gb"`
	WeirRecordGB float64 `json:"weir_cross_zone_record_gb"`
	// WeirControlGB is the control part of WeirCrossGB (the whole of it when idle).
	WeirControlGB float64 `json:"weir_cross_zone_control_gb"`
	WeirUSD       float64 `json:"weir_usd"`
	KafkaCrossGB  float64 `json:"kafka_cross_zone_gb"`
	KafkaUSD      float64 `json:"kafka_usd"`
	// UnknownGB estimates what the record bytes of clients whose zone is unknown
	// cross (they go to the real leaders: 2/3 of them, as in the Kafka model); not in
	// WeirCrossGB.
	UnknownGB  float64 `json:"unknown_zone_estimated_gb,omitempty"`
	UnknownUSD float64 `json:"unknown_zone_estimated_usd,omitempty"`
}

type trafficReport struct {
	Endpoints       []string     `json:"endpoints"`
	IntervalSeconds float64      `json:"interval_seconds"` // 0: totals since the brokers started
	PricePerGB      float64      `json:"price_per_gb_usd"`
	Rows            []trafficRow `json:"rows"`
	// Record bytes clients produced (received by brokers) and consumed (sent).
	ProducedBytes float64 `json:"produced_record_bytes"`
	ConsumedBytes float64 `json:"consumed_record_bytes"`
	// CrossRecordBytes: record bytes between a client and a broker of different zones;
	// UnknownRecordBytes: record bytes of clients whose zone is unknown.
	CrossRecordBytes   float64 `json:"cross_zone_record_bytes"`
	UnknownRecordBytes float64 `json:"unknown_zone_record_bytes"`
	// CrossBytes: every kind, between different known zones; CrossControlBytes the
	// part that is not client records (metadata, links' pointers, replicas' follow
	// polls, controller, gossip): an idle cluster's whole crossing.
	CrossBytes        float64 `json:"cross_zone_bytes"`
	CrossControlBytes float64 `json:"cross_zone_control_bytes"`
	// Shares of produced + consumed record bytes.
	CrossRecordShare float64 `json:"cross_zone_record_share"`
	CrossShare       float64 `json:"cross_zone_share"`
	// KafkaCrossBytes is what Kafka would move across zones for the same volume.
	KafkaCrossBytes float64       `json:"kafka_cross_zone_bytes"`
	KafkaModel      string        `json:"kafka_model"`
	Month           *trafficMonth `json:"month,omitempty"`
	// FileSystem: the shared WAL file system's reads and writes (nil: no broker counts them).
	FileSystem *fsReport `json:"file_system,omitempty"`
}

const kafkaModel = "RF3, one replica per zone of 3, clients not rack-aware: 2 + 2/3 crossings per produced byte, 2/3 per consumed byte"

const (
	gib          = 1 << 30
	monthSeconds = 730 * 3600
)

// computeTraffic turns two scrapes (first nil: totals) into the report. A series that
// went down between them (a broker restarted) counts its second value.
func computeTraffic(first, second map[string]trafficSample, interval time.Duration, price float64) *trafficReport {
	type rowKey struct{ from, to, kind string }
	sums := map[rowKey]float64{}
	rep := &trafficReport{IntervalSeconds: interval.Seconds(), PricePerGB: price, KafkaModel: kafkaModel, Rows: []trafficRow{}}
	if first == nil {
		rep.IntervalSeconds = 0
	}
	for id, s := range second {
		v := s.value
		if f, ok := first[id]; ok && f.value <= v {
			v -= f.value
		}
		k, known := routing.ParseKind(s.kind)
		if v <= 0 || (known && k.BothEndsCount() && s.dir == "in") {
			continue // counted by the sender as out
		}
		from, to := s.local, s.peer
		if s.dir == "in" {
			from, to = s.peer, s.local
		}
		sums[rowKey{from, to, s.kind}] += v
		if s.kind == routing.KindClientRecords.String() {
			switch s.dir {
			case "in":
				rep.ProducedBytes += v
			case "out":
				rep.ConsumedBytes += v
			}
		}
	}
	for k, v := range sums {
		r := trafficRow{From: k.from, To: k.to, Kind: k.kind, Bytes: v}
		r.Unknown = !knownZone(k.from) || !knownZone(k.to)
		r.Cross = !r.Unknown && k.from != k.to
		if rep.IntervalSeconds > 0 {
			r.BytesPerSec = v / rep.IntervalSeconds
		}
		if r.Cross {
			rep.CrossBytes += v
			if k.kind == routing.KindClientRecords.String() {
				rep.CrossRecordBytes += v
			}
		}
		if r.Unknown && k.kind == routing.KindClientRecords.String() {
			rep.UnknownRecordBytes += v
		}
		rep.Rows = append(rep.Rows, r)
	}
	kindOrder := func(s string) int {
		if k, ok := routing.ParseKind(s); ok {
			return int(k)
		}
		return len(routing.Kinds)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i], rep.Rows[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		if kindOrder(a.Kind) != kindOrder(b.Kind) {
			return kindOrder(a.Kind) < kindOrder(b.Kind)
		}
		return a.Kind < b.Kind
	})
	if vol := rep.ProducedBytes + rep.ConsumedBytes; vol > 0 {
		rep.CrossRecordShare = rep.CrossRecordBytes / vol
		rep.CrossShare = rep.CrossBytes / vol
	}
	rep.CrossControlBytes = rep.CrossBytes - rep.CrossRecordBytes
	rep.KafkaCrossBytes = (2+2.0/3)*rep.ProducedBytes + 2.0/3*rep.ConsumedBytes
	if rep.IntervalSeconds > 0 {
		f := monthSeconds / rep.IntervalSeconds / gib
		m := &trafficMonth{WeirCrossGB: rep.CrossBytes * f, WeirRecordGB: rep.CrossRecordBytes * f, WeirControlGB: rep.CrossControlBytes * f,
			KafkaCrossGB: rep.KafkaCrossBytes * f}
		m.WeirUSD, m.KafkaUSD = m.WeirCrossGB*price, m.KafkaCrossGB*price
		m.UnknownGB = rep.UnknownRecordBytes * 2 / 3 * f
		m.UnknownUSD = m.UnknownGB * price
		rep.Month = m
	}
	return rep
}

func knownZone(z string) bool { return z != "" && z != routing.UnknownZone && z != routing.OtherZone }

func printTraffic(out io.Writer, rep *trafficReport) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	span := "totals since the brokers started"
	if rep.IntervalSeconds > 0 {
		span = fmt.Sprintf("over %v", time.Duration(rep.IntervalSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "%d endpoint(s), %s\n\n", len(rep.Endpoints), span)
	fmt.Fprintln(w, "FROM ZONE\tTO ZONE\tKIND\tBYTES\tRATE\t")
	for _, r := range rep.Rows {
		rate := "-"
		if rep.IntervalSeconds > 0 {
			rate = humanBytes(r.BytesPerSec) + "/s"
		}
		note := ""
		switch {
		case r.Cross:
			note = "cross-zone"
		case r.Unknown:
			note = "zone unknown"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.From, r.To, r.Kind, humanBytes(r.Bytes), rate, note)
	}
	w.Flush()
	vol := rep.ProducedBytes + rep.ConsumedBytes
	fmt.Fprintf(out, "\nrecords: produced %s, consumed %s\n", humanBytes(rep.ProducedBytes), humanBytes(rep.ConsumedBytes))
	if vol == 0 {
		// An idle cluster: shares of zero records mean nothing; its crossing is control.
		fmt.Fprintf(out, "crossing zones: no records (idle); control bytes %s (metadata, follow polls, links' pointers, controller, gossip)\n",
			humanBytes(rep.CrossControlBytes))
	} else {
		fmt.Fprintf(out, "crossing zones: record bytes %s (%s of produced+consumed), control bytes %s (%s), every kind %s\n",
			humanBytes(rep.CrossRecordBytes), pct(rep.CrossRecordShare, vol), humanBytes(rep.CrossControlBytes),
			pct(rep.CrossControlBytes/vol, vol), humanBytes(rep.CrossBytes))
	}
	if rep.UnknownRecordBytes > 0 {
		fmt.Fprintf(out, "zone unknown: %s of record bytes of clients whose zone the brokers could not tell (sent to the real leaders; not counted as crossing)\n",
			humanBytes(rep.UnknownRecordBytes))
	}
	if vol > 0 {
		fmt.Fprintf(out, "Kafka for the same volume: %s crossing zones (%s)\n", humanBytes(rep.KafkaCrossBytes), rep.KafkaModel)
	}
	if m := rep.Month; m != nil && vol == 0 {
		fmt.Fprintf(out, "per month at this rate (%.4f USD per GB crossing, 730 h): control traffic only, %.2f GB → %.2f USD (no records to compare with Kafka)\n",
			rep.PricePerGB, m.WeirControlGB, m.WeirUSD)
	} else if m != nil {
		fmt.Fprintf(out, "per month at this rate (%.4f USD per GB crossing, 730 h): Weir %.1f GB (records %.1f, control %.1f) → %.2f USD; Kafka %.1f GB → %.2f USD\n",
			rep.PricePerGB, m.WeirCrossGB, m.WeirRecordGB, m.WeirControlGB, m.WeirUSD, m.KafkaCrossGB, m.KafkaUSD)
		if m.UnknownGB > 0 {
			fmt.Fprintf(out, "  plus about %.1f GB → %.2f USD for the clients of unknown zone (2/3 of their record bytes reach a leader in another zone)\n", m.UnknownGB, m.UnknownUSD)
		}
	}
}

func pct(share, vol float64) string {
	if vol == 0 {
		return "no records"
	}
	return fmt.Sprintf("%.2f%%", 100*share)
}

func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
