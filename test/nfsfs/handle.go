package nfsfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is an open file of a mount: reads that miss the kernel's page cache go to the
// server (with this mount's unflushed writes laid over them); writes stay in the mount
// until fsync, close or memory pressure.
type handle struct {
	n        *node
	lf       *fs.LoopbackFile
	fd       int
	writable bool
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func newHandle(n *node, fh fs.FileHandle, flags uint32) *handle {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	acc := flags & syscall.O_ACCMODE
	return &handle{n: n, lf: lf, fd: fd, writable: acc == syscall.O_WRONLY || acc == syscall.O_RDWR}
}

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := h.n.m.op(ctx, OpRead, len(buf)); errno != 0 {
		return nil, errno
	}
	k, err := syscall.Pread(h.fd, buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	clear(buf[k:])
	k = h.n.m.overlay(h.n, buf, off, k)
	return fuse.ReadResultData(buf[:k]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.n.m.write(h.n, data, off) {
		if errno := h.n.m.writeBack(ctx, h.n, h.fd, false); errno != 0 {
			return 0, errno
		}
	}
	return uint32(len(data)), 0
}

// Flush is called at every close: NFS writes back and commits a file's dirty data
// when it is closed, so that the next opener anywhere sees it.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !h.writable {
		return 0
	}
	return h.n.m.writeBack(ctx, h.n, h.fd, true)
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if !h.writable {
		return 0
	}
	return h.n.m.writeBack(ctx, h.n, h.fd, true)
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	if h.writable && h.n.m.writeBack(ctx, h.n, h.fd, true) != 0 && !h.n.m.opts.ReplayFailedWrites {
		// Flush (close) reported the failure already; the pages are dropped as
		// NFS drops them. (Another handle still open on the file loses them too.)
		h.n.m.drop(h.n)
	}
	return h.lf.Release(ctx)
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if errno := h.lf.Getattr(ctx, out); errno != 0 {
		return errno
	}
	h.n.m.sawAttr(h.n, &out.Attr)
	out.Attr.Size = h.n.m.localSize(h.n, out.Attr.Size)
	return 0
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if errno := h.n.m.op(ctx, OpWrite, 0); errno != 0 {
		return errno
	}
	if errno := h.lf.Allocate(ctx, off, size, mode); errno != 0 {
		return errno
	}
	var st syscall.Stat_t
	if syscall.Fstat(h.fd, &st) == nil {
		h.n.m.saw(h.n, &st) // this mount's own change (weak cache consistency)
	}
	return 0
}
