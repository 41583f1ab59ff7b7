package waltest

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/weir-io/weir/wal"
)

// PageSize is the unit in which a StaleFS caches file data.
const PageSize = 4096

// StaleFS models one NFS client (one host) over a shared file system, the inner FS,
// which plays the server. Several StaleFS over one MemFS (or the OS file system) are
// several hosts. It caches what an NFS client may cache, so tests can show which reads
// would be stale and that the WAL never relies on one:
//
//   - Data: per file, the client keeps the size it saw when the file was last opened
//     and every 4 KiB page it has read. ReadAt and Stat through a descriptor return those,
//     even after another client changed the file, and reads past the cached size end
//     there. Like the Linux client's page cache (per inode), the cache is shared by the
//     client's descriptors of the file.
//   - Close-to-open: OpenFile of a path revalidates: the client drops its cached pages of
//     that file and takes the server's current size. (A real client drops them only if
//     the file changed; when it did not, reading again returns the same bytes, so the
//     difference cannot be observed.)
//   - Write-back: writes stay in the client, visible to its own reads only, until Sync or
//     Close sends them to the server (Sync then syncs the server's file: an NFS COMMIT).
//     Truncate and Allocate go to the server at once, as a SETATTR does.
//   - Weak cache consistency (SetOwnWriteStale): an NFS client that wrote a file itself
//     takes the attributes in its WRITE replies as its own change and may keep its pages
//     across a later open even after another client changed the file. With the setting
//     on, OpenFile of a file this client has written keeps its cached pages; a read
//     through a descriptor opened with wal.OUncached (O_DIRECT) always goes to the
//     server, which is why FENCE, SEAL and the epoch fence token are read that way.
//   - Names: creations, removals, renames and hard links go to the server at once, and
//     OpenFile looks a name up there (lookupcache=positive). ReadDir is fresh unless
//     SetStaleDirs is on: then each directory's listing is cached at its first ReadDir
//     and afterwards changes only by this client's own creations, removals, renames and
//     hard links.
//
// A StaleFS is safe for concurrent use.
type StaleFS struct {
	inner wal.FS

	mu        sync.Mutex
	files     map[string]*cachedFile
	staleDirs bool
	ownStale  bool
	dirs      map[string][]os.DirEntry
}

// cachedFile is the client's cache of one file.
type cachedFile struct {
	size  int64            // as of the last open, grown by this client's writes
	pages map[int64][]byte // clean pages read from the server, by index (the last may be short)
	dirty []pendingWrite   // this client's writes the server has not seen yet, in order
	wrote bool             // this client sent writes of the file to the server
}

type pendingWrite struct {
	via  wal.File // the server-side descriptor that wrote it
	off  int64
	data []byte
}

// NewStaleFS returns a client of inner with an empty cache.
func NewStaleFS(inner wal.FS) *StaleFS {
	return &StaleFS{inner: inner, files: map[string]*cachedFile{}, dirs: map[string][]os.DirEntry{}}
}

// SetStaleDirs turns stale directory listings on or off (off drops the cached ones).
func (s *StaleFS) SetStaleDirs(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staleDirs = on
	if !on {
		clear(s.dirs)
	}
}

// SetOwnWriteStale turns on or off keeping the pages of files this client wrote across
// opens (weak cache consistency, see StaleFS).
func (s *StaleFS) SetOwnWriteStale(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ownStale = on
}

// DropCaches forgets every cached page, size and listing (not unwritten data), as if
// the host dropped its caches.
func (s *StaleFS) DropCaches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.files {
		c.pages = map[int64][]byte{}
	}
	clear(s.dirs)
}

func (s *StaleFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	name = filepath.Clean(name)
	direct := flag&wal.OUncached != 0
	f, err := s.inner.OpenFile(name, flag&^wal.OUncached, perm)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.files[name]
	if c == nil {
		c = &cachedFile{}
		s.files[name] = c
	}
	if !(s.ownStale && c.wrote) || c.pages == nil {
		c.pages = map[int64][]byte{} // close-to-open revalidation
	}
	if flag&os.O_TRUNC != 0 {
		c.dirty = nil
	}
	c.size = max(st.Size(), c.dirtyEnd())
	if flag&os.O_CREATE != 0 {
		s.addEntry(name)
	}
	return &staleFile{fs: s, f: f, c: c, name: name, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0, direct: direct}, nil
}

func (c *cachedFile) dirtyEnd() int64 {
	var end int64
	for _, w := range c.dirty {
		end = max(end, w.off+int64(len(w.data)))
	}
	return end
}

func (s *StaleFS) Remove(name string) error {
	name = filepath.Clean(name)
	if err := s.inner.Remove(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, name)
	s.removeEntry(name)
	return nil
}

func (s *StaleFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	if err := s.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.files[oldpath]; ok {
		s.files[newpath] = c
		delete(s.files, oldpath)
	} else {
		delete(s.files, newpath)
	}
	s.removeEntry(oldpath)
	s.addEntry(newpath)
	return nil
}

func (s *StaleFS) HardLink(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	if err := s.inner.HardLink(oldname, newname); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addEntry(newname)
	return nil
}

