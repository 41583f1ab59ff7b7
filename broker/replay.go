package broker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// offsetsRec is a legacy record (type partlog.RecOffsets) of committed offsets, written
// before offsets moved into __consumer_offsets; it is still replayed.
type offsetsRec struct {
	Group   string         `json:"g"`
	Offsets []group.Offset `json:"o"`
}

// loadAtStart loads every partition led here from the WALs of its chain — this broker's
// own earlier WALs (sealed by open) and other brokers' — in one scan per WAL directory.
// Partitions taken over from a fenced broker are recovered in the background
// (recovery.go); a partition whose load comes up short keeps loading in the background.
func (b *Broker) loadAtStart() error {
	start := time.Now()
	view := b.meta.View()
	self := b.cfg.NodeID
	var load []*partlog.Partition
	var recover []*partlog.Partition
	ranges := map[*partlog.Partition][]partlog.LogRange{}
	for _, p := range b.parts.All() {
		if mp, ok := partMeta(view, p); ok && mp.Recovering {
			recover = append(recover, p)
			continue
		}
		load = append(load, p)
		ranges[p] = p.Chain()
	}
	var legacy []offsetsRec
	st, err := b.loader.Load(load, ranges, partlog.LoadOptions{AcceptCorruption: b.cfg.AcceptWALLoss, Other: func(src partlog.Source, typ byte, payload []byte) error {
		if src.Broker != self || typ != partlog.RecOffsets {
			return fmt.Errorf("broker: unknown WAL record type %d in %s", typ, src.Dir)
		}
		var rec offsetsRec
		if err := json.Unmarshal(payload, &rec); err != nil {
			return fmt.Errorf("broker: legacy offsets record in %s: %w", src.Dir, err)
		}
		legacy = append(legacy, rec)
		return nil
	}})
	if err != nil {
		return fmt.Errorf("broker: loading partitions (a damaged WAL can be accepted with --accept-wal-loss, losing what follows the damage): %w", err)
	}
	for _, s := range st.Skipped {
		b.log.Error("WAL damaged; what follows the damage is lost (--accept-wal-loss)", "where", s)
	}
	for _, rec := range legacy {
		for _, o := range rec.Offsets {
			b.groups.Restore(rec.Group, o)
		}
	}
	incomplete := 0
	for _, p := range load {
		if !b.finishLoad(p, -1) {
			incomplete++
			b.queueLoad(p, true)
		}
	}
	b.startRecovery(recover)
	b.log.Info("partitions loaded", "partitions", len(load), "incomplete", incomplete, "recovering", len(recover), "took", time.Since(start))
	return nil
}

// partMeta finds a partition's metadata in view.
func partMeta(v *metadata.View, p *partlog.Partition) (metadata.Partition, bool) {
	t := v.TopicByID(p.ID())
	if t == nil || int(p.Index()) >= len(t.Partitions) {
		return metadata.Partition{}, false
	}
	return t.Partitions[p.Index()], true
}
