package zonelab

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// What TestZoneLatencies sends: latRate records/s of latSize bytes for latSeconds, per
// phase (two phases).
const (
	latRate    = 500
	latSize    = 1024
	latSeconds = 10
)

// latRow is one measured path: percentiles of its latencies, in milliseconds.
type latRow struct {
	Name      string  `json:"name"`
	Partition int32   `json:"partition"`
	Leader    string  `json:"leader_zone"`
	Via       string  `json:"via"`
	Records   int     `json:"records"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
}

type latReport struct {
	RecordsPerSec int      `json:"records_per_sec"`
	RecordSize    int      `json:"record_size"`
	Seconds       int      `json:"seconds_per_phase"`
	Produce       []latRow `json:"produce_ack"`
	EndToEnd      []latRow `json:"end_to_end"`
	// CrossZoneBytes is what crossed zone veths during each phase (veth counters:
	// Ethernet frames), in all and per direction ("b→a").
	CrossZoneBytes map[string]uint64            `json:"cross_zone_bytes"`
	Veths          map[string]map[string]uint64 `json:"cross_zone_links"` // per veth; the key is kept for earlier reports
	Note           string                       `json:"note"`
}

func newLatRow(name string, p int32, leader, via string, ds []time.Duration) latRow {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(q float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return ms(s[min(len(s)-1, int(q*float64(len(s))))])
	}
	r := latRow{Name: name, Partition: p, Leader: leader, Via: via, Records: len(s), P50: at(0.50), P99: at(0.99)}
	if len(s) > 0 {
		r.Max = ms(s[len(s)-1])
	}
	return r
}

// The latency zone routing costs, from zone a, at a modest fixed rate (latRate records/s
// of latSize bytes, latSeconds per phase) with franz-go in this process (connections
// opened in zone a), one broker per zone and a topic of three partitions, each led in
// another zone:
//
//   - produce ack latency (Produce call to its promise, acks=all, no linger) of a
//     tagged producer to the partition led in zone a (direct) and to the one led in
//     zone b (through zone a's broker, which proxies it to the leader);
//   - end-to-end latency (the send time the producer stamps in each value to the time
//     a consumer in this process gets it) of a tagged consumer of the zone-b partition
//     (served by zone a's broker as a read replica) and of an untagged one (Metadata
//     names the real leader, so it reads from zone b); and, as the baseline, of a
//     tagged consumer of the zone-a partition.
//
// The veths add no delay: the numbers are Weir's own (proxy, read replica) cost
// on this machine. The test logs them (and writes them as JSON to $WEIR_ZONELAB_REPORT)
// and asserts only correctness: every record acked, and read back by every consumer, in
// order.
func TestZoneLatencies(t *testing.T) {
	needNetns(t)
	bin := weirBin(t)
	l := startLab(t, Config{Bin: bin, Controllers: 3, BrokersPerZone: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const topic = "latency"
	leaders := placeOnePerZone(ctx, t, l, bin, topic)
	direct, proxied := partitionLedIn(t, leaders, "a"), partitionLedIn(t, leaders, "b")
	t.Logf("leaders (partition:zone): %v; direct partition %d, proxied partition %d", leaders, direct, proxied)
	seeds := l.Bootstrap("a")

	rep := latReport{RecordsPerSec: latRate, RecordSize: latSize, Seconds: latSeconds, CrossZoneBytes: map[string]uint64{}, Veths: map[string]map[string]uint64{},
		Note: "network namespaces on one machine: the veths add no delay; the numbers are Weir's proxy and read-replica overhead"}
	n := latRate * latSeconds

	// Phase 1: the partition led in zone a, produced to and read from zone a's broker.
	// Phase 2: the partition led in zone b, through zone a's broker (tagged), and read
	// both through it (tagged) and from the leader in zone b (untagged).
	type consumer struct {
		name, via string
		tagged    bool
	}
	phases := []struct {
		name      string
		p         int32
		via       string
		consumers []consumer
	}{
		{"direct", direct, "leader in zone a", []consumer{{"tagged, partition led in zone a", "leader in zone a", true}}},
		{"proxied", proxied, "zone a's broker, proxying to the leader in zone b", []consumer{
			{"tagged, partition led in zone b", "zone a's broker (read replica)", true},
			{"untagged, partition led in zone b", "the leader in zone b", false},
		}},
	}
	for _, ph := range phases {
		before, err := l.CrossZoneBytes()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		e2e := make([][]time.Duration, len(ph.consumers))
		cerrs := make([]error, len(ph.consumers))
		for i, c := range ph.consumers {
			cl, err := l.kgoClient("a", seeds, c.tagged, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				topic: {ph.p: kgo.NewOffset().At(0)}}))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				e2e[i], cerrs[i] = readStamped(ctx, cl, ph.p, n)
			}()
		}
		acks, err := produceStamped(ctx, l, seeds, topic, ph.p, n)
		if err != nil {
			t.Fatalf("%s: %v", ph.name, err)
		}
		// The consumers have until ctx ends (they stop at n records).
		wg.Wait()
		after, err := l.CrossZoneBytes()
		if err != nil {
			t.Fatal(err)
		}
		d := after.Sub(before)
		rep.CrossZoneBytes[ph.name] = d.CrossZone
		rep.Veths[ph.name] = map[string]uint64{}
		for _, k := range d.Veths() {
			if !k.Control() && d.Bytes[k] > 0 {
				rep.Veths[ph.name][k.String()] = d.Bytes[k]
			}
		}
		rep.Produce = append(rep.Produce, newLatRow("produce, tagged, "+ph.name, ph.p, leaders[ph.p], ph.via, acks))
		for i, c := range ph.consumers {
			if cerrs[i] != nil {
				t.Errorf("consumer %q: %v", c.name, cerrs[i])
			}
			rep.EndToEnd = append(rep.EndToEnd, newLatRow("e2e, "+c.name, ph.p, leaders[ph.p], c.via, e2e[i]))
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "from zone a, %d records/s of %d B for %d s per phase (ms; the veths add no delay):\n", latRate, latSize, latSeconds)
	fmt.Fprintf(&b, "%-36s %4s %-6s %8s %8s %8s %8s  %s\n", "path", "part", "leader", "records", "p50", "p99", "max", "via")
	for _, r := range append(append([]latRow(nil), rep.Produce...), rep.EndToEnd...) {
		fmt.Fprintf(&b, "%-36s %4d %-6s %8d %8.2f %8.2f %8.2f  %s\n", r.Name, r.Partition, r.Leader, r.Records, r.P50, r.P99, r.Max, r.Via)
	}
	for _, ph := range phases {
		fmt.Fprintf(&b, "cross-zone bytes, %s phase: %d %v\n", ph.name, rep.CrossZoneBytes[ph.name], rep.Veths[ph.name])
	}
	b.WriteString("(proxied phase: the untagged consumer's fetches from zone b and the proxy's links, with their headers and ACKs)\n")
	t.Log(b.String())
	if path := os.Getenv("WEIR_ZONELAB_REPORT"); path != "" {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("report written to %s", path)
	}
}

// placeOnePerZone creates topic with one partition per zone (from zone a) and moves
// leaders until each zone leads exactly one; it returns each partition's leader zone.
func placeOnePerZone(ctx context.Context, t *testing.T, l *Lab, bin, topic string) map[int32]string {
	t.Helper()
	zones := l.Zones()
	if err := l.CreateTopic(ctx, zones[0], topic, int32(len(zones))); err != nil {
		t.Fatal(err)
	}
	// Created through the controllers; the queried broker's view follows.
	testutil.EventuallyNoError(t, time.Minute, topic+" in the view of zone "+zones[0]+"'s broker", func() error {
		if _, err := l.Topic(ctx, zones[0], topic); errors.Is(err, kerr.UnknownTopicOrPartition) && ctx.Err() == nil {
			return err
		}
		return nil // any other error: the loop below reports it
	})
	for {
		st, err := l.Topic(ctx, zones[0], topic)
		if err != nil {
			t.Fatal(err)
		}
		leading := map[string][]int32{}
		for p, z := range st.LeaderZone {
			leading[z] = append(leading[z], p)
		}
		var missing string
		for _, z := range zones {
			if len(leading[z]) == 0 {
				missing = z
				break
			}
		}
		if missing == "" {
			return st.LeaderZone
		}
		// A partition of a zone that leads more than one moves to the missing zone.
		var p int32 = -1
		for _, ps := range leading {
			if len(ps) > 1 {
				slices.Sort(ps)
				p = ps[len(ps)-1]
			}
		}
		to := l.Bootstrap(missing)
		var id int
		for _, b := range l.Brokers {
			if b.Zone == missing {
				id = b.ID
			}
		}
		t.Logf("moving partition %d to broker %d (zone %s, %v)", p, id, missing, to)
		if _, err := l.RunInZone(ctx, Control, bin, "admin", "move", "--controllers", strings.Join(l.ControllerAPIs(), ","),
			"--topic", topic, "--partition", fmt.Sprint(p), "--to", fmt.Sprint(id), "--timeout", "20s"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, time.Minute, fmt.Sprintf("partition %d led in zone %s in the view of zone %s's broker", p, missing, zones[0]), func() bool {
			st, err := l.Topic(ctx, zones[0], topic)
			return err == nil && st.LeaderZone[p] == missing
		})
	}
}

func partitionLedIn(t *testing.T, leaders map[int32]string, zone string) int32 {
	t.Helper()
	for p, z := range leaders {
		if z == zone {
			return p
		}
	}
	t.Fatalf("no partition led in zone %s: %v", zone, leaders)
	return -1
}

// produceStamped sends n records of latSize bytes to partition p at latRate records/s
// with a tagged franz-go producer in zone a; each value starts with its send time (unix
// ns) and its sequence number. It returns each record's ack latency (Produce call to
// promise) and checks that every record was acked, at consecutive offsets in send order.
func produceStamped(ctx context.Context, l *Lab, seeds []string, topic string, p int32, n int) ([]time.Duration, error) {
	cl, err := l.kgoClient("a", seeds, true, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pool := make([]byte, 1<<20+latSize)
	for i := range pool {
		pool[i] = byte(mrand.Uint32())
	}
	lat := make([]time.Duration, n)
	offsets := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	interval := time.Second / latRate
	start := time.Now()
	for i := 0; i < n; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // on purpose: the fixed rate
		}
		v := make([]byte, latSize)
		off := mrand.IntN(1 << 20)
		copy(v, pool[off:off+latSize])
		t0 := time.Now()
		binary.BigEndian.PutUint64(v[0:8], uint64(t0.UnixNano()))
		binary.BigEndian.PutUint64(v[8:16], uint64(i))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Partition: p, Value: v}, func(r *kgo.Record, err error) {
			defer wg.Done()
			lat[i], offsets[i], errs[i] = time.Since(t0), r.Offset, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return lat, fmt.Errorf("partition %d: produce failed: %w", p, err)
	}
	for i := 1; i < n; i++ {
		if offsets[i] != offsets[0]+int64(i) {
			return lat, fmt.Errorf("partition %d: record %d acked at offset %d, record 0 at %d: not consecutive", p, i, offsets[i], offsets[0])
		}
	}
	return lat, nil
}

// readStamped reads n records of partition p (from the offset the client was given)
// and returns their end-to-end latencies; records must come at consecutive offsets
// with consecutive sequence numbers from 0.
func readStamped(ctx context.Context, cl *kgo.Client, p int32, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	next := int64(-1)
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("partition %d: %d of %d records read: %w", p, len(out), n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
				ferr = err
			}
		})
		if ferr != nil {
			return out, fmt.Errorf("partition %d: %w", p, ferr)
		}
		now := time.Now()
		var rerr error
		fs.EachRecord(func(r *kgo.Record) {
			if rerr != nil || len(out) >= n {
				return
			}
			if r.Partition != p || len(r.Value) < 16 {
				rerr = fmt.Errorf("unexpected record: partition %d, %d bytes", r.Partition, len(r.Value))
				return
			}
			seq := int64(binary.BigEndian.Uint64(r.Value[8:16]))
			if next >= 0 && r.Offset != next || seq != int64(len(out)) {
				rerr = fmt.Errorf("partition %d: record %d (offset %d) after %d records (next offset %d): out of order", p, seq, r.Offset, len(out), next)
				return
			}
			next = r.Offset + 1
			out = append(out, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value[0:8])))))
		})
		if rerr != nil {
			return out, rerr
		}
	}
	return out, nil
}
