package cluster

// The KIP-848 consumer group protocol with real franz-go consumers
// (kgo.ServerSideBalancer: ConsumerGroupHeartbeat, server-side assignment).

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/internal/testutil"
)

// owners tracks which consumer holds each partition, by the clients' own callbacks: a
// partition assigned while another consumer still holds it is a double assignment.
type owners struct {
	mu     sync.Mutex
	owner  map[int32]string
	events int
	errs   []string
	seen   map[int64]int // offset -> times read (partition*1e6 + offset)
}

func (o *owners) assigned(name string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	for _, l := range ps {
		for _, p := range l {
			if prev, ok := o.owner[p]; ok && prev != name {
				o.errs = append(o.errs, fmt.Sprintf("partition %d assigned to %s while %s holds it", p, name, prev))
			}
			o.owner[p] = name
		}
	}
}

func (o *owners) released(name string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	for _, l := range ps {
		for _, p := range l {
			if o.owner[p] == name {
				delete(o.owner, p)
			}
		}
	}
}

func (o *owners) count(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, m := range o.owner {
		if m == name {
			n++
		}
	}
	return n
}

// total is how many records were read, and how many of them more than once.
func (o *owners) total() (n, dup int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range o.seen {
		n++
		if k > 1 {
			dup++
		}
	}
	return
}

// describeConsumerGroup is group by ConsumerGroupDescribe once it answers Stable.
func describeConsumerGroup(t *testing.T, raw *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var g kmsg.ConsumerGroupDescribeResponseGroup
	testutil.Eventually(t, 30*time.Second, "ConsumerGroupDescribe answers", func() bool {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp := raw.RequestSharded(ctxFor(t, 10*time.Second), req)
		if len(resp) != 1 || resp[0].Err != nil {
			return false
		}
		g = resp[0].Resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		return g.ErrorCode == 0 && g.State == "Stable"
	})
	return g
}

// sameEpochs fails unless after has the members of before, each at its epoch, and the
// same group epoch: nobody rejoined (a rejoin starts from epoch 0 and bumps the group).
func sameEpochs(t *testing.T, what string, before, after kmsg.ConsumerGroupDescribeResponseGroup) {
	t.Helper()
	epochs := map[string]int32{}
	for _, m := range before.Members {
		epochs[m.MemberID] = m.MemberEpoch
	}
	if len(after.Members) != len(before.Members) {
		t.Fatalf("%d members after %s, %d before", len(after.Members), what, len(before.Members))
	}
	for _, m := range after.Members {
		if e, ok := epochs[m.MemberID]; !ok || e != m.MemberEpoch {
			t.Fatalf("member %s: epoch %d after %s, %d (known %v) before", m.MemberID, m.MemberEpoch, what, e, ok)
		}
	}
	if after.Epoch != before.Epoch {
		t.Fatalf("group epoch %d after %s, %d before", after.Epoch, what, before.Epoch)
	}
}

// trackedGroupOpts are a group consumer's options that record in o what name reads from
// topic and owns.
func trackedGroupOpts(name, group, topic string, o *owners) []kgo.Opt {
	return []kgo.Opt{
		kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.assigned(name, ps) }),
		// A revoked callback replaces franz-go's commit on revoke: commit first, as it does.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				o.mu.Lock()
				o.errs = append(o.errs, name+": commit on revoke: "+err.Error())
				o.mu.Unlock()
			}
			o.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.released(name, ps) }),
	}
}

// pollInto polls cl until the returned function is called (or cl is closed), counting
// every record read in o.seen; each (if not nil) sees every record too, under o.mu.
func pollInto(cl *kgo.Client, o *owners, each func(*kgo.Record)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			o.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				o.seen[int64(r.Partition)*1_000_000+r.Offset]++
				if each != nil {
					each(r)
				}
			})
			o.mu.Unlock()
		}
	}()
	return func() { cancel(); <-done }
}

func startKIP848Consumer(t *testing.T, c *Cluster, name, group, topic string, o *owners) *kgo.Client {
	t.Helper()
	cl := newClient(t, c, append(trackedGroupOpts(name, group, topic, o), kgo.ServerSideBalancer())...)
	t.Cleanup(pollInto(cl, o, nil))
	return cl
}

// start848Cluster is startCluster with 250 ms KIP-848 heartbeats (the protocol is on by
// default) and the controller's balancer off (it would move a group's coordinator behind
// the test's back).
func start848Cluster(t *testing.T) *Cluster {
	t.Helper()
	return startCluster(t, func(cfg *Config) {
		cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
		own := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			own(b)
			b.Group.ConsumerHeartbeatInterval = 250 * time.Millisecond
		}
	})
}

func TestKIP848ConsumersWithFranzGo(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := start848Cluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "kip848", "g848"
	if err := createTopic(t, adm, 6, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(600)
	o := &owners{owner: map[int32]string{}, seen: map[int64]int{}}
	startKIP848Consumer(t, c, "c1", group, topic, o)
	startKIP848Consumer(t, c, "c2", group, topic, o)
	total := o.total
	testutil.Eventually(t, 60*time.Second, "600 records read, 3 partitions each", func() bool {
		n, _ := total()
		return n == 600 && o.count("c1") == 3 && o.count("c2") == 3
	})
	if _, dup := total(); dup != 0 {
		t.Fatalf("%d records read twice", dup)
	}
	// The server's view: one consumer group, two members at the group's epoch.
	describe := func() kmsg.ConsumerGroupDescribeResponseGroup { return describeConsumerGroup(t, raw, group) }
	if g := describe(); len(g.Members) != 2 || g.AssignorName != "uniform" {
		t.Fatalf("described: %d members, assignor %q", len(g.Members), g.AssignorName)
	}

	// A third consumer: partitions move to it only after their owner revoked them.
	startKIP848Consumer(t, c, "c3", group, topic, o)
	testutil.Eventually(t, 60*time.Second, "2 partitions each of 3 consumers", func() bool {
		return o.count("c1") == 2 && o.count("c2") == 2 && o.count("c3") == 2
	})
	produce(600)
	testutil.Eventually(t, 60*time.Second, "1200 records read", func() bool { n, _ := total(); return n == 1200 })
	before := describe()

	// The coordinator moves gracefully: members keep their epochs, nothing is revoked or
	// reassigned.
	o.mu.Lock()
	events := o.events
	o.mu.Unlock()
	from := findCoordinator(t, adm, group)
	moveCoordinator(t, c, adm, group, from%3+1)
	produce(300)
	testutil.Eventually(t, 60*time.Second, "1500 records read", func() bool { n, _ := total(); return n == 1500 })
	after := describe()
	if n, dup := total(); dup != 0 {
		t.Fatalf("%d of %d records read twice", dup, n)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.events != events {
		t.Fatalf("the coordinator move caused %d assignment callbacks", o.events-events)
	}
	sameEpochs(t, "the move", before, after)
	if len(o.errs) > 0 {
		t.Fatal(o.errs)
	}
}
