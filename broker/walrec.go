package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// The broker's WAL record types (the WAL itself treats payloads as opaque):
//
//	recBatch    topicID [16]byte | partition int32 (BE) | Kafka record batch v2, offsets assigned
//	recOffsets  JSON {"g": group, "o": [offset commits or tombstones]}
//
// Batch bytes are stored exactly as fetchers receive them, so a fetch is a read of
// [pos+batchRecHdr, +size) with no re-encoding.
const (
	recBatch   byte = 1
	recOffsets byte = 2

	batchRecHdr = 20
)

func encodeBatchRec(id metadata.TopicID, partition int32, batch []byte) []byte {
	p := make([]byte, batchRecHdr+len(batch))
	copy(p, id[:])
	binary.BigEndian.PutUint32(p[16:], uint32(partition))
	copy(p[batchRecHdr:], batch)
	return p
}

func decodeBatchRec(p []byte) (metadata.TopicID, int32, []byte, error) {
	var id metadata.TopicID
	if len(p) < batchRecHdr+batchHeaderLen {
		return id, 0, nil, fmt.Errorf("broker: batch record of %d bytes is too short", len(p))
	}
	copy(id[:], p)
	return id, int32(binary.BigEndian.Uint32(p[16:])), p[batchRecHdr:], nil
}

// offsetsRec is a legacy record (type 2) of committed offsets, written before offsets
// moved into __consumer_offsets; it is still replayed.
type offsetsRec struct {
	Group   string         `json:"g"`
	Offsets []group.Offset `json:"o"`
}

// replay rebuilds, from this broker's WAL, every partition it leads (the links of their
// chains that are its own), then reads the other links from the other brokers' WALs.
func (b *Broker) replay() error {
	start := time.Now()
	b.mu.RLock()
	var parts []*partition
	for _, ps := range b.parts {
		for _, p := range ps {
			parts = append(parts, p)
		}
	}
	b.mu.RUnlock()
	self := b.cfg.NodeID
	view := b.meta.View()
	var batches, skipped int
	var legacy []offsetsRec
	info, err := b.wal.Replay(func(typ byte, payload []byte, pos wal.Pos) error {
		switch typ {
		case recBatch:
			id, idx, batch, err := decodeBatchRec(payload)
			if err != nil {
				return err
			}
			b.mu.RLock()
			p := b.parts[id][idx]
			b.mu.RUnlock()
			h, err := parseBatchHeader(batch)
			if err != nil {
				return fmt.Errorf("broker: replay at %d: %w", pos, err)
			}
			if p == nil {
				skipped++ // deleted topic, or a partition led elsewhere now
				if b.tiered() {
					b.pinReplayed(view, id, idx, &h, pos+batchRecHdr)
				}
				return nil
			}
			for _, r := range p.chain {
				if r.broker == self && r.holds(h.BaseOffset) {
					p.collect(&h, b.wal, pos+batchRecHdr, len(batch))
					batches++
					return nil
				}
			}
			skipped++
		case recOffsets:
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
	foreign := map[*partition][]logRange{}
	for _, p := range parts {
		for _, r := range p.chain {
			if r.broker != self {
				foreign[p] = append(foreign[p], r)
			}
		}
	}
	if len(foreign) > 0 {
		if err := b.loadRanges(parts, foreign); err != nil {
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
