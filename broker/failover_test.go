package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// leaseOnly is a LocalStore with a lease the test turns off: a metadata.Leaser without
// registration epochs, fences or lease history.
type leaseOnly struct {
	*metadata.LocalStore
	valid atomic.Bool
}

func (s *leaseOnly) LeaseValid(time.Time) bool                     { return s.valid.Load() }
func (s *leaseOnly) Epoch() int64                                  { return 0 } // the broker numbers its WALs itself
func (s *leaseOnly) Fenced() <-chan struct{}                       { return nil }
func (s *leaseOnly) ReportSuspect(context.Context, int32) error    { return nil }
func (s *leaseOnly) SinceLeaseAck(time.Time) (time.Duration, bool) { return 0, false }

// leasedStore is leaseOnly with what a broker holding a lease needs besides (checkStore):
// completions, which no test on it makes (a single broker: no failover, no moves).
type leasedStore struct{ leaseOnly }

func (s *leasedStore) CompleteRecovery(context.Context, metadata.TopicID, int32, int32, int64) error {
	return metadata.ErrRecoveryRefused
}

func (s *leasedStore) CompleteMoveGen(context.Context, metadata.TopicID, int32, int64, uint64) error {
	return metadata.ErrMoveRefused
}

var (
	_ metadata.Leaser        = (*leasedStore)(nil)
	_ metadata.Recoverer     = (*leasedStore)(nil)
	_ metadata.MoveCompleter = (*leasedStore)(nil)
)

// startLeasedBroker starts a standalone broker on a leasedStore (lease valid), its WAL on
// fs (nil: the operating system's).
func startLeasedBroker(t *testing.T, fs wal.FS) (*Broker, *leasedStore) {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, discardLogger()
	if fs != nil {
		cfg.WAL.FS = fs
	}
	local, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 0}})
	if err != nil {
		t.Fatal(err)
	}
	store := &leasedStore{leaseOnly{LocalStore: local}}
	store.valid.Store(true)
	b, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, store
}

// A broker whose lease ran out acks nothing, not even a retry of a batch it had synced
// and acked before: the retry is a duplicate, and a duplicate's ack is an ack (a fenced
// broker must not confirm an offset a taker may not have seen).
func TestDuplicateAckNeedsALease(t *testing.T) {
	b, store := startLeasedBroker(t, nil)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "lease", 1, nil)
	wantProduce(t, "first", rawProduce(t, cl, "lease", makeBatch(3, 0, 0, []byte("a"))), 0, 0)
	wantProduce(t, "its retry with a lease", rawProduce(t, cl, "lease", makeBatch(3, 0, 0, []byte("a"))), 0, 0)
	store.valid.Store(false)
	wantProduce(t, "its retry without a lease", rawProduce(t, cl, "lease", makeBatch(3, 0, 0, []byte("a"))), kerr.NotLeaderForPartition.Code, 0)
	wantProduce(t, "a new batch without a lease", rawProduce(t, cl, "lease", makeBatch(3, 0, 1, []byte("b"))), kerr.NotLeaderForPartition.Code, 0)
}

// A lease that runs out while the batch's group is being synced: the batch is durable,
// but the ack is refused (NOT_LEADER_OR_FOLLOWER): by the time the sync returns, the
// controller may have fenced this broker and a taker may not have seen the batch. Only
// the check after the sync catches this (the one in Writer passed before it).
func TestLeaseLapsingDuringSyncRefusesTheAck(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS())
	b, store := startLeasedBroker(t, fs)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "lapse", 1, nil)
	wantProduce(t, "with a lease", rawProduce(t, cl, "lapse", makeBatch(-1, -1, -1, []byte("a"))), 0, 0)
	var lapsed atomic.Bool
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && filepath.Ext(name) == ".wal" && !lapsed.Load() {
			lapsed.Store(true)
			store.valid.Store(false) // the lease runs out during this sync
		}
		return nil
	})
	wantProduce(t, "lease lapsed during its sync", rawProduce(t, cl, "lapse", makeBatch(-1, -1, -1, []byte("b"))), kerr.NotLeaderForPartition.Code, 0)
	if !lapsed.Load() {
		t.Fatal("no WAL sync was seen: is the fault file system wired in?")
	}
}

