package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// countingFS counts what this broker moves to and from the shared WAL file system: every
// byte read or written in a file under the WAL root (weir_broker_wal_fs_bytes_total, by
// op and by whose WAL), this broker's own WAL included (its appends, a zone proxy's
// appends, the zero-fill of preallocated segments, the uploader's reads back) since the
// file system's provisioned throughput carries them all; and, separately, the bytes
// read from other brokers' WALs as traffic from the owner's zone (routing.KindWALRead).
// Uncached reads (fence and seal files, a few hundred bytes) are not wrapped: they need
// the file's own single-read path.
//
// Without a WAL root (a standalone broker) every file is this broker's own.
func (b *Broker) countingFS(fsys wal.FS) wal.FS {
	if _, ok := fsys.(countingFS); ok {
		return fsys
	}
	m := b.metrics.walFSBytes
	c := countingFS{FS: fsys, b: b, root: b.cfg.WALRoot,
		own:   fsCounters{m.WithLabelValues("read", "own"), m.WithLabelValues("write", "own")},
		other: fsCounters{m.WithLabelValues("read", "other"), m.WithLabelValues("write", "other")}}
	if c.root != "" {
		c.ownHome = walhome.HomeDir(c.root, b.cfg.NodeID) + string(filepath.Separator)
	}
	return c
}

// countingFS's counters and this broker's home are found once: OpenFile runs for every
// segment, view and cached fence read (once per group commit on a local disk).
type countingFS struct {
	wal.FS
	b             *Broker
	root, ownHome string // ownHome: this broker's home under root, with a trailing separator
	own, other    fsCounters
}

type fsCounters struct{ read, write prometheus.Counter }

var _ wal.Wrapper = countingFS{}

// Unwrap: counting changes nothing a read returns (wal.Wrapper), so the WAL still knows
// the file system underneath (its fence check reads through one page cache on a local
// disk instead of O_DIRECT at every group commit).
func (c countingFS) Unwrap() wal.FS { return c.FS }

func (c countingFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || flag&wal.OUncached != 0 {
		return f, err
	}
	if c.root == "" || strings.HasPrefix(name, c.ownHome) {
		return countedFile{File: f, fsCounters: c.own}, nil
	}
	rel, err2 := filepath.Rel(c.root, name)
	if err2 != nil || strings.HasPrefix(rel, "..") {
		return f, nil // not on the shared file system
	}
	id := int32(-1) // not a broker's home: counted as another's
	fmt.Sscanf(strings.SplitN(rel, string(filepath.Separator), 2)[0], "broker-%d", &id)
	if id == c.b.cfg.NodeID {
		return countedFile{File: f, fsCounters: c.own}, nil // named another way (a relative path)
	}
	var traffic *routing.Counter
	if c.b.cfg.Traffic != nil {
		zone := routing.UnknownZone
		if br, ok := c.b.meta.View().Broker(id); ok && br.Rack != "" {
			zone = br.Rack
		}
		traffic = c.b.cfg.Traffic.Counter(zone, routing.KindWALRead)
	}
	return countedFile{File: f, fsCounters: c.other, traffic: traffic}, nil
}

type countedFile struct {
	wal.File
	fsCounters
	traffic *routing.Counter // nil: this broker's own WAL
}

func (f countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if n > 0 {
		f.read.Add(float64(n))
		if f.traffic != nil {
			f.traffic.Add(routing.In, n)
		}
	}
	return n, err
}

func (f countedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if n > 0 {
		f.write.Add(float64(n))
	}
	return n, err
}

// WriteBack passes the optional wal.RangeWriter capability through.
func (f countedFile) WriteBack(off, n int64) error {
	if rw, ok := f.File.(wal.RangeWriter); ok {
		return rw.WriteBack(off, n)
	}
	return errors.ErrUnsupported
}
