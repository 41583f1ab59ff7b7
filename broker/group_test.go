package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// groupMember consumes in a goroutine and records what it read.
type groupMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   map[string]int
	parts  map[int32]bool
}

func joinGroup(t *testing.T, b *testBroker, group, topic string) *groupMember {
	m := &groupMember{seen: map[string]int{}, parts: map[int32]bool{}, done: make(chan struct{})}
	m.cl = b.client(t,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.AutoCommitInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, ps := range a {
				for _, p := range ps {
					m.parts[p] = true
				}
			}
			m.mu.Unlock()
		}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := m.cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				m.seen[string(r.Value)]++
				m.mu.Unlock()
			})
		}
	}()
	return m
}

func (m *groupMember) leave() {
	m.cancel()
	<-m.done
	m.cl.CommitUncommittedOffsets(context.Background())
	m.cl.LeaveGroup()
	m.cl.Close()
}

func (m *groupMember) assigned() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts)
}

// Three members share six partitions, rebalance as members leave, and committed offsets
// are honoured: after everyone leaves, a new member reads only what was produced since.
func TestConsumerGroupRebalanceAndCommits(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b.admin(t), "grp", 6, nil)
	prod := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: "grp", Partition: int32(i % 6), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("first", 600)

	members := []*groupMember{joinGroup(t, b, "g1", "grp"), joinGroup(t, b, "g1", "grp"), joinGroup(t, b, "g1", "grp")}
	total := func(ms []*groupMember) int {
		n := 0
		for _, m := range ms {
			m.mu.Lock()
			n += len(m.seen)
			m.mu.Unlock()
		}
		return n
	}
	testutil.Eventually(t, time.Minute, "all three members assigned", func() bool {
		return members[0].assigned() > 0 && members[1].assigned() > 0 && members[2].assigned() > 0
	})
	testutil.Eventually(t, time.Minute, "600 records consumed", func() bool { return total(members) >= 600 })

	members[2].leave()
	produce("second", 600)
	testutil.Eventually(t, time.Minute, "rebalanced members read the second wave", func() bool { return total(members[:2]) >= 1200-len(members[2].seen) })
	members[0].leave()
	members[1].leave()

	produce("third", 60)
	late := joinGroup(t, b, "g1", "grp")
	testutil.Eventually(t, time.Minute, "the new member reads the third wave", func() bool {
		late.mu.Lock()
		defer late.mu.Unlock()
		n := 0
		for v := range late.seen {
			if len(v) > 5 && v[:5] == "third" {
				n++
			}
		}
		return n == 60
	})
	// Nothing more may arrive: give a re-read of committed records half a second to show
	// up (a wait for something that must not happen, not synchronisation).
	time.Sleep(500 * time.Millisecond)
	late.mu.Lock()
	for v := range late.seen {
		if v[:5] != "third" {
			t.Errorf("re-read %s despite committed offsets", v)
		}
	}
	late.mu.Unlock()
	late.leave()

	// Committed offsets survive a restart.
	dir := b.dir
	b.Close()
	b2 := startBroker(t, dir, nil)
	offs, err := b2.admin(t).FetchOffsets(testCtx(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadmOffset) { sum += o.At })
	if sum != 1260 {
		t.Fatalf("committed offsets after restart sum to %d, want 1260", sum)
	}
}
