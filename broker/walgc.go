package broker

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// Sealed WAL directories (a fenced broker's, or this broker's own from earlier
// processes) are deleted whole once nothing needs them: every partition their INDEX
// lists is in object storage past what the directory holds, below its log start, or
// deleted. One broker does it for the cluster (the active broker with the lowest ID, as
// for object garbage); a standalone broker for its own home. The directory currently
// written by a live broker is never sealed, so never deleted here (its segments are
// trimmed one by one, tier/trim.go).

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
			var id int32
			if _, err := fmt.Sscanf(e.Name(), "broker-%d", &id); err == nil && e.IsDir() {
				homes[id] = filepath.Join(b.cfg.WALRoot, e.Name())
			}
		}
	}
	n := 0
	for id, home := range homes {
		srcs, err := walSources(b.walFS(), home, id)
		if err != nil {
			return n, err
		}
		for _, s := range srcs {
			ok, err := b.walDirUnneeded(v, s)
			if err != nil {
				return n, err
			}
			if !ok {
				continue
			}
			if err := removeWALDir(b.walFS(), s.Dir, s.Epoch == 0); err != nil {
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
		t := v.TopicByID(r.Topic)
		if t == nil || int(r.Partition) >= len(t.Partitions) {
			continue
		}
		mp := t.Partitions[r.Partition]
		if mp.UploadedThrough() <= r.LastOffset && mp.LogStartOffset <= r.LastOffset {
			return false, nil
		}
	}
	if len(idx.Proxied) > 0 {
		return b.proxiedUploaded(v, s, seal, idx)
	}
	return true, nil
}

// removeWALDir deletes a sealed WAL directory: its files, then the directory. The seal
// goes last, so a directory half deleted is still sealed (nobody writes into it). The
// legacy WAL (epoch 0) is the broker's home itself, which holds the epoch directories:
// only its files go.
func removeWALDir(fsys wal.FS, dir string, legacy bool) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("broker: listing %s: %w", dir, err)
	}
	var seal []string
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "SEAL") || strings.HasPrefix(e.Name(), "FENCE") {
			seal = append(seal, p)
			continue
		}
		if err := fsys.Remove(p); err != nil {
			return fmt.Errorf("broker: removing %s: %w", p, err)
		}
	}
	for _, p := range seal {
		if err := fsys.Remove(p); err != nil {
			return fmt.Errorf("broker: removing %s: %w", p, err)
		}
	}
	if legacy {
		return fsys.SyncDir(dir)
	}
	if err := fsys.Remove(dir); err != nil {
		return fmt.Errorf("broker: removing %s: %w", dir, err)
	}
	return fsys.SyncDir(filepath.Dir(dir))
}
