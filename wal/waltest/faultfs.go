// Package waltest provides file systems for testing code that uses package
// wal: MemFS (in memory, with crash simulation), FaultFS (injects errors
// and stalls into any FS and counts operations) and StaleFS (one NFS client's
// cache over a shared FS, for tests with several hosts).
package waltest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/weir-io/weir/wal"
)

// Op is a file system operation seen by a FaultFS hook.
type Op int

const (
	OpOpen Op = iota
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpAllocate
	OpRemove
	OpRename
	OpReadDir
	OpMkdir
	OpSyncDir
	OpHardLink
	numOps
)

var opNames = [...]string{"open", "read", "write", "sync", "truncate", "allocate", "remove", "rename", "readdir", "mkdir", "syncdir", "hardlink"}

func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Hook is called before every operation, outside any lock, so it may block to
// simulate a stall. name is the path of the file (the old path for rename and
// hard link, the directory for readdir, mkdir and syncdir); off and n are the offset
// and length of a read or write, n the size for truncate and allocate. A non-nil
// error fails the operation without performing it, except that a *ShortWrite
// returned for OpWrite performs part of the write.
type Hook func(op Op, name string, off int64, n int) error

// ShortWrite, returned by a hook for OpWrite, writes the first N bytes and
// then fails with Err: a torn write.
type ShortWrite struct {
	N   int
	Err error
}

func (e *ShortWrite) Error() string { return fmt.Sprintf("short write of %d bytes: %v", e.N, e.Err) }

// FaultFS wraps an FS, calls a hook before each operation and counts
// operations by kind and file extension.
type FaultFS struct {
	inner wal.FS

	mu     sync.Mutex
	hook   Hook
	counts map[countKey]int64
	open   map[*faultFile]bool // to follow renames
}

type countKey struct {
	op  Op
	ext string
}

// NewFaultFS wraps inner.
func NewFaultFS(inner wal.FS) *FaultFS {
	return &FaultFS{inner: inner, counts: map[countKey]int64{}, open: map[*faultFile]bool{}}
}

// SetHook installs h (nil removes the hook).
func (f *FaultFS) SetHook(h Hook) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

// Count returns how many operations op were attempted on files whose name
// ends in ext (e.g. ".wal"); ext "" counts all.
func (f *FaultFS) Count(op Op, ext string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ext != "" {
		return f.counts[countKey{op, ext}]
	}
	var n int64
	for k, c := range f.counts {
		if k.op == op {
			n += c
		}
	}
	return n
}

// ResetCounts sets all counts to zero.
func (f *FaultFS) ResetCounts() {
	f.mu.Lock()
	clear(f.counts)
	f.mu.Unlock()
}

func (f *FaultFS) before(op Op, name string, off int64, n int) error {
	f.mu.Lock()
	f.counts[countKey{op, filepath.Ext(name)}]++
	h := f.hook
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(op, name, off, n)
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	if err := f.before(OpOpen, name, 0, 0); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	ff := &faultFile{fs: f, f: file, name: name}
	f.mu.Lock()
	f.open[ff] = true
	f.mu.Unlock()
	return ff, nil
}

func (f *FaultFS) Remove(name string) error {
	if err := f.before(OpRemove, name, 0, 0); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *FaultFS) Rename(oldpath, newpath string) error {
	if err := f.before(OpRename, oldpath, 0, 0); err != nil {
		return err
	}
	if err := f.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	for ff := range f.open {
		if ff.name == oldpath {
			ff.name = newpath
		}
	}
	f.mu.Unlock()
	return nil
}

func (f *FaultFS) HardLink(oldname, newname string) error {
	if err := f.before(OpHardLink, oldname, 0, 0); err != nil {
		return err
	}
	return f.inner.HardLink(oldname, newname)
}

func (f *FaultFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := f.before(OpReadDir, dir, 0, 0); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.before(OpMkdir, dir, 0, 0); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *FaultFS) SyncDir(dir string) error {
	if err := f.before(OpSyncDir, dir, 0, 0); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

type faultFile struct {
	fs   *FaultFS
	f    wal.File
	name string // guarded by fs.mu: follows renames
}

func (f *faultFile) path() string {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.name
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.before(OpRead, f.path(), off, len(p)); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.before(OpWrite, f.path(), off, len(p)); err != nil {
		if sw, ok := err.(*ShortWrite); ok {
			n, werr := f.f.WriteAt(p[:min(sw.N, len(p))], off)
			if werr != nil {
				return n, werr
			}
			return n, sw.Err
		}
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.before(OpSync, f.path(), 0, 0); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.before(OpTruncate, f.path(), 0, int(size)); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Allocate(size int64) error {
	if err := f.fs.before(OpAllocate, f.path(), 0, int(size)); err != nil {
		return err
	}
	return f.f.Allocate(size)
}

func (f *faultFile) Stat() (os.FileInfo, error) { return f.f.Stat() }

func (f *faultFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.f.Close()
}
