package broker

import (
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// Sealed WAL directories (a fenced broker's, or this broker's own from earlier
// processes) are deleted whole once nothing needs them (walhome.PartitionNeeded decides
// per partition, from a view of any age). One broker does it for the cluster (the
// active broker with the lowest ID, as for object garbage); a standalone broker for its
// own home. The directory currently written by a live broker is never sealed, so never
// deleted here (its segments are trimmed one by one, tier/trim.go). Nothing is deleted
// while this broker's lease is not valid: cut off from the controllers, its view and its
// duty may both be over.

// walGCLoop looks at sealed directories as often as the tier collects garbage objects
// (Tier.RetentionInterval), which is also when uploads let them go.
func (b *Broker) walGCLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.Tier.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.ctx.Done():
			return
		}
		if n, err := b.collectWALDirs(); err != nil {
			b.log.Warn("deleting unneeded WAL directories failed; retrying later", "err", err)
		} else if n > 0 {
			b.log.Info("deleted WAL directories that object storage holds", "dirs", n)
		}
	}
}

// collectWALDirs deletes the sealed WAL directories nothing needs; it returns how many.
func (b *Broker) collectWALDirs() (int, error) {
	if !b.leaseOK() {
		return 0, nil
	}
	v := b.meta.View()
	if self, ok := v.Broker(b.cfg.NodeID); ok && self.Draining() {
		return 0, nil // about to leave: the next broker takes the duty
	}
	for _, br := range v.Brokers {
		if br.Accepting() && br.ID < b.cfg.NodeID {
			return 0, nil // not this broker's duty
		}
	}
	homes := map[int32]string{b.cfg.NodeID: b.cfg.WAL.Dir}
	if b.cfg.WALRoot != "" {
		ents, err := b.walFS().ReadDir(b.cfg.WALRoot)
		if err != nil {
			return 0, fmt.Errorf("broker: listing %s: %w", b.cfg.WALRoot, err)
		}
		for _, e := range ents {
			if id, ok := walhome.ParseHomeName(e.Name()); ok && e.IsDir() {
				homes[id] = walhome.HomeDir(b.cfg.WALRoot, id)
			}
		}
	}
	n := 0
	for id, home := range homes {
		dirs, err := walhome.List(b.walFS(), home)
		if err != nil {
			return n, err
		}
		for _, d := range dirs {
			s := partlog.Source{Broker: id, Epoch: d.Epoch, Dir: d.Path}
			// The lease is checked again before every deletion: a scan may take long.
			if !b.leaseOK() {
				return n, nil
			}
			ok, err := b.walDirUnneeded(v, s)
			if err != nil {
				return n, err
			}
			if !ok || !b.leaseOK() {
				continue
			}
			if err := walhome.Remove(b.walFS(), home, d); err != nil {
				return n, err
			}
			b.loader.Forget(s.Dir)
			b.metrics.walDirsDeleted.Inc()
			n++
		}
	}
	return n, nil
}

// walDirUnneeded reports whether a WAL directory is sealed, indexed, and all it holds is
// in object storage (or below the log start, or of a deleted topic).
func (b *Broker) walDirUnneeded(v *metadata.View, s partlog.Source) (bool, error) {
	if s.Dir == b.walDir {
		return false, nil
	}
	seal, sealed, err := wal.ReadSeal(b.walFS(), s.Dir)
	if err != nil || !sealed {
		return false, err
	}
	idx, ok, err := partlog.ReadDirIndex(b.walFS(), s.Dir)
	if err == nil && !ok {
		// Never scanned whole (no partition needed it): scan it once to index it.
		if err := b.loader.IndexDir(s); err != nil {
			return false, err
		}
		idx, ok, err = partlog.ReadDirIndex(b.walFS(), s.Dir)
	}
	if err != nil || !ok {
		return false, err
	}
	for _, r := range idx.Partitions {
		if walhome.PartitionNeeded(v, r.Topic, r.Partition, r.LastOffset) {
			return false, nil
		}
	}
	if len(idx.Proxied) > 0 {
		return b.proxiedUploaded(v, s, seal, idx)
	}
	return true, nil
}