func (s *StaleFS) ReadDir(dir string) ([]os.DirEntry, error) {
	dir = filepath.Clean(dir)
	s.mu.Lock()
	if cached, ok := s.dirs[dir]; ok && s.staleDirs {
		s.mu.Unlock()
		return slices.Clone(cached), nil
	}
	s.mu.Unlock()
	ents, err := s.inner.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.staleDirs {
		if _, ok := s.dirs[dir]; !ok {
			s.dirs[dir] = slices.Clone(ents)
		}
	}
	return ents, nil
}

// addEntry and removeEntry keep a cached listing in step with this client's own
// changes. s.mu is held.
func (s *StaleFS) addEntry(name string) {
	ents, ok := s.dirs[filepath.Dir(name)]
	if !ok {
		return
	}
	base := filepath.Base(name)
	i, found := slices.BinarySearchFunc(ents, base, func(e os.DirEntry, n string) int {
		switch {
		case e.Name() < n:
			return -1
		case e.Name() > n:
			return 1
		}
		return 0
	})
	if !found {
		s.dirs[filepath.Dir(name)] = slices.Insert(ents, i, fs.FileInfoToDirEntry(fileInfo{name: base}))
	}
}

func (s *StaleFS) removeEntry(name string) {
	dir, base := filepath.Dir(name), filepath.Base(name)
	if ents, ok := s.dirs[dir]; ok {
		s.dirs[dir] = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == base })
	}
}

func (s *StaleFS) MkdirAll(dir string, perm os.FileMode) error { return s.inner.MkdirAll(dir, perm) }
func (s *StaleFS) SyncDir(dir string) error                    { return s.inner.SyncDir(dir) }

type staleFile struct {
	fs       *StaleFS
	f        wal.File // the server's file
	c        *cachedFile
	name     string
	writable bool
	direct   bool // opened with wal.OUncached: reads bypass the cached pages
	closed   bool // guarded by fs.mu
}

func (f *staleFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, perr("read", f.name, fs.ErrClosed)
	}
	c := f.c
	if off >= c.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.size-off))
	clear(p[:n])
	for pos := off; pos < off+int64(n); {
		idx := pos / PageSize
		pg, ok := c.pages[idx]
		if f.direct {
			ok = false
		}
		if !ok {
			buf := make([]byte, PageSize)
			m, err := f.f.ReadAt(buf, idx*PageSize)
			if err != nil && err != io.EOF {
				return 0, err
			}
			pg = buf[:m]
			if !f.direct {
				c.pages[idx] = pg
			}
		}
		in := pos - idx*PageSize
		stop := min(off+int64(n), (idx+1)*PageSize)
		if in < int64(len(pg)) {
			copy(p[pos-off:stop-off], pg[in:])
		}
		pos = stop
	}
	for _, w := range c.dirty { // the client reads its own unwritten data
		lo, hi := max(off, w.off), min(off+int64(n), w.off+int64(len(w.data)))
		if lo < hi {
			copy(p[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *staleFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch {
	case f.closed:
		return 0, perr("write", f.name, fs.ErrClosed)
	case !f.writable:
		return 0, perr("write", f.name, syscall.EBADF)
	}
	f.c.dirty = append(f.c.dirty, pendingWrite{via: f.f, off: off, data: slices.Clone(p)})
	f.c.size = max(f.c.size, off+int64(len(p)))
	return len(p), nil
}

// flush sends the client's unwritten data of the file to the server, in write order,
// and patches it into the cached pages. f.fs.mu is held.
func (f *staleFile) flush() (bool, error) {
	c := f.c
	wrote := len(c.dirty) > 0
	c.wrote = c.wrote || wrote
	for len(c.dirty) > 0 {
		w := c.dirty[0]
		if _, err := w.via.WriteAt(w.data, w.off); err != nil {
			return wrote, err
		}
		for pos := w.off; pos < w.off+int64(len(w.data)); {
			idx := pos / PageSize
			stop := min(w.off+int64(len(w.data)), (idx+1)*PageSize)
			if pg, ok := c.pages[idx]; ok {
				in := pos - idx*PageSize
				if need := int(stop - idx*PageSize); len(pg) < need {
					pg = append(pg, make([]byte, need-len(pg))...)
				}
				copy(pg[in:], w.data[pos-w.off:stop-w.off])
				c.pages[idx] = pg
			}
			pos = stop
		}
		c.dirty = c.dirty[1:]
	}
	c.dirty = nil
	return wrote, nil
}

func (f *staleFile) Sync() error {
	f.fs.mu.Lock()
	if f.closed {
		f.fs.mu.Unlock()
		return perr("sync", f.name, fs.ErrClosed)
	}
	_, err := f.flush()
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *staleFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("truncate", f.name, fs.ErrClosed)
	}
	if _, err := f.flush(); err != nil {
		return err
	}
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	f.c.size = size
	f.c.pages = map[int64][]byte{}
	return nil
}

func (f *staleFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("allocate", f.name, fs.ErrClosed)
	}
	if err := f.f.Allocate(size); err != nil {
		return err
	}
	f.c.size = max(f.c.size, size)
	return nil
}

func (f *staleFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return fileInfo{name: filepath.Base(f.name), size: f.c.size}, nil
}

// Close sends unwritten data to the server and commits it first, as an NFS client
// does on close.
func (f *staleFile) Close() error {
	f.fs.mu.Lock()
	if f.closed {
		f.fs.mu.Unlock()
		return perr("close", f.name, fs.ErrClosed)
	}
	wrote, err := f.flush()
	f.closed = true
	f.fs.mu.Unlock()
	if err == nil && wrote {
		err = f.f.Sync()
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}
