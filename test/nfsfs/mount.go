package nfsfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options of one mount (one NFS client).
type Options struct {
	// Name identifies the mount to the model (Model.Slow) and in the mount table.
	Name string
	// AttrTimeout is how long the kernel trusts cached attributes (NFS acregmin;
	// default 3 s); EntryTimeout how long it trusts cached names, present and absent
	// (NFS acdirmin with lookupcache=all; default 3 s).
	AttrTimeout, EntryTimeout time.Duration
	// MaxDirty is how many bytes the mount buffers before it writes back without a
	// flush (NFS background writeback under memory pressure; default 64 MiB).
	MaxDirty int64
	// RealSync makes COMMIT also fdatasync the backing file (off: the model's latency
	// stands for the server's stable storage, the backing directory's disk is not used).
	RealSync bool
	// WritebackAfter, if set, writes back (without COMMIT) data that has been
	// dirty this long, as the kernel's background writeback does (dirty_expire):
	// then data written and never fsynced reaches the server even if its writer is
	// paused, fenced or dead — possibly after another host sealed the file.
	WritebackAfter time.Duration
	// ReplayFailedWrites keeps data whose write-back failed dirty, to be written at
	// the next write-back (fsync, close, background), as an NFS client re-sends
	// unstable WRITEs after the server rebooted or failed over (COMMIT verifier
	// changed) — possibly after the writer died. Off: Linux's behaviour for an error
	// (reported once, data dropped).
	ReplayFailedWrites bool
	// Debug logs every FUSE request.
	Debug bool
}

// Mount is one client's view of the backing directory, mounted at Dir.
type Mount struct {
	Dir     string
	name    string
	backing string
	model   *Model
	opts    Options
	srv     *fuse.Server

	// mu guards every node's dirty and seen, and bytes. (Per node, not per inode
	// number: the backing file system reuses a removed file's number at once, and a
	// new file must not inherit the old one's unflushed data.)
	mu     sync.Mutex
	bytes  int64               // dirty bytes of the whole mount
	dirtyN map[*node]time.Time // nodes with dirty data: since when
	stop   chan struct{}
	bgN    int64 // bytes written back by backgroundWriteback
}

// attrStamp is what close-to-open compares: a change of any means the file changed.
type attrStamp struct {
	size         int64
	mtime, ctime int64
}

func stampOf(st *syscall.Stat_t) attrStamp {
	return attrStamp{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// New mounts backing at dir as a new client of model's server. The caller must be
// root with /dev/fuse (the mount is made with mount(2), no fusermount).
func New(dir, backing string, model *Model, o Options) (*Mount, error) {
	if o.AttrTimeout == 0 {
		o.AttrTimeout = 3 * time.Second
	}
	if o.EntryTimeout == 0 {
		o.EntryTimeout = 3 * time.Second
	}
	if o.MaxDirty == 0 {
		o.MaxDirty = 64 << 20
	}
	if o.Name == "" {
		o.Name = dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("nfsfs: backing directory: %w", err)
	}
	m := &Mount{Dir: dir, name: o.Name, backing: backing, model: model, opts: o,
		dirtyN: map[*node]time.Time{}, stop: make(chan struct{})}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, m: m}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	neg := o.EntryTimeout
	srv, err := fs.Mount(dir, root.RootNode, &fs.Options{
		AttrTimeout: &o.AttrTimeout, EntryTimeout: &o.EntryTimeout, NegativeTimeout: &neg,
		MountOptions: fuse.MountOptions{
			DirectMount: true, DirectMountStrict: true, FsName: "nfsfs:" + o.Name, Name: "nfsfs",
			AllowOther: true, MaxWrite: 1 << 20, DisableXAttrs: true, Debug: o.Debug,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nfsfs: mounting %s: %w", dir, err)
	}
	m.srv = srv
	if o.WritebackAfter > 0 {
		go m.backgroundWriteback()
	}
	return m, nil
}

// backgroundWriteback writes back what has been dirty for Options.WritebackAfter,
// through a descriptor of its own (the writer's may be closed, its process stopped).
func (m *Mount) backgroundWriteback() {
	tk := time.NewTicker(m.opts.WritebackAfter / 4)
	defer tk.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tk.C:
		}
		var due []*node
		m.mu.Lock()
		for n, since := range m.dirtyN {
			if time.Since(since) >= m.opts.WritebackAfter {
				due = append(due, n)
			}
		}
		m.mu.Unlock()
		for _, n := range due {
			f, err := os.OpenFile(n.backingPath(), os.O_WRONLY, 0)
			if err != nil {
				continue // removed meanwhile
			}
			m.mu.Lock()
			before := m.bytes
			m.mu.Unlock()
			if m.writeBack(context.Background(), n, int(f.Fd()), false) == 0 {
				m.mu.Lock()
				m.bgN += max(0, before-m.bytes)
				m.mu.Unlock()
			}
			f.Close()
		}
	}
}

// Name is the mount's name.
func (m *Mount) Name() string { return m.name }

// Close unmounts (lazily if busy). Data still buffered in the mount is lost, as an NFS
// client's dirty pages are when its host dies.
func (m *Mount) Close() error {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	done := make(chan error, 1)
	go func() { done <- m.srv.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
	case <-time.After(5 * time.Second):
	}
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("nfsfs: unmounting %s: %w", m.Dir, err)
	}
	return nil
}

// BackgroundBytes is how many bytes background writeback wrote (about: the mount's
// dirty bytes before and after each of its write-backs).
func (m *Mount) BackgroundBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bgN
}

// DirtyBytes is how many bytes the mount holds that the server has not seen.
func (m *Mount) DirtyBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

func (m *Mount) op(ctx context.Context, op Op, n int) syscall.Errno {
	return m.model.do(ctx, m.name, op, n)
}

// saw records the server's attributes of n as given to the kernel.
func (m *Mount) saw(n *node, st *syscall.Stat_t) {
	m.mu.Lock()
	n.seen, n.seenOK = stampOf(st), true
	m.mu.Unlock()
}

// sawAttr is saw for a fuse.Attr.
func (m *Mount) sawAttr(n *node, a *fuse.Attr) {
	m.mu.Lock()
	n.seen = attrStamp{size: int64(a.Size), mtime: int64(a.Mtime)*1e9 + int64(a.Mtimensec), ctime: int64(a.Ctime)*1e9 + int64(a.Ctimensec)}
	n.seenOK = true
	m.mu.Unlock()
}

// unchanged reports whether the server's attributes of n are those last given to the
// kernel (close-to-open: then the cached pages are still good).
func (m *Mount) unchanged(n *node, st *syscall.Stat_t) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return n.seenOK && n.seen == stampOf(st)
}

// localSize is the size the mount shows for n: the server's, or further if data
// written here and not yet flushed extends the file.
func (m *Mount) localSize(n *node, server uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := n.dirty; d != nil && uint64(d.end) > server {
		return uint64(d.end)
	}
	return server
}
