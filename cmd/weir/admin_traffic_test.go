package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/weir-io/weir/routing"
)

func sample(local, peer, kind, dir string, v float64) trafficSample {
	return trafficSample{local: local, peer: peer, kind: kind, dir: dir, value: v}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestComputeTraffic(t *testing.T) {
	first := map[string]trafficSample{
		"1": sample("a", "a", "client_records", "in", 1000),
		"2": sample("a", "a", "client_records", "out", 0),
		"5": sample("a", "b", "link", "in", 50),
		"8": sample("c", "unknown", "client_records", "out", 5000), // restarted below
	}
	second := map[string]trafficSample{
		"1": sample("a", "a", "client_records", "in", 1900),       // produced 900 by zone a's clients
		"2": sample("a", "a", "client_records", "out", 1800),      // consumed 1800
		"3": sample("b", "a", "client_records", "in", 300),        // a client of zone a produced 300 to b: crosses
		"4": sample("b", "a", "link", "out", 30),                  // b → a link, counted at the sender...
		"5": sample("a", "b", "link", "in", 80),                   // ...and at the receiver: skipped
		"6": sample("a", "c", "wal_read", "in", 600),              // a read c's WAL
		"7": sample("b", "c", "gossip", "out", 10),                // gossip, sender's count
		"8": sample("c", "unknown", "client_records", "out", 100), // reset: counts 100
		"9": sample("c", "c", "client_other", "in", 0),            // nothing moved: no row
	}
	rep := computeTraffic(first, second, 10*time.Second, 0.02)
	type row struct{ from, to, kind string }
	got := map[row]trafficRow{}
	for _, r := range rep.Rows {
		got[row{r.From, r.To, r.Kind}] = r
	}
	want := map[row]struct {
		bytes          float64
		cross, unknown bool
	}{
		{"a", "a", "client_records"}:       {900 + 1800, false, false},
		{"a", "b", "client_records"}:       {300, true, false},
		{"b", "a", "link"}:                 {30, true, false},
		{"c", "a", "wal_read"}:             {600, true, false},
		{"b", "c", "gossip"}:               {10, true, false},
		{"c", "unknown", "client_records"}: {100, false, true},
	}
	// a→a client_records is one row (in: from the client's zone a to a; out: a to a).
	if len(got) != len(want) {
		t.Fatalf("rows %+v", rep.Rows)
	}
	for k, w := range want {
		r, ok := got[k]
		if !ok || r.Bytes != w.bytes || r.Cross != w.cross || r.Unknown != w.unknown || !near(r.BytesPerSec, w.bytes/10) {
			t.Fatalf("row %v: %+v, want %+v", k, r, w)
		}
	}
	if rep.ProducedBytes != 1200 || rep.ConsumedBytes != 1900 {
		t.Fatalf("produced %v consumed %v", rep.ProducedBytes, rep.ConsumedBytes)
	}
	if rep.CrossRecordBytes != 300 || rep.CrossBytes != 300+30+600+10 || rep.UnknownRecordBytes != 100 {
		t.Fatalf("cross records %v, cross %v, unknown %v", rep.CrossRecordBytes, rep.CrossBytes, rep.UnknownRecordBytes)
	}
	if rep.CrossControlBytes != 30+600+10 || !near(rep.Month.WeirRecordGB+rep.Month.WeirControlGB, rep.Month.WeirCrossGB) {
		t.Fatalf("control %v, month %+v", rep.CrossControlBytes, rep.Month)
	}
	if !near(rep.CrossRecordShare, 300.0/3100) || !near(rep.CrossShare, 940.0/3100) {
		t.Fatalf("shares %v %v", rep.CrossRecordShare, rep.CrossShare)
	}
	// Kafka: 8/3 of produced + 2/3 of consumed.
	if wantK := 8.0/3*1200 + 2.0/3*1900; !near(rep.KafkaCrossBytes, wantK) {
		t.Fatalf("kafka %v, want %v", rep.KafkaCrossBytes, wantK)
	}
	m := rep.Month
	perMonth := 730 * 3600 / 10.0 / (1 << 30)
	if m == nil || !near(m.WeirCrossGB, 940*perMonth) || !near(m.WeirUSD, 940*perMonth*0.02) ||
		!near(m.KafkaCrossGB, rep.KafkaCrossBytes*perMonth) || !near(m.KafkaUSD, rep.KafkaCrossBytes*perMonth*0.02) ||
		!near(m.UnknownGB, 100*2.0/3*perMonth) {
		t.Fatalf("month %+v", m)
	}
	// Rows are ordered by zones, then kind.
	for i := 1; i < len(rep.Rows); i++ {
		a, b := rep.Rows[i-1], rep.Rows[i]
		if a.From > b.From || a.From == b.From && a.To > b.To {
			t.Fatalf("rows out of order: %+v", rep.Rows)
		}
	}

	// One scrape: totals, no rates, no month.
	tot := computeTraffic(nil, second, 0, 0.02)
	if tot.Month != nil || tot.IntervalSeconds != 0 || tot.ProducedBytes != 1900+300 {
		t.Fatalf("totals %+v", tot)
	}
	// An idle cluster (gossip and follow polls only): its crossing is said as control
	// bytes, not as a share of zero records, and only control traffic is priced.
	idle := computeTraffic(map[string]trafficSample{"7": sample("b", "c", "gossip", "out", 10)},
		map[string]trafficSample{"7": sample("b", "c", "gossip", "out", 1010)}, 10*time.Second, 0.02)
	var buf bytes.Buffer
	printTraffic(&buf, idle)
	if out := buf.String(); !strings.Contains(out, "no records (idle); control bytes 1000 B") || strings.Contains(out, "%") ||
		!strings.Contains(out, "control traffic only") || strings.Contains(out, "Kafka for the same volume") {
		t.Fatalf("idle cluster:\n%s", out)
	}
	buf.Reset()
	printTraffic(&buf, rep)
	if out := buf.String(); !strings.Contains(out, "record bytes 300 B (9.68% of produced+consumed), control bytes 640 B (20.65%)") {
		t.Fatalf("busy cluster:\n%s", out)
	}
	// Nothing produced: no division by zero.
	if e := computeTraffic(map[string]trafficSample{}, map[string]trafficSample{}, time.Second, 0.02); e.CrossShare != 0 || e.Month.WeirUSD != 0 {
		t.Fatalf("empty %+v", e)
	}
}

// Two brokers' /metrics (one labelled as weir dev labels its brokers), with their
// counters moving between the two scrapes.
func TestAdminTrafficCommand(t *testing.T) {
	type broker struct {
		tr   *routing.Traffic
		reg  *prometheus.Registry
		hits atomic.Int32
	}
	var brs []*broker
	var urls []string
	for i, zone := range []string{"a", "b"} {
		b := &broker{reg: prometheus.NewRegistry()}
		var reg prometheus.Registerer = b.reg
		if i == 0 {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"node": "broker-1"}, reg)
		}
		b.tr = routing.NewTraffic(zone, reg)
		defer b.tr.Close()
		h := promhttp.HandlerFor(b.reg, promhttp.HandlerOpts{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b.hits.Add(1) == 2 { // between the scrapes
				if b.tr.LocalZone() == "a" {
					b.tr.Counter("a", routing.KindClientRecords).Add(routing.In, 3<<20)
					b.tr.Counter("b", routing.KindPeer).Add(routing.In, 1000) // b's out is what counts
				} else {
					b.tr.Counter("b", routing.KindClientRecords).Add(routing.Out, 6<<20)
					b.tr.Counter("a", routing.KindPeer).Add(routing.Out, 1000)
					b.tr.Counter("", routing.KindClientRecords).Add(routing.In, 1<<20)
				}
			}
			h.ServeHTTP(w, r)
		}))
		defer srv.Close()
		b.tr.Counter("x", routing.KindGossip).Add(routing.Out, 777) // before the first scrape: not in the difference
		brs = append(brs, b)
		urls = append(urls, strings.TrimPrefix(srv.URL, "http://"))
	}
	var out bytes.Buffer
	err := runAdminTraffic(context.Background(), []string{"--metrics", strings.Join(urls, ","), "--interval", "20ms", "--json"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	var rep trafficReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.ProducedBytes != 4<<20 || rep.ConsumedBytes != 6<<20 || rep.CrossBytes != 1000 || rep.UnknownRecordBytes != 1<<20 || len(rep.Endpoints) != 2 {
		t.Fatalf("report %s", out.String())
	}
	if rep.Month == nil || rep.Month.KafkaUSD <= rep.Month.WeirUSD || rep.IntervalSeconds < 0.02 {
		t.Fatalf("month %s", out.String())
	}

	// Text: totals since start (one scrape).
	out.Reset()
	if err := runAdminTraffic(context.Background(), []string{"--metrics", "http://" + urls[0] + "," + urls[1], "--interval", "0"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"totals since the brokers started", "FROM ZONE", "link", "cross-zone", "zone unknown", "Kafka for the same volume"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "per month") {
		t.Fatalf("a monthly estimate without an interval:\n%s", out.String())
	}

	// No counters, an unreachable endpoint, bad flags.
	empty := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer empty.Close()
	if err := runAdminTraffic(context.Background(), []string{"--metrics", empty.URL, "--interval", "0"}, &out); err == nil || !strings.Contains(err.Error(), routing.MetricName) {
		t.Fatalf("no counters: %v", err)
	}
	if err := runAdminTraffic(context.Background(), []string{"--metrics", "127.0.0.1:1", "--interval", "0", "--timeout", "1s"}, &out); err == nil {
		t.Fatal("unreachable endpoint: no error")
	}
	if err := runAdminTraffic(context.Background(), []string{"--metrics", ",", "--interval", "0"}, &out); err == nil {
		t.Fatal("no endpoints: no error")
	}
	if err := runAdminTraffic(context.Background(), []string{"--price-per-gb", "-1"}, &out); err == nil {
		t.Fatal("negative price: no error")
	}
}

func TestMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9644":             "http://127.0.0.1:9644/metrics",
		"http://h:1":                 "http://h:1/metrics",
		"https://h:1/custom/metrics": "https://h:1/custom/metrics",
		"http://h:1/metrics":         "http://h:1/metrics",
	} {
		if got := metricsURL(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if humanBytes(512) != "512 B" || humanBytes(3<<20) != "3.0 MiB" {
		t.Fatal(humanBytes(512), humanBytes(3<<20))
	}
}
