package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
)

// BenchmarkGroupRebalance measures rebalance time for 10 members of a 100-partition topic
// (issue 26 item 2), the classic protocol (franz-go's cooperative-sticky balancer:
// JoinGroup/SyncGroup, client-side assignment) against KIP-848 (ConsumerGroupHeartbeat,
// server-side uniform assignor), in the same run on the same in-process broker:
//
//   - join: from the 10th member's start (the 10 are started back to back into a new
//     group) until every partition is assigned exactly once, 10 to each member, and its
//     owner has read a record of it since it was assigned;
//   - leave: from one member's Close (it leaves the group) until its partitions are
//     assigned to the other 9 and read by them.
//
// A producer writes one record to every partition each 100 ms throughout, so "read"
// follows the assignment by at most a fetch. Assignment is what the clients' own
// callbacks say; a partition assigned while another member holds it fails the run.
// Both protocols get the same heartbeat interval (the classic client's, the KIP-848
// coordinator's): WEIR_GROUP_HEARTBEAT (default 1s, Kafka's defaults are 3 s classic and
// 5 s KIP-848); WEIR_GROUP_INITIAL_DELAY sets the classic group's initial rebalance
// delay (default 3s, as Kafka; KIP-848 has none).
//
//	go test -run '^$' -bench BenchmarkGroupRebalance -benchtime 3x ./cluster
func BenchmarkGroupRebalance(b *testing.B) {
	hb, err := time.ParseDuration(envStr("WEIR_GROUP_HEARTBEAT", "1s"))
	if err != nil {
		b.Fatal(err)
	}
	delay, err := time.ParseDuration(envStr("WEIR_GROUP_INITIAL_DELAY", "3s"))
	if err != nil {
		b.Fatal(err)
	}
	const members, partitions = 10, 100
	c, err := Start(Config{Dir: b.TempDir(), Controllers: 1, Brokers: 1, NoGossip: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BrokerConfig: func(bc *broker.Config) {
			bc.OffsetsTopicPartitions = 1
			bc.Group.ConsumerHeartbeatInterval = hb
			bc.Group.InitialRebalanceDelay = delay
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const topic = "rebalance"
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	stop := tickProducer(b, c, topic, partitions)
	defer stop()

	var groups atomic.Int32
	for _, proto := range []string{"classic", "kip848"} {
		b.Run(proto, func(b *testing.B) {
			var join, leave []time.Duration
			for range b.N {
				group := fmt.Sprintf("rb-%s-%d", proto, groups.Add(1))
				j, l := rebalanceOnce(b, c, proto, group, topic, members, partitions, hb)
				join, leave = append(join, j), append(leave, l)
				b.Logf("%s: join %v, leave %v", proto, j.Round(time.Millisecond), l.Round(time.Millisecond))
			}
			b.ReportMetric(median(join).Seconds(), "join-s")
			b.ReportMetric(median(leave).Seconds(), "leave-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// tickProducer writes one record to every partition of topic each 100 ms until stopped.
func tickProducer(b *testing.B, c *Cluster, topic string, partitions int) func() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			for p := range partitions {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("x")}, nil)
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done; cl.Close() }
}

// rbTracker is who holds and reads each partition, by the members' callbacks and polls.
type rbTracker struct {
	mu      sync.Mutex
	owner   map[int32]string
	reading map[int32]bool // the owner read a record of it since it was assigned
	errs    []string
}

func (r *rbTracker) assigned(name string, ps map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range ps {
		for _, p := range l {
			if o, ok := r.owner[p]; ok && o != name {
				r.errs = append(r.errs, fmt.Sprintf("partition %d assigned to %s while %s holds it", p, name, o))
			}
			r.owner[p], r.reading[p] = name, false
		}
	}
}

func (r *rbTracker) released(name string, ps map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range ps {
		for _, p := range l {
			if r.owner[p] == name {
				delete(r.owner, p)
				delete(r.reading, p)
			}
		}
	}
}

// settled reports whether every partition is held and read by a member of live, each of
// them holding at least min.
func (r *rbTracker) settled(live map[string]bool, partitions, min int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for p := range int32(partitions) {
		o, ok := r.owner[p]
		if !ok || !live[o] || !r.reading[p] {
			return false
		}
		n[o]++
	}
	for m := range live {
		if n[m] < min {
			return false
		}
	}
	return true
}

type rbMember struct {
	cl   *kgo.Client
	stop func()
}

func startRebalanceMember(b *testing.B, c *Cluster, proto, name, group, topic string, hb time.Duration, r *rbTracker) *rbMember {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { r.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx) // as franz-go does without a callback
			r.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { r.released(name, ps) }),
	}
	if proto == "kip848" {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(hb))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if r.owner[rec.Partition] == name {
					r.reading[rec.Partition] = true
				}
			})
			r.mu.Unlock()
		}
	}()
	return &rbMember{cl: cl, stop: func() { cl.Close(); <-done }}
}

// rebalanceOnce runs one join and one leave of a new group and returns their times.
func rebalanceOnce(b *testing.B, c *Cluster, proto, group, topic string, members, partitions int, hb time.Duration) (join, leave time.Duration) {
	r := &rbTracker{owner: map[int32]string{}, reading: map[int32]bool{}}
	live := map[string]bool{}
	ms := map[string]*rbMember{}
	defer func() {
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Add(1)
			go func() { defer wg.Done(); m.stop() }()
		}
		wg.Wait()
	}()
	wait := func(what string, start time.Time, min int) time.Duration {
		deadline := start.Add(2 * time.Minute)
		for !r.settled(live, partitions, min) {
			if time.Now().After(deadline) {
				b.Fatalf("%s %s: not settled after 2 minutes", proto, what)
			}
			time.Sleep(5 * time.Millisecond) // on purpose: polling the tracker; 5 ms is the resolution
		}
		d := time.Since(start)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.errs) > 0 {
			b.Fatalf("%s %s: %v", proto, what, r.errs)
		}
		return d
	}
	var start time.Time
	for i := range members {
		name := fmt.Sprintf("m%02d", i)
		ms[name], live[name] = startRebalanceMember(b, c, proto, name, group, topic, hb, r), true
		start = time.Now() // the last member's start
	}
	join = wait("join", start, partitions/members)

	leaver := fmt.Sprintf("m%02d", members-1)
	start = time.Now()
	delete(live, leaver)
	ms[leaver].stop()
	delete(ms, leaver)
	leave = wait("leave", start, 0)
	return join, leave
}
