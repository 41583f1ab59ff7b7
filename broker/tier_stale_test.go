package broker

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
)

var errAnswerLost = errors.New("test: CommitObject answer lost")

// lostCommitStore is a LocalStore that, once armed, applies the next CommitObject but
// reports it failed (the answer was lost), and from then on shows the View from before
// that commit until thawed: a broker cut off from its controllers right after a commit
// whose answer never came. Its view shows the committed object as still prepared.
type lostCommitStore struct {
	*metadata.LocalStore

	mu      sync.Mutex
	armed   bool
	lost    metadata.Object // the object whose commit answer was lost (ID 0: none yet)
	frozen  *metadata.View
	deletes map[uint64]int // DeleteObjects calls naming each ID
}

func (s *lostCommitStore) View() *metadata.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		return s.frozen
	}
	return s.LocalStore.View()
}

func (s *lostCommitStore) CommitObject(ctx context.Context, id uint64, size int64, ranges []metadata.PartitionRange) error {
	s.mu.Lock()
	lose := s.armed && s.lost.ID == 0
	s.mu.Unlock()
	if !lose {
		return s.LocalStore.CommitObject(ctx, id, size, ranges)
	}
	before := s.LocalStore.View() // id is prepared here
	if err := s.LocalStore.CommitObject(ctx, id, size, ranges); err != nil {
		return err
	}
	o, _ := before.Object(id)
	s.mu.Lock()
	s.lost, s.frozen = o, before
	s.mu.Unlock()
	return errAnswerLost // not a refusal: the uploader retries, and is refused (committed)
}

func (s *lostCommitStore) DeleteObjects(ctx context.Context, ids []uint64) error {
	s.mu.Lock()
	for _, id := range ids {
		s.deletes[id]++
	}
	s.mu.Unlock()
	return s.LocalStore.DeleteObjects(ctx, ids)
}

func (s *lostCommitStore) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *lostCommitStore) thaw() {
	s.mu.Lock()
	s.frozen = nil
	s.mu.Unlock()
}

func (s *lostCommitStore) state() (lost metadata.Object, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost, s.deletes[s.lost.ID]
}

// After a CommitObject whose answer was lost, the broker's stale view shows its own object
// prepared and unused, so garbage collection goes after it. The object is committed and
// its ranges are acked data: the controller must refuse to forget it and the key must
// stay, so the records read back from objects once the view catches up.
func TestTierOwnPreparedObjectFromStaleViewKept(t *testing.T) {
	dir := t.TempDir()
	store := faultyLocal(t)
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Logger = discardLogger()
	cfg.Objects = store
	cfg.WAL.SegmentSize = 256 << 10
	cfg.Tier.TargetObjectBytes = 128 << 10
	cfg.Tier.MaxObjectBytes = 512 << 10
	cfg.Tier.MaxUploadDelay = 100 * time.Millisecond
	cfg.Tier.CheckInterval = 20 * time.Millisecond
	cfg.Tier.RetentionInterval = 50 * time.Millisecond
	cfg.TailCacheBytes = 64 << 10
	local, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: cfg.NodeID}})
	if err != nil {
		t.Fatal(err)
	}
	meta := &lostCommitStore{LocalStore: local, deletes: map[uint64]int{}}
	b, err := New(cfg, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	tb := &testBroker{Broker: b, dir: dir, meta: local}

	createTopic(t, tb.admin(t), "t", 1, nil)
	meta.arm()
	cl := tb.client(t)
	want := produceN(t, cl, "t", 1, 100, 1000)
	testutil.Eventually(t, time.Minute, "garbage collection tried the stale-prepared object twice", func() bool {
		lost, n := meta.state()
		return lost.ID != 0 && n >= 2
	})
	lost, _ := meta.state()
	if o, ok := local.View().Object(lost.ID); !ok || o.State != metadata.ObjectCommitted {
		t.Fatalf("object %d in the store: %+v, %v; want committed", lost.ID, o, ok)
	}
	if _, err := store.Head(testCtx(t), lost.Key); err != nil {
		t.Fatalf("the key of committed object %d was deleted from a stale view: %v", lost.ID, err)
	}

	// The view catches up: the object is committed, the data leaves the WAL and reads
	// back from it.
	meta.thaw()
	for off, v := range produceN(t, cl, "t", 1, 600, 1000)[0] {
		want[0][off] = v
	}
	tp := local.View().Topics["t"]
	testutil.Eventually(t, time.Minute, "the lost-answer object's range out of the WAL", func() bool {
		bs := b.parts.Get(tp.ID, 0).Batches()
		return tb.allUploaded() && (len(bs) == 0 || bs[0].Base > 0)
	})
	objs := local.View().Topics["t"].Partitions[0].Objects
	if !slices.ContainsFunc(objs, func(r metadata.ObjectRange) bool { return r.Object == lost.ID }) {
		t.Fatalf("manifest %+v lacks object %d", objs, lost.ID)
	}
	consumeAll(t, tb.addr(), "t", want)
	if _, err := store.Head(testCtx(t), lost.Key); errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("key of object %d gone after the view caught up", lost.ID)
	}
}
