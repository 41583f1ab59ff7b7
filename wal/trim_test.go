package wal_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// TestTrimShrinksOutsideTheLock checks how TrimBefore gets rid of segments: renamed
// out of the log first, then truncated step by step (each step synced), then removed,
// and that appends needing a roll go on while a removal stalls.
func TestTrimShrinksOutsideTheLock(t *testing.T) {
	mem := waltest.NewMemFS()
	ffs := waltest.NewFaultFS(mem)
	cfg := memConfig(ffs)
	cfg.SegmentSize = 9 << 20 // big enough for two truncation steps per segment
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 20 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 1<<20)))
	}
	cut := recs[15].pos
	point := w.TrimPoint(cut)

	var truncates atomic.Int64
	release := make(chan struct{})
	stalled := make(chan struct{}, 1)
	ffs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpTruncate {
			if !strings.HasSuffix(name, ".trim.tmp") {
				t.Errorf("truncating %s, not a trimmed segment", name)
			}
			if truncates.Add(1) == 1 {
				stalled <- struct{}{}
				<-release
			}
		}
		if op == waltest.OpRemove && strings.HasSuffix(name, ".trim.tmp") && truncates.Load() == 0 {
			t.Errorf("%s removed without being shrunk first", name)
		}
		return nil
	})
	type result struct {
		removed []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		r, err := w.TrimBefore(cut)
		done <- result{r, err}
	}()
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("TrimBefore truncated nothing: segments are removed in one go")
	}
	// The segments are out of the log already; appending (and rolling) works.
	if w.Start() != point {
		t.Errorf("Start %d while the trim removes files; want %d", w.Start(), point)
	}
	for i := range 10 {
		recs = append(recs, mustAppend(t, w, 1, payload(100+i, 1<<20)))
	}
	close(release)
	r := <-done
	if r.err != nil || len(r.removed) == 0 {
		t.Fatalf("TrimBefore: %v, removed %v", r.err, r.removed)
	}
	if truncates.Load() < int64(2*len(r.removed)) {
		t.Fatalf("%d truncations for %d segments of 9 MiB; want steps", truncates.Load(), len(r.removed))
	}
	for _, n := range mem.Names() {
		if strings.HasSuffix(n, ".trim.tmp") || slices.Contains(r.removed, n) {
			t.Fatalf("%s left after the trim", n)
		}
	}
	ffs.SetHook(nil)
	checkReadAt(t, w, recs[16:])
}

// TestOpenRemovesTrimLeftovers: a crash between renaming a trimmed segment and
// removing it leaves a .trim.tmp file, which Open removes and Replay never reads.
func TestOpenRemovesTrimLeftovers(t *testing.T) {
	mem := waltest.NewMemFS()
	cfg := memConfig(mem)
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 50 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 4<<10)))
	}
	// Simulate the crash: a copy of the first segment under its trash name.
	first := segmentNames(mem)[0]
	src, err := mem.OpenFile(first, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := src.Stat()
	data := make([]byte, fi.Size())
	src.ReadAt(data, 0)
	src.Close()
	trash := first + ".trim.tmp"
	dst, _ := mem.OpenFile(trash, os.O_CREATE|os.O_RDWR, 0o644)
	dst.WriteAt(data, 0)
	dst.Close()
	if _, err := w.TrimBefore(recs[40].pos); err != nil {
		t.Fatal(err)
	}
	w2, got, _ := reopen(t, w, cfg)
	if slices.Contains(mem.Names(), trash) {
		t.Fatal("Open left the trimmed segment's file")
	}
	if len(got) == 0 || got[0].pos < w2.Start() || got[0].pos == recs[0].pos {
		t.Fatalf("replay after the leftover: first record at %v", got[0].pos)
	}
}

// wbFS gives MemFS files the RangeWriter capability and records its calls.
type wbFS struct {
	wal.FS
	mu    sync.Mutex
	calls map[string][][2]int64
	err   error // what WriteBack returns
}

type wbFile struct {
	wal.File
	fs   *wbFS
	name string
}

func (f *wbFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	g, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &wbFile{File: g, fs: f, name: name}, nil
}

func (f *wbFile) WriteBack(off, n int64) error {
	f.fs.mu.Lock()
	f.fs.calls[f.name] = append(f.fs.calls[f.name], [2]int64{off, n})
	f.fs.mu.Unlock()
	return f.fs.err
}

// TestZeroFillIsPaced: a preallocated segment is zero-filled in steps, each handed to
// write-back before the next is written, so the fill never queues the whole segment
// in front of a group commit's fdatasync.
func TestZeroFillIsPaced(t *testing.T) {
	fs := &wbFS{FS: waltest.NewMemFS(), calls: map[string][][2]int64{}}
	cfg := memConfig(fs)
	cfg.SegmentSize = 2 << 20
	cfg.Preallocate = true
	w, _, _ := openWAL(t, cfg)
	mustAppend(t, w, 1, payload(1, 100))
	w.Close() // waits for the next segment's background zero-fill
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.calls) == 0 {
		t.Fatal("no segment was written back while zero-filling")
	}
	for name, c := range fs.calls {
		var next int64
		for _, r := range c {
			if r[0] != next || r[1] > 256<<10 {
				t.Fatalf("%s: write-back steps %v; want consecutive steps of at most 256 KiB", name, c)
			}
			next = r[0] + r[1]
		}
		if next < cfg.SegmentSize {
			t.Fatalf("%s: write-back covered %d of %d bytes", name, next, cfg.SegmentSize)
		}
	}
}

// A file system whose write-back fails (no sync_file_range: EINVAL, ENOSYS) only loses
// the pacing: segments are still made and records appended and read back.
func TestZeroFillWithoutWriteBack(t *testing.T) {
	fs := &wbFS{FS: waltest.NewMemFS(), calls: map[string][][2]int64{}, err: syscall.ENOSYS}
	cfg := memConfig(fs)
	cfg.SegmentSize = 1 << 20
	cfg.Preallocate = true
	w, _, _ := openWAL(t, cfg)
	var recs []record
	for i := range 40 {
		recs = append(recs, mustAppend(t, w, 1, payload(i, 64<<10))) // several rolls
	}
	checkReadAt(t, w, recs)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for name, c := range fs.calls {
		if len(c) != 1 {
			t.Fatalf("%s: write-back tried %d times after it failed; want once", name, len(c))
		}
	}
}
