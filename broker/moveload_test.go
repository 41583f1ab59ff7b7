package broker

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// A move that begins while the partition is still loading on its leader completes once
// the load finishes, without waiting for another metadata change: broker 2 is loading the
// partition it was just handed (its reads of broker 1's WAL stall) when the partition is
// moved back to broker 1.
func TestMoveBegunWhileLoadingCompletes(t *testing.T) {
	root := t.TempDir()
	store := metatest.NewStore(1, 2)
	b1 := startClusterBroker(t, root, 1, store)
	fs := waltest.NewFaultFS(wal.OSFS())
	b2 := startClusterBrokerWith(t, root, 2, store, func(c *Config) { c.WAL.FS = fs })
	if _, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "mv", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	leader := func() metadata.Partition { return store.View().Topics["mv"].Partitions[0] }
	testutil.Eventually(t, time.Minute, "broker 1 serves the new partition", func() bool {
		_, err := b1.lookup(store.View().Topics["mv"], 0, true)
		return err == nil
	})
	cl1 := clientFor(t, b1)
	for i := 0; i < 5; i++ {
		r := rawProduce(t, cl1, "mv", makeBatch(-1, -1, -1, []byte(fmt.Sprintf("v%d", i))))
		if r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %v at %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}

	// Broker 2's reads of broker 1's WAL stall until released.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	stalled := make(chan struct{}, 1)
	b1Dir := string(filepath.Separator) + "broker-1" + string(filepath.Separator)
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if (op == waltest.OpRead || op == waltest.OpOpen) && strings.Contains(name, b1Dir) {
			select {
			case stalled <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	if err := store.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the move to broker 2 completes", func() bool { return leader().Leader == 2 })
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		t.Fatal("broker 2 never read broker 1's WAL")
	}
	// While broker 2 is still loading: move the partition back.
	if err := store.BeginMove("mv", 0, 1); err != nil {
		t.Fatal(err)
	}
	k := partKey{id: store.View().Topics["mv"].ID, index: 0}
	testutil.Eventually(t, time.Minute, "broker 2 sees the move while loading", func() bool {
		var waiting bool
		b2.parts.Update(func(partlog.SetTx) { waiting = b2.synced.waiting[k] })
		return waiting
	})
	if p := b2.parts.Get(k.id, 0); p == nil || p.State() != partlog.Loading {
		t.Fatal("broker 2 is not loading the partition")
	}
	unblock()
	testutil.Eventually(t, time.Minute, "the move back to broker 1 completes", func() bool { return leader().Leader == 1 })
	if mp := leader(); mp.Moving {
		t.Fatalf("partition still moving: %+v", mp)
	}
	cl1b := clientFor(t, b1)
	testutil.Eventually(t, time.Minute, "broker 1 appends again", func() bool {
		r := rawProduce(t, cl1b, "mv", makeBatch(-1, -1, -1, []byte("v5")))
		return r.ErrorCode == 0 && r.BaseOffset == 5
	})
}
