package broker

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// A graceful move's target reads the partition's earlier ranges while the leader still
// serves it, and at the switch reads only the leader's range (moveprep.go). Partition mv/0
// was written on broker 1, moved to broker 2 and written there (chain [1, 2]); then it
// moves to broker 3, whose reads of broker 1's WAL stall:
//   - while broker 3 cannot finish its preload, broker 2 still acks writes (before, it
//     refused them from the moment the move began until the switch);
//   - broker 3, asked about the move without a preload of it (as after a restart),
//     answers "not ready" at once instead of holding the leader for moveReadyWait;
//   - after the switch broker 3 serves without opening broker 1's WAL files again
//     (before, its load at the switch scanned broker 1's WAL);
//   - every record, read back from broker 3, is there at its offset.
func TestMoveTargetPreloadsWhileLeaderServes(t *testing.T) {
	root := t.TempDir()
	store := metatest.NewStore(1, 2, 3)
	b1 := startClusterBroker(t, root, 1, store)
	b2 := startClusterBroker(t, root, 2, store)
	fs := waltest.NewFaultFS(wal.OSFS())
	b3 := startClusterBrokerWith(t, root, 3, store, func(c *Config) { c.WAL.FS = fs })
	if _, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "mv", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	part := func() metadata.Partition { return store.View().Topics["mv"].Partitions[0] }
	if l := part().Leader; l != 1 {
		t.Fatalf("partition placed on %d", l)
	}
	next := 0
	produce := func(b *Broker) {
		t.Helper()
		cl := clientFor(t, b)
		testutil.Eventually(t, time.Minute, fmt.Sprintf("broker %d acks v%d", b.cfg.NodeID, next), func() bool {
			r := rawProduce(t, cl, "mv", makeBatch(-1, -1, -1, []byte(fmt.Sprintf("v%d", next))))
			if r.ErrorCode == 0 && r.BaseOffset != int64(next) {
				t.Fatalf("v%d acked at offset %d", next, r.BaseOffset)
			}
			return r.ErrorCode == 0
		})
		next++
	}
	for range 3 {
		produce(b1)
	}
	if err := store.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the move to broker 2 completes", func() bool { return part().Leader == 2 && !part().Moving })
	for range 3 {
		produce(b2)
	}

	// Broker 3's reads of broker 1's WAL stall until released; once counting, broker 3's
	// opens of broker 1's WAL files after the switch are counted (a load at the switch
	// scans the directories it reads, opening their segments afresh).
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	stalled := make(chan struct{}, 1)
	var stall, counting atomic.Bool
	var opensAfterSwitch atomic.Int32
	stall.Store(true)
	b1Dir := string(filepath.Separator) + "broker-1" + string(filepath.Separator)
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if (op != waltest.OpRead && op != waltest.OpOpen) || !strings.Contains(name, b1Dir) {
			return nil
		}
		if counting.Load() && op == waltest.OpOpen && part().Leader == 3 {
			opensAfterSwitch.Add(1)
		}
		if stall.Load() {
			select {
			case stalled <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	if err := store.BeginMove("mv", 0, 3); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		t.Fatal("broker 3 never read broker 1's WAL ahead of the switch")
	}
	// The leader keeps serving while its target preloads.
	for range 3 {
		cl := clientFor(t, b2)
		r := rawProduce(t, cl, "mv", makeBatch(-1, -1, -1, []byte(fmt.Sprintf("v%d", next))))
		if r.ErrorCode != 0 || r.BaseOffset != int64(next) {
			t.Fatalf("broker 2 during the preload: v%d: %v at %d (want acked at %d)", next, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, next)
		}
		next++
	}
	if mp := part(); mp.Leader != 2 || !mp.Moving {
		t.Fatalf("the move completed while broker 3 was preloading: %+v", mp)
	}

	// A target asked about a move it knows but has no preload of (it started while the
	// move was pending) answers "not ready" at once rather than after moveReadyWait.
	k := partKey{store.View().Topics["mv"].ID, 0}
	b3.moves.mu.Lock()
	pre := b3.moves.pre[k]
	delete(b3.moves.pre, k)
	b3.moves.mu.Unlock()
	if pre == nil {
		t.Fatal("broker 3 has no preload of the moving partition")
	}
	answered := make(chan []byte, 1)
	asked := time.Now()
	b3.serveMoveReady(peer.MoveReadyRequest{Part: peer.PartitionRef{Topic: k.id, Partition: 0}, Gen: part().MoveGen, Wait: moveReadyWait},
		func(b []byte) { answered <- b })
	select {
	case b := <-answered:
		if len(b) != 1 || b[0] != peer.MoveNotReady || time.Since(asked) > 5*time.Second {
			t.Fatalf("answer %v after %v", b, time.Since(asked))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a target without a preload of a move it knows kept the leader waiting")
	}
	b3.moves.mu.Lock()
	b3.moves.pre[k] = pre
	b3.moves.mu.Unlock()

	// Let the preload finish and the move complete.
	counting.Store(true)
	stall.Store(false)
	unblock()
	testutil.Eventually(t, time.Minute, "the move to broker 3 completes", func() bool { return part().Leader == 3 && !part().Moving })
	produce(b3)
	counting.Store(false)
	if n := opensAfterSwitch.Load(); n != 0 {
		t.Fatalf("broker 3 opened broker 1's WAL files %d times after the switch: its load read the ranges it had preloaded", n)
	}

	// Everything reads back from broker 3 (broker 1's batches through the preload's readers).
	cons := clientFor(t, b3, kgo.ConsumeTopics("mv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeN(t, cons, next)
	for i, r := range got[0] {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("record %d: offset %d value %s", i, r.Offset, r.Value)
		}
	}
	_ = b1
}
