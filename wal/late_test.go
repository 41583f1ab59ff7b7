package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// Late writes: bytes of a group the WAL was told failed, landing in the segment file
// later (an NFS WRITE that reached the server although the client reported an error, or
// an unsynced page the client's writeback flushes after a failed fdatasync, after the
// owner died or was fenced, or after a taker sealed the directory). FSXLAB.md, Findings
// item 7 asked whether any reader could take such bytes for records: these tests say
// no for the WAL's readers (Replay, ReadOnly.Scan and ReadAt, Seal), whether the bytes
// land before the next group, after it, before the seal or after it.

// lateFS defers one write to a segment: the WAL sees it fail (failWrite: the write
// returns EIO; failSync: the write succeeds but the next fdatasync of that file fails
// with EIO), and land writes the bytes into the file afterwards, through a fresh open,
// synced: as another host's client would see them once they reached the server.
type lateFS struct {
	wal.FS
	mu      sync.Mutex
	mode    lateMode
	syncErr map[*lateFile]bool // the next Sync of this file fails
	files   map[*lateFile]bool // open files, to follow renames
	pending []lateWrite
}

type lateMode int

const (
	lateOff lateMode = iota
	lateFailWrite
	lateFailSync
)

type lateWrite struct {
	path string
	off  int64
	data []byte
}

type lateFile struct {
	wal.File
	fs   *lateFS
	name string // current name (renames followed)
}

func newLateFS(inner wal.FS) *lateFS {
	return &lateFS{FS: inner, syncErr: map[*lateFile]bool{}, files: map[*lateFile]bool{}}
}

// arm makes the next write to a segment file a late one.
func (l *lateFS) arm(m lateMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode = m
}

