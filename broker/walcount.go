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
	return countingFS{FS: fsys, b: b}
}

type countingFS struct {
	wal.FS
	b *Broker
}

func (c countingFS) OpenFile(name string, flag int, perm os.FileMode) (wal.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || flag&wal.OUncached != 0 {
		return f, err
	}
	id := c.b.cfg.NodeID
	if root := c.b.cfg.WALRoot; root != "" {
		rel, err2 := filepath.Rel(root, name)
		if err2 != nil || strings.HasPrefix(rel, "..") {
			return f, nil // not on the shared file system
		}
		if _, err := fmt.Sscanf(strings.SplitN(rel, string(filepath.Separator), 2)[0], "broker-%d", &id); err != nil {
			id = -1 // not a broker's home: counted as another's
		}
	}
	owner := "other"
	var traffic *routing.Counter
	if id == c.b.cfg.NodeID {
		owner = "own"
	} else if c.b.cfg.Traffic != nil {
		zone := routing.UnknownZone
		if br, ok := c.b.meta.View().Broker(id); ok && br.Rack != "" {
			zone = br.Rack
		}
		traffic = c.b.cfg.Traffic.Counter(zone, routing.KindWALRead)
	}
	m := c.b.metrics.walFSBytes
	return countedFile{File: f, read: m.WithLabelValues("read", owner), write: m.WithLabelValues("write", owner), traffic: traffic}, nil
}

type countedFile struct {
	wal.File
	read, write prometheus.Counter
	traffic     *routing.Counter // nil: this broker's own WAL
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
