package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
)

// scrape is one /metrics scrape, parsed with the Prometheus text parser.
type scrape map[string]*dto.MetricFamily

// scrapeText GETs url (a promhttp handler) in the text exposition format and parses it.
func scrapeText(t *testing.T, url string) scrape {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// series returns the values of name's series whose labels include want, keyed by their
// full label set (a histogram's value is its sample count).
func (s scrape) series(name string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	mf := s[name]
	if mf == nil {
		return out
	}
next:
	for _, m := range mf.GetMetric() {
		var ls []string
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			v = m.GetUntyped().GetValue()
		}
		sort.Strings(ls)
		out[strings.Join(ls, ",")] = v
	}
	return out
}

// sum adds the values of name's series matching want.
func (s scrape) sum(name string, want map[string]string) float64 {
	total := 0.0
	for _, v := range s.series(name, want) {
		total += v
	}
	return total
}

// max is the largest value of name's series matching want (0 without series).
func (s scrape) max(name string, want map[string]string) float64 {
	m := 0.0
	for _, v := range s.series(name, want) {
		if v > m {
			m = v
		}
	}
	return m
}

func (s scrape) has(name string) bool { return len(s.series(name, nil)) > 0 }

// A 3-controller 3-broker cluster on one registry: /metrics parses, carries every node
// with its label, and the request, byte, WAL, partition, group-lag and Raft metrics move
// when traffic flows.
func TestClusterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) { cfg.Registerer = reg })
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	t.Cleanup(srv.Close)
	get := func() scrape { return scrapeText(t, srv.URL) }

	testutil.Eventually(t, 30*time.Second, "gossip sees all three brokers", func() bool {
		s := get()
		for i := 1; i <= 3; i++ {
			if s.sum("weir_gossip_members_alive", map[string]string{"node": fmt.Sprintf("broker-%d", i)}) != 3 {
				return false
			}
		}
		return true
	})
	before := get()
	for _, node := range []string{"controller-1", "controller-2", "controller-3"} {
		if len(before.series("weir_controller_raft_term", map[string]string{"node": node})) != 1 {
			t.Fatalf("no raft term for %s", node)
		}
	}
	if v := before.sum("weir_controller_raft_state", map[string]string{"state": "Leader"}); v != 1 {
		t.Fatalf("%v controllers say they are Raft leader", v)
	}
	if v := before.max("weir_controller_raft_term", nil); v < 1 {
		t.Fatalf("raft term %v", v)
	}

	// Traffic: a topic of 6 partitions (2 per broker), 50 records each, read back.
	const topic, partitions, perPartition = "metered", 6, 50
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, partitions, topic); err != nil {
		t.Fatal(err)
	}
	acked := produceValues(t, cl, topic, partitions, perPartition, "m")
	consumeAll(t, c, topic, len(acked))

	// A group that committed offset 10 of 50 everywhere: lag 40 per partition. Committing
	// creates __consumer_offsets (6 partitions in these tests).
	offs := kadm.Offsets{}
	for p := int32(0); p < partitions; p++ {
		offs.AddOffset(topic, p, 10, -1)
	}
	if resp, err := adm.CommitOffsets(ctxFor(t, 30*time.Second), "behind", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// A corrupt batch: one CORRUPT_MESSAGE error on the partition's leader.
	bad := kafkatest.Batch(-1, -1, -1, []byte("x"))
	bad[len(bad)-1] ^= 0xff
	md, err := adm.Metadata(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, bad
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	leader := md.Topics[topic].Partitions[0].Leader
	resp, err := req.RequestWith(ctxFor(t, 30*time.Second), cl.Broker(int(leader))) // Produce is not routed by kgo.Request
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch to broker %d: %v %+v", leader, err, resp)
	}

	var after scrape
	testutil.Eventually(t, 30*time.Second, "partitions led to add up", func() bool {
		after = get()
		return after.sum("weir_broker_partitions_led", nil) == partitions+6
	})
	for i := 1; i <= 3; i++ {
		node := map[string]string{"node": fmt.Sprintf("broker-%d", i)}
		if v := after.sum("weir_broker_partitions_led", node); v != 4 {
			t.Errorf("broker-%d leads %v partitions, want 4 (2 of %s, 2 of __consumer_offsets)", i, v, topic)
		}
	}

	// Requests per API, and errors found in responses.
	for _, api := range []string{"Produce", "Fetch", "Metadata", "CreateTopics", "OffsetCommit"} {
		b, a := before.sum("weir_broker_requests_total", map[string]string{"api": api}), after.sum("weir_broker_requests_total", map[string]string{"api": api})
		if a <= b {
			t.Errorf("%s requests did not move: %v → %v", api, b, a)
		}
		if b, a := before.sum("weir_broker_request_duration_seconds", map[string]string{"api": api}), after.sum("weir_broker_request_duration_seconds", map[string]string{"api": api}); a <= b {
			t.Errorf("%s latency observations did not move: %v → %v", api, b, a)
		}
	}
	if v := after.sum("weir_broker_request_errors_total", map[string]string{"api": "Produce", "error": "CORRUPT_MESSAGE"}); v != 1 {
		t.Errorf("Produce CORRUPT_MESSAGE errors = %v, want 1", v)
	}

	// Bytes in and out for the topic: every batch was fetched at least once.
	in := after.sum("weir_broker_produce_bytes_total", map[string]string{"topic": topic})
	out := after.sum("weir_broker_fetch_bytes_total", map[string]string{"topic": topic})
	if in <= 0 || out < in { // batches may be compressed: no lower bound from the values
		t.Errorf("%s: %v bytes in, %v bytes out", topic, in, out)
	}
	if n := len(after.series("weir_broker_produce_bytes_total", map[string]string{"topic": topic})); n != 3 {
		t.Errorf("produce bytes of %s reported by %d brokers, want 3", topic, n)
	}

	// The WAL: appends, group commits and fdatasyncs, on every broker.
	for i := 1; i <= 3; i++ {
		node := map[string]string{"node": fmt.Sprintf("broker-%d", i)}
		for _, name := range []string{"weir_wal_sync_duration_seconds", "weir_wal_appends_total", "weir_wal_group_commit_entries", "weir_wal_group_commit_bytes"} {
			if a, b := after.sum(name, node), before.sum(name, node); a <= b {
				t.Errorf("broker-%d: %s did not move: %v → %v", i, name, b, a)
			}
		}
	}

	// Lag: 40 per partition, each series exported once (by the group's coordinator).
	for p := 0; p < partitions; p++ {
		ss := after.series("weir_broker_consumer_group_lag", map[string]string{"group": "behind", "topic": topic, "partition": fmt.Sprint(p)})
		if len(ss) != 1 {
			t.Fatalf("partition %d: lag series %v, want exactly one", p, ss)
		}
		for _, v := range ss {
			if v != perPartition-10 {
				t.Errorf("partition %d: lag %v, want %d", p, v, perPartition-10)
			}
		}
	}
	if v := after.sum("weir_broker_consumer_groups", map[string]string{"state": "Empty"}); v != 1 {
		t.Errorf("Empty groups %v, want 1", v)
	}
	if v := after.sum("weir_broker_consumer_group_lag_lookup_failures_total", nil); v != 0 {
		t.Errorf("%v lag lookup failures", v)
	}

	// Raft: creating a topic and __consumer_offsets committed and applied entries.
	if a, b := after.max("weir_controller_raft_commit_index", nil), before.max("weir_controller_raft_commit_index", nil); a <= b {
		t.Errorf("raft commit index did not move: %v → %v", b, a)
	}
	if a, b := after.sum("weir_controller_apply_duration_seconds", nil), before.sum("weir_controller_apply_duration_seconds", nil); a <= b {
		t.Errorf("controller apply latency observations did not move: %v → %v", b, a)
	}

	// A live group that reads everything and commits: Stable, and no lag once committed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gcl := newClient(t, c, kgo.ConsumerGroup("live"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	read := 0
	for read < len(acked) {
		fs := gcl.PollFetches(ctxFor(t, 60*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	if err := gcl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the live group to be Stable with no lag", func() bool {
		s := get()
		lag := s.series("weir_broker_consumer_group_lag", map[string]string{"group": "live"})
		if len(lag) != partitions || s.sum("weir_broker_consumer_groups", map[string]string{"state": "Stable"}) != 1 {
			return false
		}
		for _, v := range lag {
			if v != 0 {
				return false
			}
		}
		return true
	})
}
