package zonelab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/ackcheck"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/test/nfsfs"
)

// Zone faults on the lab file system (FSx profile, one mount per broker) with
// zone-tagged producers in every zone: first a zone partition (the zone cut off from
// the other zones and the controllers by its veths, the file system still reachable),
// healed; then a zone outage (its broker and its controller SIGKILLed), restarted.
// For each: the surviving zones' partitions resume (per-partition unavailability logged
// as p50/p99), the cut-off zone's clients get no ack after its lease (2.25 s at most)
// until the heal, and what its clients were told is logged. At the end every acked
// record is read back at its offset, once (no loss, no offset with two values).
func TestZoneFaultsFSx(t *testing.T) {
	needNetns(t)
	nfsfs.Require(t)
	bin := weirBin(t)
	model := nfsfs.NewModel(nfsfs.FSx)
	cut := envDuration(t, "WEIR_ZONE_FAULT_FOR", 12*time.Second)
	l := startLab(t, Config{Bin: bin, Controllers: 3, BrokersPerZone: 1, FSx: model,
		BrokerArgs: []string{"--group-initial-rebalance-delay", "100ms"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const topic, parts = "zf", 9
	if err := l.CreateTopic(ctx, "a", topic, parts); err != nil {
		t.Fatal(err)
	}
	ld := startZoneLoad(t, l, topic, parts)
	testutil.Eventually(t, time.Minute, "every zone's producer acked on every partition", func() bool {
		return ld.partitionsAcked(time.Time{}) == parts*len(l.Zones())
	})

	// Zone partition of a.
	before, err := l.Topic(ctx, "b", topic)
	if err != nil {
		t.Fatal(err)
	}
	fault := time.Now()
	if err := l.Partition("a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(cut) // on purpose: the partition lasts this long
	healAt := time.Now()
	if err := l.Heal("a"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, "every zone acks on every partition after the heal", func() bool {
		return ld.partitionsAcked(healAt) == parts*len(l.Zones())
	})
	ld.report(t, "zone-partition a", "a", before.LeaderZone, fault, healAt, true)

	// Zone outage of c: its broker and its controller (controller 3 of a, b, c).
	if before, err = l.Topic(ctx, "b", topic); err != nil {
		t.Fatal(err)
	}
	fault = time.Now()
	for _, b := range l.ZoneBrokers("c") {
		b.Signal(syscall.SIGKILL)
	}
	l.Controllers[2].Signal(syscall.SIGKILL)
	time.Sleep(cut) // on purpose: the outage lasts this long
	restart := time.Now()
	for _, p := range append([]*Proc{l.Controllers[2]}, l.ZoneBrokers("c")...) {
		p.Stop(time.Second) // reap the killed process
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 2*time.Minute, "every zone acks on every partition after the restart", func() bool {
		return ld.partitionsAcked(restart) == parts*len(l.Zones())
	})
	ld.report(t, "zone-outage c", "c", before.LeaderZone, fault, restart, false)
	ld.finish()
	r := ld.verify(ctx, t, l, topic)
	t.Logf("checker: %v", r)
	if !r.OK() {
		t.Fatalf("checker: %v", r)
	}
	q, n := model.CommitStats(0.5, 0.99, 0.999)
	t.Logf("FSx model: %d COMMITs, p50 %v p99 %v p99.9 %v", n, q[0], q[1], q[2])
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// zoneLoad is one zone-tagged idempotent producer per zone writing unique values to
// every partition in turn; minority clients give up on a record after 5 s, so what
// they are told shows as errors.
type zoneLoad struct {
	chk  *ackcheck.Checker
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	acks    map[string][]zoneAck      // by zone
	batches map[string][]zoneBatch    // by zone: batches acked, by which broker
	errs    map[string][]zoneErr      // by zone: failed records
	warns   map[string]map[string]int // by zone: franz-go's retried errors, by text
}

type zoneAck struct {
	part       int32
	sent, when time.Time
}

type zoneBatch struct {
	node, part int32
	n          int
	when       time.Time
}

// zoneHook records which broker acked each batch of a zone's producer.
type zoneHook struct {
	ld   *zoneLoad
	zone string
}

func (h zoneHook) OnProduceBatchWritten(meta kgo.BrokerMetadata, _ string, part int32, m kgo.ProduceBatchMetrics) {
	h.ld.mu.Lock()
	h.ld.batches[h.zone] = append(h.ld.batches[h.zone], zoneBatch{meta.NodeID, part, m.NumRecords, time.Now()})
	h.ld.mu.Unlock()
}

type zoneErr struct {
	when time.Time
	err  string
}

// zoneLogger keeps the errors franz-go retries (the brokers' answers) per zone.
type zoneLogger struct {
	ld   *zoneLoad
	zone string
}

func (g zoneLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (g zoneLogger) Log(_ kgo.LogLevel, msg string, kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "err" {
			g.ld.mu.Lock()
			g.ld.warns[g.zone][msg+": "+fmt.Sprint(kv[i+1])]++
			g.ld.mu.Unlock()
		}
	}
}

func startZoneLoad(t *testing.T, l *Lab, topic string, parts int) *zoneLoad {
	ctx, stop := context.WithCancel(context.Background())
	ld := &zoneLoad{chk: ackcheck.New(), stop: stop, acks: map[string][]zoneAck{}, errs: map[string][]zoneErr{}, batches: map[string][]zoneBatch{},
		warns: map[string]map[string]int{}}
	t.Cleanup(ld.stop)
	for _, z := range l.Zones() {
		ld.warns[z] = map[string]int{}
		seeds, err := l.seeds(z)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := l.kgoClient(z, seeds, true, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(5*time.Second), kgo.ProducerLinger(0),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.WithLogger(zoneLogger{ld, z}), kgo.WithHooks(zoneHook{ld, z}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			tk := time.NewTicker(10 * time.Millisecond)
			defer tk.Stop()
			var pending sync.WaitGroup
			defer pending.Wait()
			for seq := 0; ctx.Err() == nil; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
				}
				p, v, sent := int32(seq%parts), fmt.Sprintf("%s-%07d", z, seq), time.Now()
				pending.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
					defer pending.Done()
					ld.mu.Lock()
					defer ld.mu.Unlock()
					if err != nil {
						ld.chk.Failed()
						ld.errs[z] = append(ld.errs[z], zoneErr{time.Now(), err.Error()})
						return
					}
					ld.chk.Acked(ackcheck.TP{Topic: topic, Partition: r.Partition}, r.Offset, v)
					ld.acks[z] = append(ld.acks[z], zoneAck{r.Partition, sent, time.Now()})
				})
			}
		}()
	}
	return ld
}

// finish stops producing and waits for every record to be acked or failed.
func (ld *zoneLoad) finish() {
	ld.stop()
	ld.wg.Wait()
}

// partitionsAcked counts (zone, partition) pairs with an ack of a record sent after at.
func (ld *zoneLoad) partitionsAcked(at time.Time) int {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	seen := map[string]bool{}
	for z, as := range ld.acks {
		for _, a := range as {
			if a.sent.After(at) {
				seen[fmt.Sprint(z, a.part)] = true
			}
		}
	}
	return len(seen)
}

// allAckedAfter is the time from at to the last first ack (over the zone's partitions)
// of a record sent after at, over all zones.
func (ld *zoneLoad) allAckedAfter(at time.Time) time.Duration {
	var worst time.Duration
	for _, ds := range ld.unavailability(at) {
		for _, d := range ds {
			worst = max(worst, d)
		}
	}
	return worst.Round(time.Millisecond)
}

// unavailability is, per zone, per partition, the time from at to the first ack of a
// record sent after at.
func (ld *zoneLoad) unavailability(at time.Time) map[string]map[int32]time.Duration {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	out := map[string]map[int32]time.Duration{}
	for z, as := range ld.acks {
		out[z] = map[int32]time.Duration{}
		for _, a := range as {
			if a.sent.After(at) {
				if d, ok := out[z][a.part]; !ok || a.when.Sub(at) < d {
					out[z][a.part] = a.when.Sub(at)
				}
			}
		}
	}
	return out
}

// report logs the surviving zones' per-partition unavailability (from the fault to the
// first ack of a record sent after it), apart for the partitions the faulty zone led
// and the others; checks, for a partition (lease), that the cut-off zone's clients got
// no ack from after its lease (fault + 2.25 s) until end; and logs what the faulty
// zone's clients were told.
func (ld *zoneLoad) report(t *testing.T, name, zone string, leaders map[int32]string, fault, end time.Time, lease bool) {
	t.Helper()
	var led, other []time.Duration
	for z, m := range ld.unavailability(fault) {
		if z == zone {
			continue
		}
		for p, d := range m {
			if leaders[p] == zone {
				led = append(led, d)
			} else {
				other = append(other, d)
			}
		}
	}
	t.Logf("%s (%v): surviving zones' clients, from the fault to the first ack of a record produced after it: partitions zone %s led %s; other partitions %s",
		name, end.Sub(fault).Round(time.Millisecond), zone, pct(led), pct(other))
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if lease {
		// A record sent after the lease ran out (fault + 2.25 s at the latest) cannot
		// have been appended under a valid lease: no ack for one may come from the
		// cut-off zone before the heal. (Acks of records sent before can arrive late:
		// a Produce request is answered whole, after its proxied partitions time out.)
		leaseEnd := fault.Add(2250 * time.Millisecond)
		var bad []string
		lateOld := 0
		for _, a := range ld.acks[zone] {
			switch {
			case a.sent.After(leaseEnd) && a.when.Before(end):
				bad = append(bad, fmt.Sprintf("p%d sent at fault+%v acked at fault+%v", a.part, a.sent.Sub(fault).Round(time.Millisecond), a.when.Sub(fault).Round(time.Millisecond)))
			case a.when.After(leaseEnd) && a.when.Before(end):
				lateOld++
			}
		}
		var batches []string
		for _, b := range ld.batches[zone] {
			if b.when.After(leaseEnd) && b.when.Before(end) {
				batches = append(batches, fmt.Sprintf("broker %d p%d %d records at fault+%v", b.node, b.part, b.n, b.when.Sub(fault).Round(time.Millisecond)))
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s: zone %s's clients got %d acks of records sent after its lease ended (fault + 2.25 s), before the heal: %v; batches acked then: %v",
				name, zone, len(bad), bad[:min(len(bad), 8)], batches[:min(len(batches), 8)])
		} else {
			t.Logf("%s: zone %s's clients got no ack of a record sent after its lease ended, until the heal; %d acks of records sent before arrived after it: %v",
				name, zone, lateOld, batches[:min(len(batches), 8)])
		}
	}
	failed := 0
	texts := map[string]int{}
	for _, e := range ld.errs[zone] {
		if e.when.After(fault) && e.when.Before(end.Add(5*time.Second)) {
			failed++
			texts[e.err]++
		}
	}
	t.Logf("%s: zone %s's clients: %d records failed (delivery timeout 5 s): %v; errors franz-go retried (whole run): %v",
		name, zone, failed, top(texts), top(ld.warns[zone]))
}

func top(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	var out []string
	for _, k := range ks[:min(4, len(ks))] {
		out = append(out, fmt.Sprintf("%d× %q", m[k], k))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(time.Millisecond)
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d zone-partitions)", at(0.5), at(0.99), at(1), len(ds))
}

// verify reads every partition back (from zone b) into the checker.
func (ld *zoneLoad) verify(ctx context.Context, t *testing.T, l *Lab, topic string) ackcheck.Report {
	t.Helper()
	seeds, _ := l.seeds("b")
	cl, err := l.kgoClient("b", seeds, false)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offs[topic][o.Partition] = kgo.NewOffset().AtStart()
	})
	rd, err := l.kgoClient("b", seeds, false, kgo.ConsumePartitions(offs), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := map[int32]int64{}
	for {
		done := true
		for p, end := range want {
			done = done && got[p] >= end
		}
		if done {
			break
		}
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v of %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			ld.chk.Read(ackcheck.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, string(r.Value))
			got[r.Partition] = max(got[r.Partition], r.Offset+1)
		})
	}
	return ld.chk.Verify()
}
