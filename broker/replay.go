package broker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/wal"
)

// offsetsRec is a legacy record (type partlog.RecOffsets) of committed offsets, written
// before offsets moved into __consumer_offsets; it is still replayed.
type offsetsRec struct {
	Group   string         `json:"g"`
	Offsets []group.Offset `json:"o"`
}

// replay rebuilds, from this broker's WAL, every partition it leads (the links of their
// chains that are its own), then reads the other links from the other brokers' WALs.
func (b *Broker) replay() error {
	start := time.Now()
	parts := b.parts.All()
	self := b.cfg.NodeID
	view := b.meta.View()
	var batches, skipped int
	var legacy []offsetsRec
	info, err := b.wal.Replay(func(typ byte, payload []byte, pos wal.Pos) error {
		switch typ {
		case partlog.RecBatch:
			id, idx, batch, err := partlog.DecodeBatchRec(payload)
			if err != nil {
				return err
			}
			p := b.parts.Get(id, idx)
			h, err := recbatch.Parse(batch)
			if err != nil {
				return fmt.Errorf("broker: replay at %d: %w", pos, err)
			}
			if p == nil {
				skipped++ // deleted topic, or a partition led elsewhere now
				if b.tier != nil {
					b.tier.PinReplayed(view, id, idx, &h, pos+partlog.BatchRecHdr)
				}
				return nil
			}
			for _, r := range p.Chain() {
				if r.Broker == self && r.Holds(h.BaseOffset) {
					p.Collect(&h, b.wal, pos+partlog.BatchRecHdr, len(batch))
					batches++
					return nil
				}
			}
			skipped++
		case partlog.RecOffsets:
			var rec offsetsRec
			if err := json.Unmarshal(payload, &rec); err != nil {
				return fmt.Errorf("broker: replay offsets at %d: %w", pos, err)
			}
			legacy = append(legacy, rec)
		default:
			return fmt.Errorf("broker: unknown WAL record type %d at %d", typ, pos)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("broker: replay: %w", err)
	}
	b.replayInfo = info
	for _, rec := range legacy {
		for _, o := range rec.Offsets {
			b.groups.Restore(rec.Group, o)
		}
	}
	foreign := map[*partlog.Partition][]partlog.LogRange{}
	for _, p := range parts {
		for _, r := range p.Chain() {
			if r.Broker != self {
				foreign[p] = append(foreign[p], r)
			}
		}
	}
	if len(foreign) > 0 {
		if err := b.loader.Load(parts, foreign); err != nil {
			return fmt.Errorf("broker: reading previous leaders' WALs: %w", err)
		}
	}
	for _, p := range parts {
		b.finishLoad(p)
	}
	attrs := []any{"partitions", len(parts), "batches", batches, "skipped", skipped, "from_other_wals", len(foreign), "end", info.End, "took", time.Since(start)}
	if info.Torn {
		b.log.Warn("WAL replay stopped at a torn or corrupt record; later bytes were discarded",
			append(attrs, "segment", info.TornSegment, "at", info.TornAt, "reason", info.Reason)...)
	} else {
		b.log.Info("WAL replayed", attrs...)
	}
	return nil
}
