package wal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

func isSegment(name string) bool { return strings.HasSuffix(name, ".wal") }

func TestENOSPCOnSegmentAllocation(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.SegmentSize = 1024
	w, _, _ := openWAL(t, cfg)
	var full atomic.Bool
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		// A full disk: allocating or zero-filling a new segment fails.
		if full.Load() && (op == waltest.OpAllocate || op == waltest.OpWrite && filepath.Ext(name) == ".tmp") {
			return &os.PathError{Op: op.String(), Path: name, Err: syscall.ENOSPC}
		}
		return nil
	})
	var want []record
	for i := range 3 {
		want = append(want, mustAppend(t, w, 1, payload(i, 200)))
	}
	full.Store(true)
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		var pos wal.Pos
		p := payload(100+i, 200)
		if pos, err = w.AppendSync(context.Background(), 1, p); err == nil {
			want = append(want, record{1, p, pos})
		}
	}
	if !errors.Is(err, wal.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ErrNoSpace wrapping ENOSPC", err)
	}
	end := w.End()
	if _, err := w.AppendSync(context.Background(), 1, payload(0, 200)); !errors.Is(err, wal.ErrNoSpace) {
		t.Fatalf("second append on a full disk: %v", err)
	}
	if w.End() != end || w.Err() != nil {
		t.Fatalf("End moved (%d -> %d) or WAL failed (%v)", end, w.End(), w.Err())
	}
	checkReadAt(t, w, want)

	full.Store(false) // space freed
	for i := range 10 {
		want = append(want, mustAppend(t, w, 2, payload(200+i, 200)))
	}
	checkReadAt(t, w, want)
	_, got, info := reopen(t, w, cfg)
	sameRecords(t, got, want)
	if info.Torn {
		t.Fatalf("%+v", info)
	}
}

func TestSyncErrorFailsForever(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	w, _, _ := openWAL(t, cfg)
	var failSync atomic.Bool
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if failSync.Load() && op == waltest.OpSync && isSegment(name) {
			return syscall.EIO
		}
		return nil
	})
	var ok []record
	for i := range 5 {
		ok = append(ok, mustAppend(t, w, 1, payload(i, 50)))
	}
	end := w.End()
	failSync.Store(true)
	if _, err := w.AppendSync(context.Background(), 1, []byte("lost")); !errors.Is(err, wal.ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing sync: %v", err)
	}
	if !errors.Is(w.Err(), wal.ErrFailed) {
		t.Fatalf("Err = %v", w.Err())
	}
	failSync.Store(false) // the next fsync would "succeed": it must not be tried
	writes, syncs := fs.Count(waltest.OpWrite, ".wal"), fs.Count(waltest.OpSync, ".wal")
	for range 3 {
		if _, err := w.AppendSync(context.Background(), 1, []byte("x")); !errors.Is(err, wal.ErrFailed) {
			t.Fatalf("append after the failure: %v", err)
		}
	}
	if fs.Count(waltest.OpWrite, ".wal") != writes || fs.Count(waltest.OpSync, ".wal") != syncs {
		t.Fatal("the WAL kept writing or syncing after a failed fdatasync")
	}
	if w.End() != end {
		t.Fatalf("End moved from %d to %d", end, w.End())
	}
	checkReadAt(t, w, ok) // reads still work
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDirSyncErrorFailsForever(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	cfg.SegmentSize = 512
	w, _, _ := openWAL(t, cfg)
	fs.SetHook(func(op waltest.Op, _ string, _ int64, _ int) error {
		if op == waltest.OpSyncDir {
			return syscall.EIO
		}
		return nil
	})
	var err error
	for i := 0; i < 10 && err == nil; i++ { // until a roll needs the directory synced
		_, err = w.AppendSync(context.Background(), 1, payload(i, 200))
	}
	if !errors.Is(err, wal.ErrFailed) || !errors.Is(w.Err(), wal.ErrFailed) {
		t.Fatalf("append: %v, Err: %v", err, w.Err())
	}
}

func TestStalledSyncDoesNotDeadlockClose(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	cfg := memConfig(fs)
	w, _, _ := openWAL(t, cfg)
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && isSegment(name) {
			once.Do(func() { close(stalled); <-release })
		}
		return nil
	})
	var mu sync.Mutex
	results := map[string]error{}
	calls := 0
	var wg sync.WaitGroup
	appendOne := func(name string) {
		wg.Add(1)
		w.Append(wal.Entry{Type: 1, Payload: []byte(name), Done: func(_ wal.Pos, err error) {
			mu.Lock()
			results[name] = err
			calls++
			mu.Unlock()
			wg.Done()
		}})
	}
	appendOne("a")
	<-stalled
	appendOne("b")
	appendOne("c")
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()

	// While the sync is stalled nothing can be done, and Close must wait.
	// (These checks cannot fail spuriously.)
	select {
	case <-closed:
		t.Fatal("Close returned while a sync was stalled")
	case <-waitABit():
	}
	mu.Lock()
	if calls != 0 {
		t.Fatalf("%d Done calls during a stalled sync", calls)
	}
	mu.Unlock()

	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close deadlocked after the sync returned")
	}
	wg.Wait()
	for _, name := range []string{"a", "b", "c"} {
		if err := results[name]; err != nil {
			t.Errorf("%s: %v (entries queued before Close are written)", name, err)
		}
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("d")); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	_, got, _ := openWAL(t, cfg)
	if len(got) != 3 {
		t.Fatalf("replayed %d records, want 3", len(got))
	}
}

// TestFailedWriteNeverReplayed: a write that fails after putting a complete,
// valid-looking frame on disk must not leak into the log, even when a later
// shorter record lands exactly in front of a frame hidden in the failed
// payload (which a producer could craft).
func TestFailedWriteNeverReplayed(t *testing.T) {
	for _, prealloc := range []bool{true, false} {
		t.Run(map[bool]string{true: "prealloc", false: "append"}[prealloc], func(t *testing.T) {
			fs := waltest.NewFaultFS(waltest.NewMemFS())
			cfg := memConfig(fs)
			cfg.Preallocate = prealloc
			w, _, _ := openWAL(t, cfg)
			want := []record{mustAppend(t, w, 1, []byte("before"))}

			small := []byte("s") // its frame is 10 bytes
			phantom := wal.AppendRecord(nil, 'P', []byte("phantom"))
			evil := append(make([]byte, len(small)), phantom...)
			evil = append(evil, make([]byte, 40)...)

			var failNext atomic.Bool
			failNext.Store(true)
			fs.SetHook(func(op waltest.Op, name string, _ int64, n int) error {
				if op == waltest.OpWrite && isSegment(name) && failNext.CompareAndSwap(true, false) {
					return &waltest.ShortWrite{N: n, Err: syscall.ENOSPC} // all bytes land, then ENOSPC
				}
				return nil
			})
			if _, err := w.AppendSync(context.Background(), 2, evil); !errors.Is(err, wal.ErrNoSpace) {
				t.Fatalf("failed write: %v, want ErrNoSpace", err)
			}
			if w.Err() != nil {
				t.Fatalf("a write error failed the WAL: %v", w.Err())
			}
			want = append(want, mustAppend(t, w, 3, small))
			checkReadAt(t, w, want)
			_, got, info := reopen(t, w, cfg)
			sameRecords(t, got, want)
			if info.Torn {
				t.Fatalf("%+v", info)
			}
		})
	}
}
