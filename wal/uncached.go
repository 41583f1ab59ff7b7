package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The small files that decide who may ack (FENCE, SEAL, the epoch fence token) are read
// uncached: opened with OUncached (O_DIRECT on Linux), so the read goes to the server
// and never returns a page of the client's cache. A fresh open alone is not enough on
// NFS: close-to-open revalidates the cache only if the file's change attribute moved
// since the client last looked, and after the client's own WRITE the weak cache
// consistency attributes in the reply can make it take another client's change for its
// own and keep a stale page. Where the file system refuses O_DIRECT (EINVAL: tmpfs on
// older kernels, some FUSE file systems) the read falls back to a plain fresh open;
// such a file system is not shared between hosts, so there is no other client's write
// to miss.

// uncachedAlign is the alignment O_DIRECT wants for the buffer, offset and length.
const uncachedAlign = 4096

// maxUncachedRead bounds what readUncached reads (the epoch fence token of a broker
// with a million registrations is 16 MiB).
const maxUncachedRead = 16 << 20

// onceReader is an optional capability of a File: one read system call, which O_DIRECT
// needs (os.File.ReadAt retries a short read at an unaligned offset, which O_DIRECT
// refuses).
type onceReader interface {
	readOnce(p []byte, off int64) (int, error)
}

// alignedBuf returns a zeroed slice of n bytes (n rounded up to uncachedAlign) whose
// first byte is uncachedAlign-aligned.
func alignedBuf(n int) []byte {
	n = (n + uncachedAlign - 1) / uncachedAlign * uncachedAlign
	raw := make([]byte, n+uncachedAlign)
	off := 0
	if r := int(addrOf(raw) % uncachedAlign); r != 0 {
		off = uncachedAlign - r
	}
	return raw[off : off+n : off+n]
}

// ReadUncached reads the file at path whole (at most limit bytes, 0: up to 16 MiB),
// bypassing the client's page cache (see above). A missing file is an error wrapping
// fs.ErrNotExist.
func ReadUncached(fsys FS, path string, limit int) ([]byte, error) {
	if fsys == nil {
		fsys = OSFS()
	}
	if limit <= 0 || limit > maxUncachedRead {
		limit = maxUncachedRead
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY|OUncached, 0)
	if errors.Is(err, syscall.EINVAL) {
		return readCached(fsys, path, limit)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readDirect(f, limit)
	if errors.Is(err, syscall.EINVAL) {
		// Opened, but the file system wants another alignment or no direct I/O at all.
		return readCached(fsys, path, limit)
	}
	return b, err
}

// readDirect reads f from offset 0 in aligned chunks until a short read (the end).
func readDirect(f File, limit int) ([]byte, error) {
	chunk := uncachedAlign
	buf := alignedBuf(chunk)
	got := 0
	for {
		if got == len(buf) {
			if len(buf) >= limit {
				return nil, fmt.Errorf("%w: file larger than %d bytes", ErrCorrupt, limit)
			}
			nb := alignedBuf(min(2*len(buf), limit+uncachedAlign))
			copy(nb, buf)
			buf = nb
		}
		var m int
		var err error
		if r, ok := f.(onceReader); ok {
			m, err = r.readOnce(buf[got:], int64(got))
		} else {
			m, err = f.ReadAt(buf[got:], int64(got))
		}
		got += m
		if err == io.EOF || (err == nil && (m == 0 || got%uncachedAlign != 0)) {
			return buf[:got], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readCached is the fallback: a plain fresh open.
func readCached(fsys FS, path string, limit int) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := st.Size()
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrCorrupt, path, n, limit)
	}
	return readUpTo(f, int(n))
}
