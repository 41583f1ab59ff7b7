package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/wal"
)

// countingFS counts the bytes read from other brokers' WALs (routing.KindWALRead, by
// the owner's zone): the loader reads every WAL through it, scans and batch reads alike.
// Files of this broker's own home are not counted.
func (b *Broker) countingFS(fsys wal.FS) wal.FS {
	if b.cfg.Traffic == nil || b.cfg.WALRoot == "" {
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
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return f, err
	}
	rel, err2 := filepath.Rel(c.b.cfg.WALRoot, name)
	if err2 != nil || strings.HasPrefix(rel, "..") {
		return f, nil
	}
	var id int32
	if _, err := fmt.Sscanf(strings.SplitN(rel, string(filepath.Separator), 2)[0], "broker-%d", &id); err != nil || id == c.b.cfg.NodeID {
		return f, nil
	}
	zone := routing.UnknownZone
	if br, ok := c.b.meta.View().Broker(id); ok && br.Rack != "" {
		zone = br.Rack
	}
	return countedFile{File: f, c: c.b.cfg.Traffic.Counter(zone, routing.KindWALRead)}, nil
}

type countedFile struct {
	wal.File
	c *routing.Counter
}

func (f countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if n > 0 {
		f.c.Add(routing.In, n)
	}
	return n, err
}
