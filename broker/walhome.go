package broker

import (
	"fmt"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// A broker's WAL home and its epoch directories: package wal/walhome owns the layout,
// the epoch fence token, sealing up to an epoch and removing collected directories.
// This file only says where each broker's home is.

// homeOf is where broker id's WAL directories live.
func (b *Broker) homeOf(id int32) (string, error) {
	if id == b.cfg.NodeID {
		return b.cfg.WAL.Dir, nil
	}
	if b.cfg.WALRoot == "" {
		return "", fmt.Errorf("broker: no shared WAL root configured to read broker %d's WAL", id)
	}
	return walhome.HomeDir(b.cfg.WALRoot, id), nil
}

// walFS is the file system the broker's WALs are on.
func (b *Broker) walFS() wal.FS {
	if b.cfg.WAL.FS != nil {
		return b.cfg.WAL.FS
	}
	return wal.OSFS()
}

// walSources lists broker id's WAL directories, oldest epoch first (walhome.Dirs: the
// listing plus every fenced epoch looked up by name).
func walSources(fsys wal.FS, home string, id int32, upTo int64) ([]partlog.Source, error) {
	dirs, err := walhome.Dirs(fsys, home, upTo)
	if err != nil {
		return nil, err
	}
	out := make([]partlog.Source, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, partlog.Source{Broker: id, Epoch: d.Epoch, Dir: d.Path})
	}
	return out, nil
}

// loaderSources is what the loader reads of broker id: every WAL directory; this
// broker's current one is read through its WAL (so trimming and pins know the batches
// as its own) and nothing of a later epoch is read (none can exist: open refuses).
func (b *Broker) loaderSources(id int32) ([]partlog.Source, error) {
	home, err := b.homeOf(id)
	if err != nil {
		return nil, err
	}
	var upTo int64
	if id == b.cfg.NodeID {
		upTo = b.epoch
	}
	srcs, err := walSources(b.walFS(), home, id, upTo)
	if err != nil || id != b.cfg.NodeID {
		return srcs, err
	}
	own := false
	for i := range srcs {
		if srcs[i].Epoch == b.epoch {
			srcs[i].Reader, own = b.ownReader(), true
		}
	}
	if !own && b.wal != nil { // this process's directory, whatever a listing shows
		srcs = append(srcs, partlog.Source{Broker: id, Epoch: b.epoch, Dir: b.walDir, Reader: b.ownReader()})
	}
	return srcs, nil
}

// ownReader reads this process's WAL; batches it wrote as a zone proxy lately come from
// memory.
func (b *Broker) ownReader() partlog.Reader { return recentReader{Reader: b.wal, recent: b.recent} }

// sealUpTo fences and seals every WAL directory of broker id of an epoch <= epoch, by
// name (walhome.SealUpTo): after it, none of their owners can ack anything, and every
// reader stops where the seal says they end.
func (b *Broker) sealUpTo(id int32, epoch int64) error {
	home, err := b.homeOf(id)
	if err != nil {
		return err
	}
	if id == b.cfg.NodeID && epoch >= b.epoch {
		epoch = b.epoch - 1 // never this process's own directory
	}
	return walhome.SealUpTo(b.walFS(), home, epoch, walhome.SealOptions{
		By:            fmt.Sprintf("broker-%d epoch %d", b.cfg.NodeID, b.epoch),
		AcceptCorrupt: b.cfg.AcceptWALLoss,
		Log:           b.log.With("owner", id),
	})
}