// TestLeaseRenewedDuringTheWaitAcks: a lease that lapsed during a batch's sync and is
// renewed within leaseWait (a heartbeat that came late) acks the batch, once: a
// non-idempotent producer is not sent into a retry that would write it twice.
func TestLeaseRenewedDuringTheWaitAcks(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS())
	b, store := startLeasedBroker(t, fs)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "renew", 1, nil)
	wantProduce(t, "with a lease", rawProduce(t, cl, "renew", makeBatch(-1, -1, -1, []byte("a"))), 0, 0)
	var lapsed atomic.Bool
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && filepath.Ext(name) == ".wal" && !lapsed.Load() {
			lapsed.Store(true)
			store.valid.Store(false)                                                 // the lease runs out during this sync...
			time.AfterFunc(100*time.Millisecond, func() { store.valid.Store(true) }) // ...and a late heartbeat renews it
		}
		return nil
	})
	wantProduce(t, "lease renewed after its sync", rawProduce(t, cl, "renew", makeBatch(-1, -1, -1, []byte("b"))), 0, 1)
	if !lapsed.Load() {
		t.Fatal("no WAL sync was seen: is the fault file system wired in?")
	}
	consumeAll(t, b.Addr().String(), "renew", map[int32]map[int64]string{0: {0: "a", 1: "b"}})
}

// A second process that opens the same broker's data (a force-deleted pod that is still
// running, an operator mistake) takes the WAL over: it writes under a new epoch and seals
// the first one's WAL, whose next write is refused and which learns it is fenced; every
// record the first acked is served by the second.
func TestSecondProcessSealsTheFirst(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, dir, nil)
	createTopic(t, b1.admin(t), "one", 1, nil)
	cl1 := b1.client(t)
	wantProduce(t, "first", rawProduce(t, cl1, "one", makeBatch(-1, -1, -1, []byte("a"))), 0, 0)
	wantProduce(t, "second", rawProduce(t, cl1, "one", makeBatch(-1, -1, -1, []byte("b"))), 0, 1)

	cfg := b1.cfg
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Registerer = prometheus.NewRegistry() // another process
	b2, err := New(cfg, b1.meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	if b2.Epoch() <= b1.Epoch() {
		t.Fatalf("second process epoch %d, first %d", b2.Epoch(), b1.Epoch())
	}
	got := rawProduce(t, cl1, "one", makeBatch(-1, -1, -1, []byte("late")))
	if got.ErrorCode == 0 {
		t.Fatalf("the first process acked a write at %d after its WAL was sealed", got.BaseOffset)
	}
	select {
	case <-b1.Fenced():
	case <-time.After(10 * time.Second):
		t.Fatal("the first process did not learn it was fenced")
	}
	cl2 := clientFor(t, b2)
	wantProduce(t, "on the second", rawProduce(t, cl2, "one", makeBatch(-1, -1, -1, []byte("c"))), 0, 2)
	consumeAll(t, b2.Addr().String(), "one", map[int32]map[int64]string{0: {0: "a", 1: "b", 2: "c"}})
}

