package wal

import (
	"io"
	"os"

	"github.com/weir-io/weir/internal/sysfile"
)

// FS is the file system the WAL uses. It is an interface so tests can inject
// stalls, torn writes, ENOSPC and sync errors (see package waltest).
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	// Rename atomically replaces newpath with oldpath (used to publish a
	// preallocated segment under its final name).
	Rename(oldpath, newpath string) error
	// HardLink creates newname as a hard link to oldname and fails (with an error
	// wrapping fs.ErrExist) if newname exists: Seal publishes SEAL with it, so
	// that of two takers exactly one creates it, also on NFS (the NFS LINK
	// operation is atomic at the server, unlike a rename, which replaces).
	HardLink(oldname, newname string) error
	ReadDir(dir string) ([]os.DirEntry, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's data durable (fdatasync in OSFS).
	Sync() error
	Truncate(size int64) error
	// Allocate reserves disk space for the first size bytes of the file and
	// extends it to at least size bytes (fallocate mode 0 in OSFS). It returns
	// an error wrapping errors.ErrUnsupported where that is not possible.
	Allocate(size int64) error
	Stat() (os.FileInfo, error)
}

// RangeWriter is an optional capability of a File: WriteBack writes the dirty
// pages of [off, off+n) to the device and waits for them, without a device
// cache flush or any metadata (sync_file_range in OSFS). Background writers
// (zero-filling the next segment) use it to keep little dirty data queued, so
// a group commit's fdatasync never waits behind megabytes of someone else's
// writeback. It is no durability guarantee; Sync still is.
type RangeWriter interface {
	WriteBack(off, n int64) error
}

// Wrapper is an optional capability of an FS that only observes another (counting
// bytes, say): what the WAL knows of the file system underneath still holds through it
// (OSFS's one page cache on a local disk lets the fence check read cached, fence.go).
// A wrapper that changes what reads return (a test model, fault injection) must not
// implement it.
type Wrapper interface {
	Unwrap() FS
}

// isOSFS reports whether fsys is OSFS, directly or through Wrappers.
func isOSFS(fsys FS) bool {
	for {
		switch f := fsys.(type) {
		case osFS:
			return true
		case Wrapper:
			fsys = f.Unwrap()
		default:
			return false
		}
	}
}

// OSFS returns the FS of the operating system.
func OSFS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, osFlags(flag), perm)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error        { return os.Rename(oldpath, newpath) }
func (osFS) HardLink(oldname, newname string) error      { return os.Link(oldname, newname) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct {
	*os.File
}

func (f *osFile) Sync() error               { return fdatasync(f.File) }
func (f *osFile) Allocate(size int64) error { return fallocate(f.File, size) }
func (f *osFile) WriteBack(off, n int64) error {
	return sysfile.WriteBack(f.File, off, n)
}
