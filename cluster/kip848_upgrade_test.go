package cluster

// The online migration of a consumer group between the classic protocol and KIP-848
// (group.consumer.migration.policy, broker/group/consumer_migrate.go) with real franz-go
// consumers: a rolling restart of a classic group's members onto the consumer protocol,
// then back, while records are produced throughout.

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
)

// migrant is one incarnation of a consumer: stop closes it (a classic member leaves with
// LeaveGroup, a KIP-848 one with a heartbeat of epoch -1), committing what it read
// first; first is the offset of the first record it read of each partition (under o.mu).
type migrant struct {
	stop  func()
	first map[int32]int64
}

// startMigrant starts a consumer of group that reads topic with the classic protocol
// (franz-go's cooperative-sticky balancer) or the consumer protocol
// (kgo.ServerSideBalancer), recording what it reads and owns in o.
func startMigrant(t *testing.T, c *Cluster, name, group, topic string, classic bool, o *owners) *migrant {
	t.Helper()
	opts := append(trackedGroupOpts(name, group, topic, o), kgo.AutoCommitInterval(500*time.Millisecond))
	if classic {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.HeartbeatInterval(300*time.Millisecond), kgo.SessionTimeout(10*time.Second))
	} else {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(60 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := &migrant{first: map[int32]int64{}}
	stopPolling := pollInto(cl, o, func(r *kgo.Record) {
		if _, ok := m.first[r.Partition]; !ok {
			m.first[r.Partition] = r.Offset
		}
	})
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			stopPolling()
			cl.Close() // commits (revoke callback) and leaves the group
		})
	}
	t.Cleanup(m.stop)
	return m
}