// A damaged record in the middle of a WAL (not a torn tail: later records exist) is not
// cut away at start-up: the broker refuses to start, naming the segment, and leaves the
// files as they are; an operator who accepts the loss starts it with AcceptWALLoss.
func TestCorruptWALInTheMiddleRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	small := func(c *Config) { c.WAL.SegmentSize = 8 << 10; c.WAL.Preallocate = false }
	b := startBroker(t, dir, small)
	createTopic(t, b.admin(t), "c", 1, nil)
	cl := b.client(t)
	for i := 0; i < 200; i++ {
		wantProduce(t, "fill", rawProduce(t, cl, "c", makeBatch(-1, -1, -1, make([]byte, 200))), 0, int64(i))
	}
	b.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "epoch-*", "*.wal"))
	sort.Strings(segs)
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %v", segs)
	}
	// Flip a byte of the first record of the second segment (the first may hold only
	// its header).
	bad := segs[1]
	f, err := os.OpenFile(bad, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	f.ReadAt(one[:], wal.HeaderSize+40)
	one[0] ^= 0xff
	f.WriteAt(one[:], wal.HeaderSize+40)
	f.Close()

	cfg := b.cfg
	cfg.ListenAddr = "127.0.0.1:0"
	b2, err := New(cfg, b.meta)
	if err != nil {
		t.Fatal(err)
	}
	err = b2.Start()
	if err == nil {
		b2.Close()
		t.Fatal("a broker started on a WAL damaged in the middle")
	}
	if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(bad)) {
		t.Fatalf("start error %v: want ErrCorrupt naming %s", err, bad)
	}
	b2.Close()
	for _, s := range segs {
		if _, err := os.Stat(s); err != nil {
			t.Fatalf("segment %s removed by a failed start: %v", s, err)
		}
	}
	cfg.AcceptWALLoss = true
	b3, err := New(cfg, b.meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := b3.Start(); err != nil {
		t.Fatalf("start accepting the loss: %v", err)
	}
	t.Cleanup(func() { b3.Close() })
	got := rawProduce(t, clientFor(t, b3), "c", makeBatch(-1, -1, -1, []byte("after")))
	if got.ErrorCode != 0 {
		t.Fatalf("produce after accepting the loss: %v", kerr.ErrorForCode(got.ErrorCode))
	}
}

// TestDuplicateAckedOnlyAfterTheOriginalSynced: a retry that arrives (on another
// connection) while its original's WAL group is still being synced is not acked before
// that sync returns: an ack then would confirm a record a crash could still lose. The
// retry gets the original's offset once the original is durable, or an error it retries.
// (With the lease valid throughout; TestDuplicateWaitingOnASyncNeedsTheLease has it
// lapse. Two things hold the retry back: the WAL completes groups in order, and
// finishAppend refuses a duplicate of an offset above the high watermark: removing the
// check alone still passes.)
func TestDuplicateAckedOnlyAfterTheOriginalSynced(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS())
	b, _ := startLeasedBroker(t, fs)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "dupsync", 1, nil)
	wantProduce(t, "first", rawProduce(t, cl, "dupsync", makeBatch(5, 0, 0, []byte("a"))), 0, 0)
	entered, release := make(chan struct{}), make(chan struct{})
	var stall, unstall sync.Once
	t.Cleanup(func() { unstall.Do(func() { close(release) }) })
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && filepath.Ext(name) == ".wal" {
			stall.Do(func() { close(entered); <-release }) // the original's sync stalls (a slow disk, NFS)
		}
		return nil
	})
	batch := makeBatch(5, 0, 1, []byte("b"))
	type answer struct {
		resp kmsg.ProduceResponseTopicPartition
		err  error
	}
	produce := func(cl *kgo.Client) <-chan answer {
		c := make(chan answer, 1)
		go func() {
			resp, err := kafkatest.Produce(testCtx(t), cl, "dupsync", 0, append([]byte(nil), batch...))
			c <- answer{resp, err}
		}()
		return c
	}
	orig := produce(cl)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the original's sync never started")
	}
	retry := produce(clientFor(t, b))
	// on purpose: the retry has this long to be answered wrongly while the sync is held;
	// a correct broker never answers it with an ack before the release
	select {
	case a := <-retry:
		if a.err == nil && a.resp.ErrorCode == 0 {
			t.Fatalf("the retry was acked at %d while its original's sync was still running", a.resp.BaseOffset)
		}
		retry = nil // refused (retriable): the client would retry
	case <-time.After(500 * time.Millisecond):
	}
	unstall.Do(func() { close(release) })
	if a := <-orig; a.err != nil || a.resp.ErrorCode != 0 || a.resp.BaseOffset != 1 {
		t.Fatalf("the original: %+v, %v", a.resp, a.err)
	}
	if retry != nil {
		if a := <-retry; a.err != nil || (a.resp.ErrorCode == 0 && a.resp.BaseOffset != 1) {
			t.Fatalf("the retry after the sync: %+v, %v", a.resp, a.err)
		}
	}
	consumeAll(t, b.Addr().String(), "dupsync", map[int32]map[int64]string{0: {0: "a", 1: "b"}})
}
