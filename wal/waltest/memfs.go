package waltest

import (
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/weir-io/weir/wal"
)

// MemFS is an in-memory wal.FS that models what survives a crash: file data
// survives only once synced (File.Sync), and creations, renames and removals
// only once their directory is synced (SyncDir). CrashClone returns the state a
// machine would find after a power cut at that moment.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	names   map[string]*node // the namespace as processes see it
	durable map[string]*node // the namespace on disk
}

type node struct {
	data   []byte
	synced []byte
	dirty  bool
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{dirs: map[string]bool{"/": true, ".": true}, names: map[string]*node{}, durable: map[string]*node{}}
}

// Clone returns an independent copy of the current state (synced or not).
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	maps.Copy(c.dirs, m.dirs)
	copied := map[*node]*node{}
	cp := func(n *node) *node {
		if c, ok := copied[n]; ok {
			return c
		}
		nn := &node{data: slices.Clone(n.data), synced: slices.Clone(n.synced), dirty: n.dirty}
		copied[n] = nn
		return nn
	}
	for k, n := range m.names {
		c.names[k] = cp(n)
	}
	for k, n := range m.durable {
		c.durable[k] = cp(n)
	}
	return c
}

// CrashClone returns a new MemFS holding only what a crash now would leave:
// the synced namespace with each file's synced data.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	maps.Copy(c.dirs, m.dirs)
	for k, n := range m.durable {
		d := slices.Clone(n.synced)
		c.names[k] = &node{data: d, synced: slices.Clone(d)}
		c.durable[k] = c.names[k]
	}
	return c
}

func perr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[name]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, perr("open", name, fs.ErrNotExist)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, perr("open", name, fs.ErrNotExist)
		}
		n = &node{}
		m.names[name] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, perr("open", name, fs.ErrExist)
	}
	if flag&os.O_TRUNC != 0 {
		n.data, n.dirty = n.data[:0], true
	}
	return &memFile{fs: m, n: n, name: name, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (m *MemFS) Remove(name string) error {
	name = filepath.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.names[name]; !ok {
		if !m.dirs[name] || name == "/" || name == "." {
			return perr("remove", name, fs.ErrNotExist)
		}
		// A directory: only an empty one, as rmdir.
		for n := range m.names {
			if filepath.Dir(n) == name {
				return perr("remove", name, syscall.ENOTEMPTY)
			}
		}
		for d := range m.dirs {
			if d != name && filepath.Dir(d) == name {
				return perr("remove", name, syscall.ENOTEMPTY)
			}
		}
		delete(m.dirs, name)
		return nil
	}
	delete(m.names, name)
	return nil
}

func (m *MemFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[oldpath]
	if !ok {
		return perr("rename", oldpath, fs.ErrNotExist)
	}
	delete(m.names, oldpath)
	m.names[newpath] = n
	return nil
}

// HardLink makes newname a second name (a hard link) of oldname's file, failing with
// fs.ErrExist if newname exists. Like a creation, the new name is durable once its
// directory is synced.
func (m *MemFS) HardLink(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[oldname]
	switch {
	case !ok:
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrNotExist}
	case !m.dirs[filepath.Dir(newname)]:
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if _, ok := m.names[newname]; ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	m.names[newname] = n
	return nil
}

func (m *MemFS) ReadDir(dir string) ([]os.DirEntry, error) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, perr("readdir", dir, fs.ErrNotExist)
	}
	var out []os.DirEntry
	for name, n := range m.names {
		if filepath.Dir(name) == dir {
			out = append(out, fs.FileInfoToDirEntry(fileInfo{name: filepath.Base(name), size: int64(len(n.data))}))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			out = append(out, fs.FileInfoToDirEntry(fileInfo{name: filepath.Base(d), dir: true}))
		}
	}
	slices.SortFunc(out, func(a, b os.DirEntry) int {
		if a.Name() < b.Name() {
			return -1
		}
		return 1
	})
	return out, nil
}

func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(dir); !m.dirs[d]; d = filepath.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.durable {
		if filepath.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, n := range m.names {
		if filepath.Dir(name) == dir {
			m.durable[name] = n
		}
	}
	return nil
}

// Names returns the paths of all files, sorted.
func (m *MemFS) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.names))
}

type memFile struct {
	fs       *MemFS
	n        *node
	name     string
	writable bool
	closed   bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, perr("read", f.name, fs.ErrClosed)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, perr("write", f.name, fs.ErrClosed)
	}
	if !f.writable {
		return 0, perr("write", f.name, syscall.EBADF)
	}
	f.n.grow(off + int64(len(p)))
	copy(f.n.data[off:], p)
	f.n.dirty = true
	return len(p), nil
}

func (n *node) grow(size int64) {
	if size > int64(len(n.data)) {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("sync", f.name, fs.ErrClosed)
	}
	if f.n.dirty {
		f.n.synced = append(f.n.synced[:0], f.n.data...)
		f.n.dirty = false
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("truncate", f.name, fs.ErrClosed)
	}
	f.n.grow(size)
	f.n.data = f.n.data[:size]
	f.n.dirty = true
	return nil
}

func (f *memFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("allocate", f.name, fs.ErrClosed)
	}
	if size > int64(len(f.n.data)) {
		f.n.grow(size)
		f.n.dirty = true
	}
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return fileInfo{name: filepath.Base(f.name), size: int64(len(f.n.data))}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