// groupKind is what the coordinator says the group is: "consumer" with its numbers of
// classic and KIP-848 members (ConsumerGroupDescribe, member type 0 and 1), or "classic"
// with its state and member count (DescribeGroups).
func groupKind(t *testing.T, raw *kgo.Client, group string) string {
	t.Helper()
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{group}
	shards := raw.RequestSharded(ctxFor(t, 10*time.Second), cd)
	if len(shards) != 1 || shards[0].Err != nil {
		return "error"
	}
	g := shards[0].Resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode == 0 {
		classic, consumer := 0, 0
		for _, m := range g.Members {
			if m.MemberType == 0 {
				classic++
			} else {
				consumer++
			}
		}
		return fmt.Sprintf("consumer %s classic=%d consumer=%d", g.State, classic, consumer)
	}
	if g.ErrorCode != kerr.GroupIDNotFound.Code {
		return "error " + kerr.ErrorForCode(g.ErrorCode).Error()
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	shards = raw.RequestSharded(ctxFor(t, 10*time.Second), dg)
	if len(shards) != 1 || shards[0].Err != nil {
		return "error"
	}
	d := shards[0].Resp.(*kmsg.DescribeGroupsResponse).Groups[0]
	if d.ErrorCode != 0 {
		return "error " + kerr.ErrorForCode(d.ErrorCode).Error()
	}
	return fmt.Sprintf("classic %s members=%d", d.State, len(d.Members))
}

// A rolling restart of a classic group's consumers onto KIP-848 converts the group to a
// consumer group at the first restarted member (the classic members keep their
// partitions until the coordinator moves some of them), ending with no classic member;
// the roll back converts it to a classic group when the last KIP-848 member leaves.
// Records are produced throughout and every one is read (at least once).
func TestKIP848OnlineUpgradeAndDowngrade(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := start848Cluster(t)
	raw := newClient(t, c)
	const topic, group = "kip848u", "g848u"
	if err := createTopic(t, kadm.NewClient(raw), 6, topic); err != nil {
		t.Fatal(err)
	}

	// The producer runs until the end: what it had acked must all be read.
	var (
		pmu   sync.Mutex
		acked []int64
		perr  error
	)
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan struct{})
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	go func() {
		defer close(pdone)
		for i := 0; pctx.Err() == nil; i++ {
			r, err := prod.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).First()
			pmu.Lock()
			if err == nil {
				acked = append(acked, int64(r.Partition)*1_000_000+r.Offset)
			} else if pctx.Err() == nil && perr == nil {
				perr = err
			}
			pmu.Unlock()
			// On purpose: a steady trickle (about 100 records a second) across every
			// stage rather than a burst before the first.
			time.Sleep(10 * time.Millisecond)
		}
	}()
	stopProducer := func() {
		pcancel()
		<-pdone
	}
	defer stopProducer()

	o := &owners{owner: map[int32]string{}, seen: map[int64]int{}}
	names := []string{"c1", "c2", "c3"}
	ms := map[string]*migrant{}
	settled := func(what, want string) {
		t.Helper()
		var kind string
		testutil.Eventually(t, 90*time.Second, what, func() bool {
			n := 0
			for _, name := range names {
				n += o.count(name)
			}
			kind = groupKind(t, raw, group)
			return n == 6 && kind == want
		})
		t.Logf("%s: %s", what, kind)
	}
	readAll := func(what string) {
		t.Helper()
		pmu.Lock()
		want := append([]int64(nil), acked...)
		pmu.Unlock()
		testutil.Eventually(t, 90*time.Second, what, func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, k := range want {
				if o.seen[k] == 0 {
					return false
				}
			}
			return true
		})
	}

	// The group's committed offsets never go back across the conversions (they are the
	// group's, not its members').
	adm := kadm.NewClient(raw)
	last := map[int32]int64{}
	commitsKept := func(what string) {
		t.Helper()
		var offs kadm.OffsetResponses
		testutil.EventuallyNoError(t, 30*time.Second, "the committed offsets "+what, func() error {
			var err error
			offs, err = adm.FetchOffsets(ctxFor(t, 10*time.Second), group)
			if err == nil {
				err = offs.Error()
			}
			return err
		})
		offs.Each(func(r kadm.OffsetResponse) {
			if r.At < last[r.Partition] {
				t.Errorf("%s: partition %d committed at %d, before at %d", what, r.Partition, r.At, last[r.Partition])
			}
			last[r.Partition] = r.At
		})
	}

	for _, name := range names {
		ms[name] = startMigrant(t, c, name, group, topic, true, o)
	}
	settled("three classic consumers", "classic Stable members=3")
	readAll("the classic group reads what was produced")
	testutil.Eventually(t, 30*time.Second, "the classic group has committed offsets for every partition", func() bool {
		offs, err := adm.FetchOffsets(ctxFor(t, 10*time.Second), group)
		n := 0
		if err == nil {
			offs.Each(func(r kadm.OffsetResponse) {
				if r.Err == nil && r.At > 0 {
					n++
				}
			})
		}
		return n == 6
	})
	commitsKept("of the classic group")

	// restart replaces name's consumer by one of the other protocol, which must resume
	// every partition it reads at or after the group's commit when it started (not
	// from the start of the log: the conversions keep the group's offsets).
	restart := func(name string, classic bool, what, want string) {
		t.Helper()
		ms[name].stop()
		commitsKept("before " + what)
		floor := maps.Clone(last)
		ms[name] = startMigrant(t, c, name, group, topic, classic, o)
		settled(what, want)
		readAll(what + ": everything produced is read")
		o.mu.Lock()
		for p, off := range ms[name].first {
			if off < floor[p] {
				t.Errorf("%s: partition %d read from offset %d, below the group's commit %d", what, p, off, floor[p])
			}
		}
		o.mu.Unlock()
		commitsKept("after " + what)
	}
	// Upgrade, one consumer at a time.
	for i, name := range names {
		restart(name, false, name+" restarted on the consumer protocol",
			fmt.Sprintf("consumer Stable classic=%d consumer=%d", 2-i, i+1))
	}
	// Roll back, one consumer at a time: the last KIP-848 member's leave downgrades.
	for i, name := range names {
		want := fmt.Sprintf("consumer Stable classic=%d consumer=%d", i+1, 2-i)
		if i == len(names)-1 {
			want = "classic Stable members=3"
		}
		restart(name, true, name+" restarted on the classic protocol", want)
	}

	stopProducer()
	pmu.Lock()
	n, err := len(acked), perr
	pmu.Unlock()
	if err != nil {
		t.Fatalf("producing: %v", err)
	}
	readAll("every acked record is read")
	read, dup := o.total()
	t.Logf("%d records produced, %d read, %d of them more than once (around the switches)", n, read, dup)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.errs {
		// A commit refused around a switch (the member's generation or epoch moved)
		// costs duplicates only; a partition with two owners at once is a failure.
		if !strings.Contains(e, "commit on revoke") {
			t.Error(e)
		}
	}
}
