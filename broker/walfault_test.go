package broker

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// failWAL makes every op on the broker's WAL segment files fail with EIO.
func failWAL(fs *waltest.FaultFS, op waltest.Op) {
	fs.SetHook(func(o waltest.Op, name string, off int64, n int) error {
		if o == op && filepath.Ext(name) == ".wal" {
			return syscall.EIO
		}
		return nil
	})
}

func wantProduce(t *testing.T, what string, got kmsg.ProduceResponseTopicPartition, code int16, offset int64) {
	t.Helper()
	if got.ErrorCode != code || (code == 0 && got.BaseOffset != offset) {
		t.Fatalf("%s: %v at %d, want %v at %d", what, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, kerr.ErrorForCode(code), offset)
	}
}

// A failed WAL write fails its group (KAFKA_STORAGE_ERROR) and, the WAL having a fence
// token, the WAL for good (wal/doc.go, Group commit: its late bytes must not be followed
// by anything in that directory). The failed batch's offsets are given to the retry after
// a restart (no gap, no duplicate of the idempotent retry), and the log holds exactly the
// acked records.
func TestWALWriteFailureKeepsOffsetsDense(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.NewFaultFS(wal.OSFS())
	b := startBroker(t, dir, func(c *Config) { c.WAL.FS = fs })
	createTopic(t, b.admin(t), "wf", 1, nil)
	cl := b.client(t)
	wantProduce(t, "first", rawProduce(t, cl, "wf", makeBatch(5, 0, 0, []byte("a"))), 0, 0)

	failWAL(fs, waltest.OpWrite)
	wantProduce(t, "while writes fail", rawProduce(t, cl, "wf", makeBatch(5, 0, 1, []byte("b"))), kerr.KafkaStorageError.Code, 0)
	fs.SetHook(nil)
	if fs.Count(waltest.OpWrite, ".wal") == 0 {
		t.Fatal("the fault file system saw no WAL writes: is it wired in?")
	}

	b.Close()
	b2 := startBroker(t, dir, nil)
	cl2 := b2.client(t)
	wantProduce(t, "the retry", rawProduce(t, cl2, "wf", makeBatch(5, 0, 1, []byte("b"))), 0, 1)
	wantProduce(t, "the next", rawProduce(t, cl2, "wf", makeBatch(5, 0, 2, []byte("c"))), 0, 2)
	consumeAll(t, b2.addr(), "wf", map[int32]map[int64]string{0: {0: "a", 1: "b", 2: "c"}})
}

// A failed fdatasync stops the WAL for good (the kernel may have dropped the dirty pages):
// that produce and every later one get KAFKA_STORAGE_ERROR, fetches keep serving what was
// acked, and a restart serves every acked record at its offset.
func TestWALSyncFailureStopsAcks(t *testing.T) {
	dir := t.TempDir()
	fs := waltest.NewFaultFS(wal.OSFS())
	b := startBroker(t, dir, func(c *Config) { c.WAL.FS = fs })
	createTopic(t, b.admin(t), "sf", 1, nil)
	cl := b.client(t)
	wantProduce(t, "first", rawProduce(t, cl, "sf", makeBatch(-1, -1, -1, []byte("a"))), 0, 0)
	wantProduce(t, "second", rawProduce(t, cl, "sf", makeBatch(-1, -1, -1, []byte("b"))), 0, 1)

	failWAL(fs, waltest.OpSync)
	wantProduce(t, "while syncs fail", rawProduce(t, cl, "sf", makeBatch(-1, -1, -1, []byte("x"))), kerr.KafkaStorageError.Code, 0)
	fs.SetHook(nil)
	wantProduce(t, "after a failed sync", rawProduce(t, cl, "sf", makeBatch(-1, -1, -1, []byte("y"))), kerr.KafkaStorageError.Code, 0)
	// The broker asks to be restarted (weir broker and cluster.Cluster do it): a new
	// registration on a new WAL directory, which seals this one.
	select {
	case <-b.Fenced():
	default:
		t.Fatal("a broker whose WAL failed for good did not ask to be restarted")
	}
	if !b.StorageFailed() {
		t.Fatal("the restart is not marked as a storage failure")
	}
	consumeAll(t, b.addr(), "sf", map[int32]map[int64]string{0: {0: "a", 1: "b"}})

	b.Close()
	b2 := startBroker(t, dir, nil)
	// The unacked record may or may not have reached the disk; what was acked must be
	// there, at its offsets, and the log must take new records after it.
	got := rawProduce(t, b2.client(t), "sf", makeBatch(-1, -1, -1, []byte("c")))
	if got.ErrorCode != 0 || got.BaseOffset < 2 {
		t.Fatalf("produce after restart: %v at %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	want := map[int64]string{0: "a", 1: "b", got.BaseOffset: "c"}
	if got.BaseOffset == 3 {
		want[2] = "x"
	}
	consumeAll(t, b2.addr(), "sf", map[int32]map[int64]string{0: want})
}
