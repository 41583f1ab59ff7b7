package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// KIP-848 consumers across a coordinator failover: the coordinator's broker is killed
// (its topic partitions moved off first, so only the coordinator dies) and the broker
// that takes its __consumer_offsets partition over loads the group's durable consumer
// state. Every member goes on at its member epoch: no assignment callback fires (a
// member that rejoined with epoch 0 would lose its partitions and get them back), the
// group epoch does not move, every record is read exactly once and consumption resumes.
func TestKIP848SurvivesCoordinatorFailover(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := start848Cluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const topic, group = "kip848f", "g848f"
	if err := createTopic(t, adm, 6, topic); err != nil {
		t.Fatal(err)
	}
	victim := findCoordinator(t, adm, group)
	movePartitionsOff(t, c, topic, victim)
	_, idx := groupPartition(t, c, adm, group)

	prod := newClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 600)
	o := &owners{owner: map[int32]string{}, seen: map[int64]int{}}
	for _, name := range []string{"c1", "c2", "c3"} {
		startKIP848Consumer(t, c, name, group, topic, o)
	}
	testutil.Eventually(t, 60*time.Second, "600 records read, 2 partitions each of 3 consumers", func() bool {
		n, _ := o.total()
		return n == 600 && o.count("c1") == 2 && o.count("c2") == 2 && o.count("c3") == 2
	})
	before := describeConsumerGroup(t, newClient(t, c), group)
	o.mu.Lock()
	events := o.events
	o.mu.Unlock()

	fresh := newClient(t, c) // an admin client that never knew the dead coordinator
	to := killCoordinator(t, c, kadm.NewClient(fresh), group, victim, idx)
	t.Logf("coordinator %d killed, broker %d took over", victim, to)

	produce(600, 300)
	testutil.Eventually(t, 60*time.Second, "900 records read", func() bool { n, _ := o.total(); return n == 900 })
	// On purpose: 3 s is 12 heartbeat intervals, so every member has heartbeated the new
	// coordinator several times and a rejoin or revocation it started shows below.
	time.Sleep(3 * time.Second)
	after := describeConsumerGroup(t, fresh, group)
	sameEpochs(t, "the failover", before, after)
	if n, dup := o.total(); dup != 0 || n != 900 {
		t.Fatalf("%d records read, %d of them twice; want 900 once each", n, dup)
	}
	o.mu.Lock()
	moved := o.events - events
	o.mu.Unlock()
	if moved != 0 {
		t.Fatalf("the failover caused %d assignment callbacks (a member rejoined or partitions moved)", moved)
	}
	for _, name := range []string{"c1", "c2", "c3"} {
		if n := o.count(name); n != 2 {
			t.Fatalf("%s holds %d partitions after the failover, want 2", name, n)
		}
	}

	// The new coordinator knows who holds what: a fourth member gets partitions only as
	// their owners revoke them (owners.assigned records a double assignment).
	startKIP848Consumer(t, c, "c4", group, topic, o)
	testutil.Eventually(t, 60*time.Second, "6 partitions over 4 consumers", func() bool {
		n := 0
		for _, name := range []string{"c1", "c2", "c3", "c4"} {
			k := o.count(name)
			if k < 1 || k > 2 {
				return false
			}
			n += k
		}
		return n == 6
	})
	produce(900, 300)
	testutil.Eventually(t, 60*time.Second, "1200 records read", func() bool { n, _ := o.total(); return n == 1200 })
	if n, dup := o.total(); dup != 0 || n != 1200 {
		t.Fatalf("%d records read, %d of them twice; want 1200 once each", n, dup)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) > 0 {
		t.Fatal(o.errs)
	}
}
