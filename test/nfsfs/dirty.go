package nfsfs

import (
	"context"
	"sync"
	"syscall"
	"time"
)

// dirtyFile is one inode's data written through this mount and not yet sent to the
// server: the mount's page cache holds it, other mounts cannot see it.
type dirtyFile struct {
	flush       sync.Mutex // one write-back at a time
	ext         []extent   // in write order (later ones win)
	sealed      int        // ext[:sealed] are being written back: never grown
	end         int64      // the furthest byte written
	uncommitted bool       // written back without a COMMIT since
}

type extent struct {
	off  int64
	data []byte
}

// write buffers data at off for n, and reports whether the mount holds more
// than it may (the caller then writes back).
func (m *Mount) write(n *node, data []byte, off int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := n.dirty
	if d == nil {
		d = &dirtyFile{}
		n.dirty = d
	}
	if _, ok := m.dirtyN[n]; !ok {
		m.dirtyN[n] = time.Now()
	}
	if n := len(d.ext); n > d.sealed && d.ext[n-1].off+int64(len(d.ext[n-1].data)) == off {
		d.ext[n-1].data = append(d.ext[n-1].data, data...) // an append: the common case
	} else {
		d.ext = append(d.ext, extent{off: off, data: append([]byte(nil), data...)})
	}
	d.end = max(d.end, off+int64(len(data)))
	m.bytes += int64(len(data))
	return m.bytes > m.opts.MaxDirty
}

// overlay copies the dirty data of nd over buf (read from the server at off, n bytes
// valid) and returns how many bytes of buf are valid now.
func (m *Mount) overlay(nd *node, buf []byte, off int64, n int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := nd.dirty
	if d == nil {
		return n
	}
	end := off + int64(len(buf))
	for _, e := range d.ext {
		eEnd := e.off + int64(len(e.data))
		if eEnd <= off || e.off >= end {
			continue
		}
		lo, hi := max(off, e.off), min(end, eEnd)
		copy(buf[lo-off:hi-off], e.data[lo-e.off:hi-e.off])
		n = max(n, int(hi-off))
	}
	return n
}

// writeBack sends n's dirty data to the server through fd (WRITE RPCs of at most
// 1 MiB), then, if commit, makes it stable (COMMIT). On an error the data not yet
// written is dropped and the error returned once, as Linux reports a failed write-back
// at fsync or close and then forgets it.
func (m *Mount) writeBack(ctx context.Context, n *node, fd int, commit bool) syscall.Errno {
	m.mu.Lock()
	d := n.dirty
	m.mu.Unlock()
	if d == nil {
		return 0
	}
	d.flush.Lock()
	defer d.flush.Unlock()
	m.mu.Lock()
	d.sealed = len(d.ext)
	todo := append([]extent(nil), d.ext[:d.sealed]...)
	m.mu.Unlock()
	var pre syscall.Stat_t
	preOK := syscall.Fstat(fd, &pre) == nil && m.unchanged(n, &pre)
	done := 0
	var errno syscall.Errno
	for _, e := range todo {
		for o := 0; o < len(e.data) && errno == 0; o += 1 << 20 {
			chunk := e.data[o:min(len(e.data), o+1<<20)]
			if errno = m.op(ctx, OpWrite, len(chunk)); errno == 0 {
				if _, err := syscall.Pwrite(fd, chunk, e.off+int64(o)); err != nil {
					errno = err.(syscall.Errno)
				}
			}
		}
		if errno != 0 {
			break
		}
		done++
	}
	if errno != 0 && !m.opts.ReplayFailedWrites {
		// As Linux does after a failed write-back (NFS included): the error is
		// reported once, and the data is not retried later but lost (the pages are
		// marked clean). Retrying it later, after the writer gave up (a broker whose
		// WAL failed, killed and replaced), would write stale bytes into a file that
		// others own by then.
		done = len(todo)
	}
	m.mu.Lock()
	for _, e := range d.ext[:done] {
		m.bytes -= int64(len(e.data))
	}
	d.ext = d.ext[done:]
	d.sealed = 0
	if len(d.ext) == 0 {
		delete(m.dirtyN, n)
	}
	if done > 0 {
		d.uncommitted = errno == 0 || m.opts.ReplayFailedWrites
	}
	if len(d.ext) == 0 && !d.uncommitted && n.dirty == d {
		n.dirty = nil
	}
	m.mu.Unlock()
	if errno != 0 {
		return errno
	}
	// Weak cache consistency: the server's attributes changed by this mount's own
	// writes do not invalidate its cache (when nobody else changed them meanwhile).
	var post syscall.Stat_t
	if preOK && syscall.Fstat(fd, &post) == nil {
		m.saw(n, &post)
	}
	if !commit {
		return 0
	}
	m.mu.Lock()
	need := d.uncommitted
	m.mu.Unlock()
	if !need {
		return 0
	}
	if errno := m.op(ctx, OpCommit, 0); errno != 0 {
		m.mu.Lock()
		d.uncommitted = m.opts.ReplayFailedWrites // else reported once, not retried (see above)
		if len(d.ext) == 0 && n.dirty == d {
			n.dirty = nil
		}
		m.mu.Unlock()
		return errno
	}
	if m.opts.RealSync {
		if err := syscall.Fdatasync(fd); err != nil {
			return err.(syscall.Errno)
		}
	}
	m.mu.Lock()
	d.uncommitted = false
	if len(d.ext) == 0 && n.dirty == d {
		n.dirty = nil
	}
	m.mu.Unlock()
	return 0
}

// drop forgets n's dirty data (the file was truncated to zero, or its write-back
// failed at the last close: NFS reports the error at close and drops the pages).
func (m *Mount) drop(n *node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := n.dirty; d != nil {
		for _, e := range d.ext {
			m.bytes -= int64(len(e.data))
		}
		n.dirty = nil
	}
	delete(m.dirtyN, n)
}
