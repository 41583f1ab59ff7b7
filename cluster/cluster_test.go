package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// Parallel tests: the tests that call t.Parallel (groups, share groups, transactions,
// compaction, the tier on MinIO, TLS listeners, the bench) spend most of their time
// waiting for timeouts, sessions and uploads (13 of them used 0.53 of a core over 165 s
// alone). They run after the others, two at a time (go test's -parallel, GOMAXPROCS):
// the package took 394 s alone, the longest of make test's. Tests that measure a
// failover or a move, or kill brokers on a schedule, stay serial: a neighbour's load
// would be in their timings.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startCluster(t *testing.T, mod func(*Config)) *Cluster {
	t.Helper()
	cfg := Config{
		Dir: t.TempDir(), Controllers: 3, Brokers: 3, Logger: testLogger(),
		BrokerConfig: func(b *broker.Config) {
			b.WAL.SegmentSize = 8 << 20
			b.Group.InitialRebalanceDelay = 100 * time.Millisecond
			b.OffsetsTopicPartitions = 6
		},
		ControllerConfig: func(c *controller.Config) {},
	}
	if mod != nil {
		mod(&cfg)
	}
	own := cfg.ControllerConfig
	cfg.ControllerConfig = func(cc *controller.Config) {
		testTimeouts(cc)
		if own != nil {
			own(cc) // a test's own settings win
		}
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testTimeouts gives the in-process clusters of these tests room on a busy machine: the
// suite runs several packages side by side, with the race detector, on 2 cores, where a
// broker's heartbeat or a Raft leader's can be late by more than the production defaults
// allow (400 ms without a heartbeat before a fence vote, 500 ms Raft heartbeats), and a
// broker fenced because the machine stalled is a different test from the one written.
// Failover still runs the same code, only later. The timing itself is measured by
// `weir bench failover`, not here.
func testTimeouts(cc *controller.Config) {
	cc.SuspectTimeout = 1500 * time.Millisecond // granted lease: 1.4 s
	cc.ReportedTimeout = 2 * time.Second
	cc.LeaseTimeout = 3 * time.Second
	cc.HeartbeatTimeout = 1500 * time.Millisecond
	cc.ElectionTimeout = 1500 * time.Millisecond
	cc.LeaderLeaseTimeout = 750 * time.Millisecond
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// endOffsets lists topic's end offsets, retrying while a partition answers a
// retriable error (a balancer or a test's own move can leave the client's metadata one
// leader behind: NOT_LEADER_FOR_PARTITION, which a client is meant to retry after a
// metadata refresh, as kadm does not).
func endOffsets(t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	var ends kadm.ListedOffsets
	testutil.EventuallyNoError(t, time.Minute, "the end offsets of "+topic, func() error {
		var err error
		ends, err = adm.ListEndOffsets(ctxFor(t, 30*time.Second), topic)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	return ends
}

// createTopic creates topic with partitions. TOPIC_ALREADY_EXISTS for a topic of that
// many partitions counts as created: on this busy machine a broker may be fenced and
// restarted while the request is in flight (closing its connections), and the client's
// retry of a create that worked is answered so, as Kafka answers it.
func createTopic(t *testing.T, adm *kadm.Client, partitions int32, topic string) error {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	_, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		td, derr := adm.ListTopics(ctx, topic)
		if derr == nil && len(td[topic].Partitions) == int(partitions) {
			t.Logf("create %s answered TOPIC_ALREADY_EXISTS (a retry of a create that worked): it has its %d partitions", topic, partitions)
			return nil
		}
	}
	return err
}

func newClient(t *testing.T, c *Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(60 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceValues produces n records per partition of topic and returns value → offset.
func produceValues(t *testing.T, cl *kgo.Client, topic string, partitions, n int, prefix string) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-p%d-%05d", prefix, p, i)
			wg.Add(1)
			cl.Produce(ctxFor(t, 60*time.Second), &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
					return
				}
				mu.Lock()
				acked[v] = r.Offset
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return acked
}

func consumeAll(t *testing.T, c *Cluster, topic string, want int) map[string]*kgo.Record {
	t.Helper()
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxFor(t, 90*time.Second)
	got := map[string]*kgo.Record{}
	next := map[int32]int64{}
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, expected %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got[string(r.Value)] = r
		})
	}
	return got
}

// A 3-zone cluster: partitions spread over the brokers, every broker's Metadata agrees,
// and records produced through the cluster read back at their acked offsets.
func TestClusterProduceConsume(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 12, "orders"); err != nil {
		t.Fatal(err)
	}
	// Leaders spread evenly: 4 partitions per broker, one broker per zone.
	var orders *metadata.Topic
	// Broker 1's watch may lag the broker that created it.
	testutil.Eventually(t, 30*time.Second, "orders in broker 1's view", func() bool {
		orders = c.Broker(0).Client.View().Topics["orders"]
		return orders != nil
	})
	leaders := map[int32]int{}
	for _, p := range orders.Partitions {
		leaders[p.Leader]++
	}
	if len(leaders) != 3 || leaders[1] != 4 || leaders[2] != 4 || leaders[3] != 4 {
		t.Fatalf("leaders: %v", leaders)
	}
	acked := produceValues(t, cl, "orders", 12, 100, "a")
	got := consumeAll(t, c, "orders", len(acked))
	for v, off := range acked {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s acked at %d, read %v", v, off, r)
		}
	}
	// Every broker answers Metadata the same way, with racks a, b, c.
	var first string
	for i := range c.KafkaAddrs() {
		one, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[i]))
		if err != nil {
			t.Fatal(err)
		}
		md, err := kadm.NewClient(one).Metadata(ctxFor(t, 30*time.Second), "orders")
		one.Close()
		if err != nil {
			t.Fatal(err)
		}
		var racks []string
		for _, b := range md.Brokers {
			racks = append(racks, fmt.Sprintf("%d:%s", b.NodeID, *b.Rack))
		}
		sort.Strings(racks)
		var parts []string
		for _, p := range md.Topics["orders"].Partitions.Sorted() {
			parts = append(parts, fmt.Sprintf("%d@%d/%d", p.Partition, p.Leader, p.LeaderEpoch))
		}
		desc := fmt.Sprint(racks, parts)
		if first == "" {
			first = desc
			if fmt.Sprint(racks) != "[1:a 2:b 3:c]" {
				t.Fatalf("racks: %v", racks)
			}
		} else if desc != first {
			t.Fatalf("broker %d's metadata %s differs from %s", i+1, desc, first)
		}
	}
}
