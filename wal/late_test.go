package wal_test

import (
	"bytes"
	"context"
	"errors"
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

// A group whose write failed is rolled back and the next group starts a new segment at
// the same position (it reuses the failed group's positions, as the broker reuses its
// offsets). When the failed group's bytes land later, valid records with the reused
// positions sit in the old segment past where the new one starts: no reader may return
// them, before or after the seal, and the acked records read back unchanged.
func TestLateBytesOfAFailedWriteAreNeverRead(t *testing.T) {
	for _, c := range []struct {
		name       string
		prealloc   bool
		landBefore string // "next": before the next group is written; "seal": after it, before the seal; "end": after the seal
	}{
		{"prealloc/land-before-next-group", true, "next"},
		{"prealloc/land-before-seal", true, "seal"},
		{"prealloc/land-after-seal", true, "end"},
		{"append/land-before-next-group", false, "next"},
		{"append/land-before-seal", false, "seal"},
		{"append/land-after-seal", false, "end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lfs := newLateFS(waltest.NewMemFS())
			cfg := fencedConfig(lfs)
			cfg.Preallocate = c.prealloc
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
			pos, err := w.AppendSync(context.Background(), 3, phantom)
			if !errors.Is(err, wal.ErrIO) {
				t.Fatalf("failed write: pos %d, err %v, want ErrIO", pos, err)
			}
			if c.landBefore == "next" {
				lfs.land(t)
			}
			acked = append(acked, mustAppend(t, w, 4, payload(4, 100)))
			if c.landBefore == "seal" {
				lfs.land(t)
			}
			acked = append(acked, mustAppend(t, w, 5, payload(5, 100)))
			checkReadAt(t, w, acked)
			checkView(t, "view before the seal", early, acked)
			live, err := wal.OpenReadOnly(testDir, lfs)
			if err != nil {
				t.Fatal(err)
			}
			checkView(t, "fresh view of the live directory", live, acked)
			live.Close()

			info, err := wal.Seal(lfs, testDir, "taker")
			if err != nil {
				t.Fatal(err)
			}
			if info.End != w.End() {
				t.Fatalf("sealed at %d, the owner's end is %d", info.End, w.End())
			}
			if c.landBefore == "end" {
				lfs.land(t)
			}
			checkView(t, "view opened before the seal", early, acked)
			sealed, err := wal.OpenReadOnly(testDir, lfs)
			if err != nil {
				t.Fatal(err)
			}
			defer sealed.Close()
			checkView(t, "view of the sealed directory", sealed, acked)
			if again, err := wal.Seal(lfs, testDir, "second taker"); err != nil || again != info {
				t.Fatalf("second seal %+v, %v; want the first %+v", again, err, info)
			}
		})
	}
}

// The same with Replay: an unfenced WAL reopened after the late bytes landed (a broker
// that replays its own directory) sees exactly the acked records and appends after them.
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
