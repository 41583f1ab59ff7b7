package nfsfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// twoMounts mounts one backing directory twice (two NFS clients of one server).
func twoMounts(t *testing.T, model *Model, o Options) (a, b, backing string) {
	t.Helper()
	dir := t.TempDir()
	backing = filepath.Join(dir, "server")
	if err := os.Mkdir(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	o.Name = "a"
	ma := MountT(t, filepath.Join(dir, "a"), backing, model, o)
	o.Name = "b"
	mb := MountT(t, filepath.Join(dir, "b"), backing, model, o)
	return ma.Dir, mb.Dir, backing
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A write through one mount is not visible to another mount (nor on the server) until
// the writer fsyncs; then a new open on the other mount sees it (close-to-open).
func TestWriteInvisibleUntilFsync(t *testing.T) {
	a, b, backing := twoMounts(t, NewModel(Local), Options{})
	f, err := os.Create(filepath.Join(a, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(a, "f")); got != "hello" {
		t.Fatalf("the writing mount reads %q, want its own write", got)
	}
	if got := read(t, filepath.Join(b, "f")); got != "" {
		t.Fatalf("the other mount reads %q before fsync, want nothing", got)
	}
	if got := read(t, filepath.Join(backing, "f")); got != "" {
		t.Fatalf("the server has %q before fsync", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(b, "f")); got != "hello" {
		t.Fatalf("the other mount reads %q after fsync, want hello", got)
	}
}

// Close also makes the writes visible (flush on close).
func TestWriteVisibleAfterClose(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{})
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("closed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(b, "f")); got != "closed" {
		t.Fatalf("the other mount reads %q after close, want closed", got)
	}
}

// Pages read through a file descriptor stay cached while the file changes at the
// server: the old bytes are read until the file is opened again (close-to-open
// revalidation), which finds the new attributes and drops the pages.
func TestStalePageUntilReopen(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{AttrTimeout: time.Hour, EntryTimeout: time.Hour})
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("old-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fb, err := os.Open(filepath.Join(b, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	buf := make([]byte, 8)
	if _, err := fb.ReadAt(buf, 0); err != nil || string(buf) != "old-data" {
		t.Fatalf("first read %q %v", buf, err)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("new-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.ReadAt(buf, 0); err != nil || string(buf) != "old-data" {
		t.Fatalf("read from the open descriptor after the remote change: %q %v, want the cached old-data", buf, err)
	}
	// A new open, read within the cached size (a read past it would refresh the size
	// and, with it, the pages by itself): only the open's revalidation drops the pages.
	f2, err := os.Open(filepath.Join(b, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if _, err := f2.ReadAt(buf, 0); err != nil || string(buf) != "new-data" {
		t.Fatalf("a new open reads %q %v, want new-data", buf, err)
	}
}

// The mount keeps its pages across opens when the file did not change (FOPEN_KEEP_CACHE):
// a second read of an unchanged file is served without a READ to the server.
func TestPagesKeptAcrossOpens(t *testing.T) {
	model := NewModel(Local)
	a, b, _ := twoMounts(t, model, Options{})
	if err := os.WriteFile(filepath.Join(a, "f"), bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	read(t, filepath.Join(b, "f"))
	before := model.Ops(OpRead)
	read(t, filepath.Join(b, "f"))
	if n := model.Ops(OpRead) - before; n != 0 {
		t.Fatalf("the second read of an unchanged file sent %d READs to the server, want 0 (pages kept)", n)
	}
}

// A file that grows at the server keeps its cached size on another mount until the
// attribute timeout; then stat sees the new size.
func TestAttrCacheTimeout(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{AttrTimeout: 2 * time.Second, EntryTimeout: 2 * time.Second})
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(b, "f")); err != nil || st.Size() != 1 {
		t.Fatalf("stat %v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	st, err := os.Stat(filepath.Join(b, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 1 && time.Since(changed) < time.Second {
		t.Fatalf("stat right after the remote change sees size %d, want the cached 1", st.Size())
	}
	testutil.Eventually(t, 10*time.Second, "the new size after the attribute timeout", func() bool {
		st, err := os.Stat(filepath.Join(b, "f"))
		return err == nil && st.Size() == 5
	})
}

// A freeze blocks every operation (a write-back, a stat) until the thaw; then they
// complete.
func TestFreezeBlocksThenResumes(t *testing.T) {
	model := NewModel(Local)
	a, _, _ := twoMounts(t, model, Options{AttrTimeout: time.Millisecond, EntryTimeout: time.Millisecond})
	f, err := os.Create(filepath.Join(a, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("x"))
	model.Freeze()
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	time.Sleep(300 * time.Millisecond) // on purpose: the fsync must still be blocked after this
	select {
	case err := <-done:
		t.Fatalf("fsync returned (%v) during the freeze", err)
	default:
	}
	model.Thaw()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fsync after the thaw: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fsync still blocked 30 s after the thaw")
	}
}

// Injected EIO and ENOSPC surface at fsync (the buffered write itself succeeds, as on
// NFS); the failed data is dropped, not written later (Linux's behaviour).
func TestErrorsSurface(t *testing.T) {
	model := NewModel(Local)
	a, b, _ := twoMounts(t, model, Options{})
	for _, e := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		f, err := os.Create(filepath.Join(a, "f-"+fmt.Sprint(int(e))))
		if err != nil {
			t.Fatal(err)
		}
		model.Fail(OpWrite|OpCommit, e)
		if _, err := f.Write([]byte("data")); err != nil {
			t.Fatalf("buffered write: %v", err)
		}
		if err := f.Sync(); !errors.Is(err, e) {
			t.Fatalf("fsync with %v injected: %v", e, err)
		}
		model.Clear()
		// Reported once, then forgotten, as on Linux: the next fsync succeeds and
		// the data never reaches the server.
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync after clearing: %v", err)
		}
		f.Close()
		if got := read(t, filepath.Join(b, "f-"+fmt.Sprint(int(e)))); got != "" {
			t.Fatalf("the other mount reads %q after the failed fsync, want nothing (the write-back failed)", got)
		}
	}
	model.Fail(OpMeta, syscall.ESTALE)
	if _, err := os.Open(filepath.Join(a, "f-5")); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("open with ESTALE injected: %v", err)
	}
	model.Clear()
}

// O_DIRECT reads bypass the page cache: a descriptor opened with O_DIRECT sees a remote
// change at once, where a cached descriptor would not.
func TestDirectReadBypassesCache(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{AttrTimeout: time.Hour, EntryTimeout: time.Hour})
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("old-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.OpenFile(filepath.Join(b, "f"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	buf := make([]byte, 8)
	fd.ReadAt(buf, 0)
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("new-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fd.ReadAt(buf, 0); err != nil || string(buf) != "new-data" {
		t.Fatalf("O_DIRECT read after the remote change: %q %v, want new-data", buf, err)
	}
}

// The FSx profile's COMMIT latency is in the modelled range.
func TestFSxCommitLatency(t *testing.T) {
	model := NewModel(FSx)
	a, _, _ := twoMounts(t, model, Options{})
	f, err := os.Create(filepath.Join(a, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 200; i++ {
		f.Write([]byte("record"))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	q, n := model.CommitStats(0.5, 0.99)
	t.Logf("%d COMMITs: p50 %v p99 %v (profile %v)", n, q[0], q[1], FSx)
	if n < 200 || q[0] < FSx.Commit.P50/2 {
		t.Fatalf("%d COMMITs, p50 %v: the model was not applied", n, q[0])
	}
}

// A file grown at the server is read to its new end by a new open on a mount whose
// cached attributes still say the old size (close-to-open revalidates the size too):
// a failover taker reading a dead broker's WAL tail depends on it.
func TestReopenSeesGrownFile(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{AttrTimeout: time.Hour, EntryTimeout: time.Hour})
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(b, "f")); got != "1" {
		t.Fatalf("read %q", got)
	}
	f, err := os.OpenFile(filepath.Join(a, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("2345"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(b, "f")); got != "12345" {
		t.Fatalf("a new open on the other mount reads %q, want 12345", got)
	}
}

// Data whose write-back failed (EIO at fsync and close) is not written later into
// another file: ext4 gives a removed file's inode number to the next new file at once,
// and the mount once kept unflushed data by inode number, so a new file got the old
// one's bytes (a localfs object read back corrupt in a chaos run with storage-error).
func TestFailedWriteBackDoesNotLeakIntoNewFile(t *testing.T) {
	model := NewModel(Local)
	a, b, backing := twoMounts(t, model, Options{})
	for i := 0; i < 20; i++ {
		old := filepath.Join(a, fmt.Sprint("old-", i))
		f, err := os.Create(old)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte("X"), 8192)); err != nil {
			t.Fatal(err)
		}
		model.Fail(OpWrite|OpCommit, syscall.EIO)
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("fsync: %v", err)
		}
		f.Close() // fails too
		model.Clear()
		var st syscall.Stat_t
		syscall.Stat(filepath.Join(backing, fmt.Sprint("old-", i)), &st)
		if err := os.Remove(old); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprint("new-", i)
		if err := os.WriteFile(filepath.Join(a, name), []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		var nst syscall.Stat_t
		syscall.Stat(filepath.Join(backing, name), &nst)
		if got := read(t, filepath.Join(b, name)); got != "new" {
			t.Fatalf("round %d: the new file (inode %d; the removed one had %d) reads %d bytes %.20q..., want \"new\"", i, nst.Ino, st.Ino, len(got), got)
		}
	}
}

// With background writeback, data written and never fsynced reaches the server after
// Options.WritebackAfter, while the descriptor stays open (a paused writer's data).
func TestBackgroundWriteback(t *testing.T) {
	a, b, _ := twoMounts(t, NewModel(Local), Options{WritebackAfter: 200 * time.Millisecond, AttrTimeout: time.Millisecond, EntryTimeout: time.Millisecond})
	f, err := os.Create(filepath.Join(a, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the unsynced write on the server", func() bool {
		return read(t, filepath.Join(b, "f")) == "late"
	})
}
