package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/wal"
)

// A broker's WAL home is <wal-root>/broker-<id> in a cluster (on the shared file system)
// or <data-dir>/wal standalone. Every registration epoch writes a WAL directory of its
// own there, epoch-<N>: a new process never appends to files an earlier process of the
// same broker may still write (a zombie hung in NFS I/O, a pod force-deleted but still
// running), and the earlier directories are sealed (wal.Seal) before anyone reads them
// to their end. Segment files directly in the home are a WAL written before epochs had
// directories; it is read as epoch 0.

const epochDirPrefix = "epoch-"

func epochDirName(epoch int64) string { return fmt.Sprintf("%s%020d", epochDirPrefix, epoch) }

// homeOf is where broker id's WAL directories live.
func (b *Broker) homeOf(id int32) (string, error) {
	if id == b.cfg.NodeID {
		return b.cfg.WAL.Dir, nil
	}
	if b.cfg.WALRoot == "" {
		return "", fmt.Errorf("broker: no shared WAL root configured to read broker %d's WAL", id)
	}
	return filepath.Join(b.cfg.WALRoot, fmt.Sprintf("broker-%d", id)), nil
}

// walFS is the file system the broker's WALs are on.
func (b *Broker) walFS() wal.FS {
	if b.cfg.WAL.FS != nil {
		return b.cfg.WAL.FS
	}
	return wal.OSFS()
}

// walSources lists broker id's WAL directories, oldest epoch first: the legacy
// directory (epoch 0) if segments lie directly in the home, then epoch-<N>. A home that
// does not exist yet has none.
func walSources(fsys wal.FS, home string, id int32) ([]partlog.Source, error) {
	ents, err := fsys.ReadDir(home)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: listing %s: %w", home, err)
	}
	var out []partlog.Source
	legacy := false
	for _, e := range ents {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, epochDirPrefix); ok && e.IsDir() {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			out = append(out, partlog.Source{Broker: id, Epoch: n, Dir: filepath.Join(home, name)})
			continue
		}
		if !e.IsDir() && strings.HasSuffix(name, ".wal") {
			legacy = true
		}
	}
	if legacy {
		out = append(out, partlog.Source{Broker: id, Epoch: 0, Dir: home})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
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
	srcs, err := walSources(b.walFS(), home, id)
	if err != nil || id != b.cfg.NodeID {
		return srcs, err
	}
	out := srcs[:0]
	for _, s := range srcs {
		switch {
		case s.Epoch == b.epoch:
			s.Reader = b.wal
		case s.Epoch > b.epoch:
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

// sealUpTo seals every WAL directory of broker id of an epoch <= epoch that is not sealed
// yet: after it, none of their owners can ack anything, and every reader stops where the
// seal says they end.
func (b *Broker) sealUpTo(id int32, epoch int64) error {
	home, err := b.homeOf(id)
	if err != nil {
		return err
	}
	srcs, err := walSources(b.walFS(), home, id)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		if s.Epoch > epoch || (id == b.cfg.NodeID && s.Epoch >= b.epoch) {
			continue
		}
		if _, ok, err := wal.ReadSeal(b.walFS(), s.Dir); err != nil {
			return fmt.Errorf("broker: reading the seal of %s: %w", s.Dir, err)
		} else if ok {
			continue
		}
		by := fmt.Sprintf("broker-%d epoch %d", b.cfg.NodeID, b.epoch)
		info, err := wal.Seal(b.walFS(), s.Dir, by)
		if err != nil && errors.Is(err, wal.ErrCorrupt) && b.cfg.AcceptWALLoss {
			// A damaged WAL cannot be sealed (its end is unknown); fencing it still
			// stops its owner, and the loss was accepted: readers stop at the damage.
			b.log.Error("WAL damaged: fenced without a seal; what follows the damage is lost (--accept-wal-loss)", "dir", s.Dir, "err", err)
			if err := wal.Fence(b.walFS(), s.Dir, by); err != nil {
				return fmt.Errorf("broker: fencing %s: %w", s.Dir, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("broker: sealing %s: %w", s.Dir, err)
		}
		b.log.Info("sealed a WAL directory", "dir", s.Dir, "owner", id, "owner_epoch", s.Epoch, "end", info.End)
	}
	return nil
}

// nextLocalEpoch is a standalone broker's epoch: one more than any directory in its home
// (a cluster broker's is its registration epoch).
func nextLocalEpoch(fsys wal.FS, home string, id int32) (int64, error) {
	srcs, err := walSources(fsys, home, id)
	if err != nil {
		return 0, err
	}
	if len(srcs) == 0 {
		return 1, nil
	}
	return srcs[len(srcs)-1].Epoch + 1, nil
}