// land writes every deferred write into its file and syncs it.
func (l *lateFS) land(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(pending) == 0 {
		t.Fatal("no late write to land")
	}
	for _, p := range pending {
		f, err := l.FS.OpenFile(p.path, os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("landing late write: %v", err)
		}
		if _, err := f.WriteAt(p.data, p.off); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func (l *lateFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := l.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	lf := &lateFile{File: f, fs: l, name: name}
	l.mu.Lock()
	l.files[lf] = true
	l.mu.Unlock()
	return lf, nil
}

func (l *lateFS) Rename(oldpath, newpath string) error {
	if err := l.FS.Rename(oldpath, newpath); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for f := range l.files {
		if f.name == oldpath {
			f.name = newpath
		}
	}
	return nil
}

func (f *lateFile) WriteAt(p []byte, off int64) (int, error) {
	l := f.fs
	l.mu.Lock()
	mode := l.mode
	if mode != lateOff && isSegment(f.name) && off > 0 { // a group, not a segment header
		l.mode = lateOff
		l.pending = append(l.pending, lateWrite{path: f.name, off: off, data: bytes.Clone(p)})
		if mode == lateFailSync {
			l.syncErr[f] = true
		}
		l.mu.Unlock()
		if mode == lateFailWrite {
			return 0, syscall.EIO
		}
		return len(p), nil
	}
	l.mu.Unlock()
	return f.File.WriteAt(p, off)
}

func (f *lateFile) Sync() error {
	l := f.fs
	l.mu.Lock()
	fail := l.syncErr[f]
	delete(l.syncErr, f)
	l.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.File.Sync()
}

func (f *lateFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.files, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}

// checkView checks that a ReadOnly scans exactly want and reads each record's bytes back.
func checkView(t *testing.T, what string, r *wal.ReadOnly, want []record) {
	t.Helper()
	var got []record
	if _, err := r.Scan(func(typ byte, p []byte, pos wal.Pos) error {
		got = append(got, record{typ, bytes.Clone(p), pos})
		return nil
	}); err != nil {
		t.Fatalf("%s: Scan: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: scanned %v, want %v", what, got, want)
	}
	sameRecords(t, got, want)
	for i, rec := range want {
		p := make([]byte, len(rec.payload))
		if err := r.ReadAt(p, rec.pos); err != nil || !bytes.Equal(p, rec.payload) {
			t.Fatalf("%s: ReadAt record %d at %d: %v", what, i, rec.pos, err)
		}
	}
}

// A group whose write failed is rolled back. Without Config.Fence (a directory nobody
// else reads) the next group starts a new segment at the same position (it reuses the
// failed group's positions, as the broker reuses its offsets); with it the WAL fails
// for good instead (TestStaleListingNeverSealsLateBytes says why). When the failed
// group's bytes land later, valid records sit in the old segment where the log goes on
// in the new one: no reader may return them, before or after the seal, and the acked
// records read back unchanged.
func TestLateBytesOfAFailedWriteAreNeverRead(t *testing.T) {
	for _, fence := range []bool{false, true} {
		for _, prealloc := range []bool{true, false} {
			for _, land := range []string{"next", "seal", "end"} { // before the next group; after it, before the seal; after the seal
				name := fmt.Sprintf("fence=%v/prealloc=%v/land-before-%s", fence, prealloc, land)
				t.Run(name, func(t *testing.T) { testLateBytesOfAFailedWrite(t, fence, prealloc, land) })
			}
		}
	}
}

func testLateBytesOfAFailedWrite(t *testing.T, fence, prealloc bool, land string) {
	lfs := newLateFS(waltest.NewMemFS())
	cfg := memConfig(lfs)
	if fence {
		cfg = fencedConfig(lfs)
	}
	cfg.Preallocate = prealloc
	w, _, _ := openWAL(t, cfg)
	acked := []record{mustAppend(t, w, 1, payload(1, 100)), mustAppend(t, w, 2, payload(2, 100))}
	early, err := wal.OpenReadOnly(testDir, lfs) // a loader's view, opened before anything failed
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	checkView(t, "view before the failure", early, acked)

	lfs.arm(lateFailWrite)
	phantom := payload(3, 100) // same size as the record that reuses its position
	if pos, err := w.AppendSync(context.Background(), 3, phantom); !errors.Is(err, wal.ErrIO) {
		t.Fatalf("failed write: pos %d, err %v, want ErrIO", pos, err)
	}
	if fence && !errors.Is(w.Err(), wal.ErrFailed) {
		t.Fatalf("after a failed write with a fence token: Err() = %v, want ErrFailed", w.Err())
	}
	if land == "next" {
		lfs.land(t)
	}
	appendNext := func(i int) {
		t.Helper()
		if !fence {
			acked = append(acked, mustAppend(t, w, byte(i), payload(i, 100)))
			return
		}
		if _, err := w.AppendSync(context.Background(), byte(i), payload(i, 100)); !errors.Is(err, wal.ErrFailed) {
			t.Fatalf("append after a failed write with a fence token: %v, want ErrFailed", err)
		}
	}
	appendNext(4)
	if land == "seal" {
		lfs.land(t)
	}
	appendNext(5)
	checkReadAt(t, w, acked)
	if land == "end" || !fence {
		// Landed late bytes are the unsynced tail of a fenced owner's last segment
		// (never acked): a live scan may return them.
		checkView(t, "view before the seal", early, acked)
		live, err := wal.OpenReadOnly(testDir, lfs)
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, "fresh view of the live directory", live, acked)
		live.Close()
	}

	info, err := wal.Seal(lfs, testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	want := acked
	if fence && land != "end" {
		// Landed before the seal: sealed with the directory, never acked (and since
		// nothing was written after them, no position is held twice).
		want = append(want, record{3, phantom, w.End() + wal.RecordHeaderSize})
	}
	if end := want[len(want)-1].pos + wal.Pos(len(want[len(want)-1].payload)); info.End != end {
		t.Fatalf("sealed at %d, want %d", info.End, end)
	}
	if land == "end" {
		lfs.land(t)
	}
	checkView(t, "view opened before the seal", early, want)
	sealed, err := wal.OpenReadOnly(testDir, lfs)
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	checkView(t, "view of the sealed directory", sealed, want)
	if again, err := wal.Seal(lfs, testDir, "second taker"); err != nil || again != info {
		t.Fatalf("second seal %+v, %v; want the first %+v", again, err, info)
	}
}

// The same with Replay: an unfenced WAL reopened after the late bytes landed sees
// exactly the acked records and appends after them.
func TestLateBytesOfAFailedWriteAreNotReplayed(t *testing.T) {
	for _, prealloc := range []bool{true, false} {
		t.Run(map[bool]string{true: "prealloc", false: "append"}[prealloc], func(t *testing.T) {
			lfs := newLateFS(waltest.NewMemFS())
			cfg := memConfig(lfs)
			cfg.Preallocate = prealloc
			w, _, _ := openWAL(t, cfg)
			acked := []record{mustAppend(t, w, 1, payload(1, 100))}
			lfs.arm(lateFailWrite)
			if _, err := w.AppendSync(context.Background(), 3, payload(3, 100)); !errors.Is(err, wal.ErrIO) {
				t.Fatalf("failed write: %v, want ErrIO", err)
			}
			acked = append(acked, mustAppend(t, w, 4, payload(4, 100)))
			lfs.land(t)
			w, got, info := reopen(t, w, cfg)
			if info.Torn || info.Corruption {
				t.Fatalf("replay %+v", info)
			}
			sameRecords(t, got, acked)
			acked = append(acked, mustAppend(t, w, 5, payload(5, 100)))
			_, got, _ = reopen(t, w, cfg)
			sameRecords(t, got, acked)
		})
	}
}

// A group whose fdatasync failed (NFS reports a failed WRITE there) fails the WAL for
// good; its bytes may still reach the server later (the client's writeback after the
// owner died or was fenced). Landing before the seal, they are sealed with the directory
// (never acked: a producer's retry is deduplicated or gets a new offset, since nothing
// reuses their positions); landing after it, no view reads them, also one opened before
// the seal.
func TestLateBytesOfAFailedSync(t *testing.T) {
	for _, beforeSeal := range []bool{true, false} {
		t.Run(map[bool]string{true: "land-before-seal", false: "land-after-seal"}[beforeSeal], func(t *testing.T) {
			lfs := newLateFS(waltest.NewMemFS())
			w, _, _ := openWAL(t, fencedConfig(lfs))
			acked := []record{mustAppend(t, w, 1, payload(1, 100))}
			early, err := wal.OpenReadOnly(testDir, lfs)
			if err != nil {
				t.Fatal(err)
			}
			defer early.Close()
			checkView(t, "view before the failure", early, acked)

			lfs.arm(lateFailSync)
			phantom := payload(3, 100)
			// It would follow the acked record (a failed append reports no position).
			pos := acked[0].pos + wal.Pos(len(acked[0].payload)+wal.RecordHeaderSize)
			if _, err := w.AppendSync(context.Background(), 3, phantom); !errors.Is(err, wal.ErrFailed) {
				t.Fatalf("failed sync: %v, want ErrFailed", err)
			}
			if _, err := w.AppendSync(context.Background(), 4, payload(4, 100)); !errors.Is(err, wal.ErrFailed) {
				t.Fatalf("append after a failed sync: %v, want ErrFailed", err)
			}
			want := acked
			if beforeSeal {
				lfs.land(t)
				want = append(want, record{3, phantom, pos})
			}
			info, err := wal.Seal(lfs, testDir, "taker")
			if err != nil {
				t.Fatal(err)
			}
			if !beforeSeal {
				lfs.land(t)
			}
			if beforeSeal != (info.End > acked[0].pos+wal.Pos(len(acked[0].payload))) {
				t.Fatalf("sealed at %d with the late bytes landed %v", info.End, beforeSeal)
			}
			checkView(t, "view opened before the seal", early, want)
			sealed, err := wal.OpenReadOnly(testDir, lfs)
			if err != nil {
				t.Fatal(err)
			}
			defer sealed.Close()
			checkView(t, "view of the sealed directory", sealed, want)
			if !beforeSeal {
				p := make([]byte, len(phantom))
				for _, r := range []*wal.ReadOnly{early, sealed} {
					if err := r.ReadAt(p, pos); !errors.Is(err, wal.ErrOutOfRange) {
						t.Fatalf("ReadAt of the late bytes past the seal: %v, want ErrOutOfRange", err)
					}
				}
			}
		})
	}
}

// A taker whose listing of the directory is stale (NFS readdir caching; a lookup by name
// is fresh) does not see a segment the owner started after it listed. Scans follow the
// chain by name from where the last listed segment's records end, which finds a
// segment started after a clean end; but after a failed write the next segment starts
// where the failed group started, and if the failed bytes landed, they continue the old
// segment as valid records, so the records seem to end elsewhere. Here the failed record
// even holds a valid frame exactly where the next acked record lies in the new segment
// (24 bytes in: a segment header's size). A taker sealing with such a listing would seal
// the late bytes and lose the acked records after them; so with a fence token a failed
// write fails the WAL for good, and nothing is acked after it in that directory.
func TestStaleListingNeverSealsLateBytes(t *testing.T) {
	mem := waltest.NewMemFS()
	lfs := newLateFS(mem)
	cfg := fencedConfig(lfs)
	cfg.Preallocate = false
	w, _, _ := openWAL(t, cfg)
	acked := []record{mustAppend(t, w, 1, payload(1, 100))}
	x := w.End() // where the failed group starts

	taker := waltest.NewStaleFS(mem)
	taker.SetStaleDirs(true)
	early, err := wal.OpenReadOnly(testDir, taker) // caches the listing: one segment
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	checkView(t, "view before the failure", early, acked)

	filler := wal.HeaderSize - wal.RecordHeaderSize // the failed frame's payload, up to x+HeaderSize
	evil := append(make([]byte, filler), wal.AppendRecord(nil, 9, payload(9, 100))...)
	lfs.arm(lateFailWrite)
	if _, err := w.AppendSync(context.Background(), 3, evil); !errors.Is(err, wal.ErrIO) {
		t.Fatalf("failed write: %v, want ErrIO", err)
	}
	lfs.land(t)
	if pos, err := w.AppendSync(context.Background(), 4, payload(4, 100)); err == nil {
		// The bug this test is for: acked in a new segment at x, at this position.
		if want := x + wal.HeaderSize + wal.RecordHeaderSize; pos != want {
			t.Fatalf("next record at %d, want %d (the late bytes' frame)", pos, want)
		}
		acked = append(acked, record{4, payload(4, 100), pos})
	}

	info, err := wal.Seal(taker, testDir, "taker")
	if err != nil {
		t.Fatal(err)
	}
	last := acked[len(acked)-1]
	if end := last.pos + wal.Pos(len(last.payload)); info.End < end {
		t.Fatalf("sealed at %d, before the end %d of the acked records", info.End, end)
	}
	for _, fs := range []wal.FS{taker, mem} {
		r, err := wal.OpenReadOnly(testDir, fs)
		if err != nil {
			t.Fatal(err)
		}
		got := map[wal.Pos]record{}
		if _, err := r.Scan(func(typ byte, p []byte, pos wal.Pos) error {
			got[pos] = record{typ, bytes.Clone(p), pos}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, a := range acked {
			if g, ok := got[a.pos]; !ok || g.typ != a.typ || !bytes.Equal(g.payload, a.payload) {
				t.Fatalf("acked record %v reads back as %v (found %v)", a, g, ok)
			}
			p := make([]byte, len(a.payload))
			if err := r.ReadAt(p, a.pos); err != nil || !bytes.Equal(p, a.payload) {
				t.Fatalf("ReadAt of acked record %v: %v", a, err)
			}
		}
		r.Close()
	}
}

// The group written before the failed one (its fdatasync still running when the write
// failed) is acked as usual; the failed group and every later one are not, and the WAL
// reports that it failed for good.
func TestFailedWriteStopsAFencedWALAfterTheGroupInFlight(t *testing.T) {
	fs := waltest.NewFaultFS(waltest.NewMemFS())
	w, _, _ := openWAL(t, fencedConfig(fs))
	acked := []record{mustAppend(t, w, 1, payload(1, 100))}

	syncing, release, writeFailed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var armed sync.Once
	writes := 0
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if !isSegment(name) {
			return nil
		}
		switch op {
		case waltest.OpSync:
			armed.Do(func() { close(syncing); <-release })
		case waltest.OpWrite:
			if writes++; writes == 2 {
				close(writeFailed)
				return syscall.EIO
			}
		}
		return nil
	})
	done1, done2 := make(chan error, 1), make(chan error, 1)
	var pos1 wal.Pos
	w.Append(wal.Entry{Type: 2, Payload: payload(2, 100), Done: func(p wal.Pos, err error) { pos1 = p; done1 <- err }})
	<-syncing
	w.Append(wal.Entry{Type: 3, Payload: payload(3, 100), Done: func(_ wal.Pos, err error) { done2 <- err }})
	<-writeFailed
	close(release)
	if err := <-done1; err != nil {
		t.Fatalf("the group written before the failed one: %v, want acked", err)
	}
	acked = append(acked, record{2, payload(2, 100), pos1})
	if err := <-done2; !errors.Is(err, wal.ErrIO) {
		t.Fatalf("the failed group: %v, want ErrIO", err)
	}
	if _, err := w.AppendSync(context.Background(), 4, payload(4, 100)); !errors.Is(err, wal.ErrFailed) {
		t.Fatalf("a group after the failed one: %v, want ErrFailed", err)
	}
	if !errors.Is(w.Err(), wal.ErrFailed) || !errors.Is(w.Err(), wal.ErrIO) {
		t.Fatalf("Err() = %v, want ErrFailed wrapping the write's ErrIO", w.Err())
	}
	checkReadAt(t, w, acked)
	fs.SetHook(nil)
	if _, err := wal.Seal(fs, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	sealed, err := wal.OpenReadOnly(testDir, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	checkView(t, "sealed", sealed, acked)
}

// ReadAt through a view whose listing is stale must not serve a position of a segment it
// has not opened from the segment before it (whose file holds preallocated zeros, or a
// failed write's late bytes, at that position): Scan opens the segments it found by name,
// and a sealed view opens the seal's last segment by name.
func TestStaleListingReadAtUsesTheRightSegment(t *testing.T) {
	mem := waltest.NewMemFS()
	w, acked := ownedLog(t, mem, 3) // all in the first segment
	reader := waltest.NewStaleFS(mem)
	reader.SetStaleDirs(true)
	live, err := wal.OpenReadOnly(testDir, reader) // caches the listing: one segment
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	checkView(t, "before the roll", live, acked)
	for i := 3; i < 40; i++ { // several segments of 1 KiB
		acked = append(acked, mustAppend(t, w, byte(i), payload(i, 20+i%90)))
	}
	checkView(t, "live, after the rolls", live, acked)

	if _, err := wal.Seal(mem, testDir, "taker"); err != nil {
		t.Fatal(err)
	}
	sealed, err := wal.OpenReadOnly(testDir, reader)
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	last := acked[len(acked)-1] // in the seal's last segment, which the listing does not show
	p := make([]byte, len(last.payload))
	if err := sealed.ReadAt(p, last.pos); err != nil || !bytes.Equal(p, last.payload) {
		t.Fatalf("sealed view without a Scan: ReadAt %d: %v (right bytes: %v)", last.pos, err, bytes.Equal(p, last.payload))
	}
}
