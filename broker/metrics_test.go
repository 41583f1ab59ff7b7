package broker

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
)

// metricValue is the value of the series name{labels} in g (a counter's or gauge's value,
// a histogram's sample count), and whether it exists.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func mustMetric(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := metricValue(t, g, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// One broker: request and error counters per API, partitions led, groups by state, and the
// lag of a group that committed behind the end.
func TestBrokerMetrics(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.OffsetsTopicPartitions = 2 })
	adm := b.admin(t)
	createTopic(t, adm, "m", 2, nil)
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, n := range []int{10, 4} {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "m", Partition: int32(p), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v := mustMetric(t, b.reg, "weir_broker_requests_total", map[string]string{"api": "Produce"}); v < 14 {
		t.Fatalf("Produce requests %v, want ≥ 14", v)
	}
	if v, ok := metricValue(t, b.reg, "weir_broker_request_errors_total", map[string]string{"api": "Produce"}); ok {
		t.Fatalf("Produce errors %v before any failed", v)
	}
	// A batch with a bad CRC: one CORRUPT_MESSAGE.
	bad := makeBatch(-1, -1, -1, []byte("x"))
	bad[len(bad)-1] ^= 0xff
	r := rawProduce(t, b.client(t), "m", bad)
	if r.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch answered %v", kerr.ErrorForCode(r.ErrorCode))
	}
	want := map[string]string{"api": "Produce", "error": kerr.ErrorForCode(r.ErrorCode).(*kerr.Error).Message}
	if v := mustMetric(t, b.reg, "weir_broker_request_errors_total", want); v != 1 {
		t.Fatalf("Produce %s errors = %v, want 1", kerr.ErrorForCode(r.ErrorCode).(*kerr.Error).Message, v)
	}

	// A group that committed 3 of 10 and 4 of 4: lag 7 and 0; it is Empty (no members).
	offs := kadm.Offsets{}
	offs.AddOffset("m", 0, 3, -1)
	offs.AddOffset("m", 1, 4, -1)
	if resp, err := adm.CommitOffsets(testCtx(t), "lagging", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	lag := func(p string) float64 {
		return mustMetric(t, b.reg, "weir_broker_consumer_group_lag", map[string]string{"group": "lagging", "topic": "m", "partition": p})
	}
	if l0, l1 := lag("0"), lag("1"); l0 != 7 || l1 != 0 {
		t.Fatalf("lag %v %v, want 7 0", l0, l1)
	}
	if v := mustMetric(t, b.reg, "weir_broker_consumer_groups", map[string]string{"state": "Empty"}); v != 1 {
		t.Fatalf("Empty groups %v", v)
	}
	if v := mustMetric(t, b.reg, "weir_broker_consumer_groups", map[string]string{"state": "Stable"}); v != 0 {
		t.Fatalf("Stable groups %v", v)
	}
	// "m" and __consumer_offsets (2 partitions, created by the commit's FindCoordinator).
	if v := mustMetric(t, b.reg, "weir_broker_partitions_led", nil); v != 4 {
		t.Fatalf("partitions led %v, want 4", v)
	}
	// Lag follows the end of the log.
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "m", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if l := lag("1"); l != 1 {
		t.Fatalf("lag after one more record %v, want 1", l)
	}
	// The WAL's metrics share the broker's Registerer.
	if v := mustMetric(t, b.reg, "weir_wal_sync_duration_seconds", nil); v == 0 {
		t.Fatal("no WAL syncs observed")
	}
	mustMetric(t, b.reg, "weir_wal_group_commit_entries", nil)
	mustMetric(t, b.reg, "weir_wal_appends_total", nil)

	// Close unregisters everything, so a restart can use the same Registerer.
	b.Close()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		t.Errorf("%s still registered after Close", mf.GetName())
	}
}

// The coordinator of a group reports its lag also for partitions another broker leads,
// by asking that leader for its high watermark; the other broker reports none for it.
func TestConsumerGroupLagAcrossBrokers(t *testing.T) {
	root := t.TempDir()
	store := metatest.NewStore(1, 2)
	regs := map[int32]*prometheus.Registry{}
	brokers := map[int32]*Broker{}
	for _, id := range []int32{1, 2} {
		cfg := DefaultConfig()
		cfg.NodeID = id
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.DataDir = filepath.Join(root, fmt.Sprintf("data-%d", id))
		cfg.WALRoot = filepath.Join(root, "wal")
		cfg.WAL.SegmentSize = 4 << 20
		cfg.OffsetsTopicPartitions = 2
		cfg.Logger = discardLogger()
		regs[id] = prometheus.NewRegistry()
		cfg.Registerer = regs[id]
		b, err := New(cfg, store)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers[id] = b
	}
	// Round-robin placement: partition 0 on broker 1, partition 1 on broker 2.
	if _, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "x", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	cl := clientFor(t, brokers[1], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, n := range []int{5, 9} {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "x", Partition: int32(p), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset("x", 0, 1, -1)
	offs.AddOffset("x", 1, 2, -1)
	for _, g := range []string{"g1", "g2", "g3", "g4"} { // some land on each coordinator
		resp, err := kadm.NewClient(cl).CommitOffsets(testCtx(t), g, offs)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, resp.Error())
		}
	}
	owners := map[int32]int{}
	for _, g := range []string{"g1", "g2", "g3", "g4"} {
		var owner int32
		for id, b := range brokers {
			if b.groupStatus(g) == group.Owned {
				owner = id
			}
		}
		owners[owner]++
		other := 3 - owner
		for p, want := range map[string]float64{"0": 4, "1": 7} {
			labels := map[string]string{"group": g, "topic": "x", "partition": p}
			if v := mustMetric(t, regs[owner], "weir_broker_consumer_group_lag", labels); v != want {
				t.Fatalf("%s partition %s: lag %v on its coordinator %d, want %v", g, p, v, owner, want)
			}
			if v, ok := metricValue(t, regs[other], "weir_broker_consumer_group_lag", labels); ok {
				t.Fatalf("%s partition %s: broker %d (not its coordinator) reports lag %v", g, p, other, v)
			}
		}
	}
	if len(owners) != 2 {
		t.Fatalf("every group on one coordinator (%v): the remote path is not exercised both ways", owners)
	}
	for id, reg := range regs {
		if v := mustMetric(t, reg, "weir_broker_consumer_group_lag_lookup_failures_total", nil); v != 0 {
			t.Fatalf("broker %d: %v lag lookup failures", id, v)
		}
		if v := mustMetric(t, reg, "weir_broker_partitions_led", nil); v != 2 { // x and __consumer_offsets
			t.Fatalf("broker %d leads %v partitions, want 2", id, v)
		}
	}
}
