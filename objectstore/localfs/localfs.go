// Package localfs is the embedded object store: each object is a file under a
// directory. It is the default when no S3 endpoint is configured, and what a
// single-machine `weir dev` cluster shares between its brokers.
//
// Layout under the root directory:
//
//	objects/<key>     one file per object; '/' in a key makes subdirectories
//	tmp/              Put's temporary files, renamed into objects/ when complete
//
// Put writes a temporary file (written back to the device as it goes, so an object
// never queues megabytes of writeback in front of a WAL's fdatasync on the same
// disk: pace.go), fsyncs it, renames it over the key's file and fsyncs
// the directory (and every directory it had to create), so a put object survives a
// crash and a crash never leaves a partial object under its key. Leftover temporary
// files older than an hour are removed by Open. Empty directories left by Delete are
// kept. Several Stores (processes) may share one root.
package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/weir-io/weir/internal/sysfile"
	"github.com/weir-io/weir/objectstore"
)

// Store keeps objects as files under a directory.
type Store struct {
	root    string // absolute
	objects string // root/objects
	tmp     string // root/tmp
}

var _ objectstore.Store = (*Store)(nil)

// staleTemp is the age after which Open removes a leftover temporary file.
const staleTemp = time.Hour

// Open creates (if needed) and opens a store rooted at dir.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("objectstore/localfs: directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objectstore/localfs: %w", err)
	}
	s := &Store{root: abs, objects: filepath.Join(abs, "objects"), tmp: filepath.Join(abs, "tmp")}
	for _, d := range []string{s.objects, s.tmp} {
		if err := mkdirAllSync(d); err != nil {
			return nil, fmt.Errorf("objectstore/localfs: open %s: %w", dir, err)
		}
	}
	if ents, err := os.ReadDir(s.tmp); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
				_ = os.Remove(filepath.Join(s.tmp, e.Name()))
			}
		}
	}
	return s, nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.root }

func (s *Store) path(key string) string {
	return filepath.Join(s.objects, filepath.FromSlash(key))
}

func wrap(op, key string, err error) error {
	return fmt.Errorf("objectstore/localfs: %s %q: %w", op, key, err)
}

// Put implements objectstore.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) (err error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return wrap("put", key, err)
	}
	if size < 0 {
		return wrap("put", key, fmt.Errorf("negative size %d", size))
	}
	if err := ctx.Err(); err != nil {
		return wrap("put", key, err)
	}
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return wrap("put", key, ioErr(err))
	}
	tmpName := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmpName)
		}
	}()
	n, err := pacedCopy(f, &ctxReader{ctx: ctx, r: io.LimitReader(body, size+1)}, sysfile.WriteBack)
	if err != nil {
		return wrap("put", key, bodyErr(ctx, err))
	}
	if n != size {
		return wrap("put", key, fmt.Errorf("body has %s bytes, size says %d", countStr(n, size), size))
	}
	if err := f.Sync(); err != nil {
		return wrap("put", key, ioErr(err))
	}
	if err := f.Close(); err != nil {
		return wrap("put", key, ioErr(err))
	}
	if err := ctx.Err(); err != nil {
		return wrap("put", key, err)
	}
	dst := s.path(key)
	dir := filepath.Dir(dst)
	if err := mkdirAllSync(dir); err != nil {
		return wrap("put", key, keyConflict(err))
	}
	if err := os.Rename(tmpName, dst); err != nil {
		return wrap("put", key, keyConflict(err))
	}
	if err := syncDir(dir); err != nil {
		return wrap("put", key, ioErr(err))
	}
	return nil
}

func countStr(n, size int64) string {
	if n > size {
		return "more than " + fmt.Sprint(size)
	}
	return fmt.Sprint(n)
}

// GetRange implements objectstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return nil, wrap("get", key, err)
	}
	if err := objectstore.CheckRange(offset, length); err != nil {
		return nil, wrap("get", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("get", key, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, wrap("get", key, notFound(err))
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, wrap("get", key, ioErr(err))
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, wrap("get", key, objectstore.ErrNotFound)
	}
	n, err := objectstore.ClipRange(offset, length, info.Size())
	if err != nil {
		f.Close()
		return nil, wrap("get", key, err)
	}
	return &rangeReader{ctx: ctx, key: key, f: f, r: io.NewSectionReader(f, offset, n)}, nil
}

type rangeReader struct {
	ctx context.Context
	key string
	f   *os.File
	r   *io.SectionReader
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, wrap("get", r.key, err)
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = wrap("get", r.key, ioErr(err))
	}
	return n, err
}

func (r *rangeReader) Close() error { return r.f.Close() }

// Head implements objectstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := objectstore.ValidateKey(key); err != nil {
		return objectstore.ObjectInfo{}, wrap("head", key, err)
	}
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, wrap("head", key, err)
	}
	info, err := os.Stat(s.path(key))
	if err != nil {
		return objectstore.ObjectInfo{}, wrap("head", key, notFound(err))
	}
	if !info.Mode().IsRegular() {
		return objectstore.ObjectInfo{}, wrap("head", key, objectstore.ErrNotFound)
	}
	return objectstore.ObjectInfo{Key: key, Size: info.Size(), LastModified: info.ModTime()}, nil
}

// Delete implements objectstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return wrap("delete", key, err)
	}
	if err := ctx.Err(); err != nil {
		return wrap("delete", key, err)
	}
	p := s.path(key)
	info, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && info.IsDir()) {
		return nil // a "directory" of other keys is not an object
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return wrap("delete", key, ioErr(err))
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return wrap("delete", key, ioErr(err))
	}
	return nil
}

// List implements objectstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objectstore.ObjectInfo, error) {
	if err := objectstore.ValidatePrefix(prefix); err != nil {
		return nil, wrap("list", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("list", prefix, err)
	}
	// Walk the deepest directory that holds every match: the prefix up to its last '/'.
	dirKey := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey = prefix[:i]
	}
	start := s.objects
	if dirKey != "" {
		start = s.path(dirKey)
	}
	var out []objectstore.ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // removed meanwhile, or the prefix names a file
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(s.objects, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != start && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, objectstore.ObjectInfo{Key: key, Size: info.Size(), LastModified: info.ModTime()})
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, wrap("list", prefix, ctx.Err())
		}
		return nil, wrap("list", prefix, ioErr(err))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// notFound maps a missing file (or a path through a file) to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %v", objectstore.ErrNotFound, err)
	}
	return ioErr(err)
}

// keyConflict explains the one layout limit of localfs: a key cannot also be a
// directory of other keys.
func keyConflict(err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: a key cannot be both an object and a prefix of other keys ending in '/': %v", objectstore.ErrInvalidKey, err)
	}
	return ioErr(err)
}

// ioErr marks local I/O errors that may pass (EIO on a flaky disk, ENOSPC, EMFILE) as
// ErrUnavailable, so callers back off and retry like for a remote store.
func ioErr(err error) error {
	for _, e := range []error{syscall.EIO, syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE, syscall.EAGAIN, syscall.EINTR} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", objectstore.ErrUnavailable, err)
		}
	}
	return err
}

// bodyErr keeps the caller's context error visible when the body read failed because
// the context ended.
func bodyErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return cerr
	}
	return fmt.Errorf("reading body: %w", err)
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// mkdirAllSync creates dir and its missing parents, fsyncing each parent in which it
// created an entry, so the new directories survive a crash.
func mkdirAllSync(dir string) error {
	info, err := os.Stat(dir)
	if err == nil {
		if !info.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if info, serr := os.Stat(dir); serr == nil && info.IsDir() {
				return nil // created concurrently
			}
		}
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
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
