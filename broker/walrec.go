package broker

import (
	"context"
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

type offsetsRec struct {
	Group   string         `json:"g"`
	Offsets []group.Offset `json:"o"`
}

// offsetStore makes committed offsets durable in the broker's WAL.
type offsetStore struct{ b *Broker }

func (s offsetStore) CommitOffsets(ctx context.Context, g string, offsets []group.Offset) error {
	payload, err := json.Marshal(offsetsRec{Group: g, Offsets: offsets})
	if err != nil {
		return err
	}
	_, err = s.b.wal.AppendSync(ctx, recOffsets, payload)
	return err
}

// replay rebuilds partitions, producer state and group offsets from the WAL.
func (b *Broker) replay() error {
	start := time.Now()
	var batches, commits, skipped int
	info, err := b.wal.Replay(func(typ byte, payload []byte, pos wal.Pos) error {
		switch typ {
		case recBatch:
			id, idx, batch, err := decodeBatchRec(payload)
			if err != nil {
				return err
			}
			p := b.partition(id, idx)
			if p == nil {
				skipped++ // topic deleted since
				return nil
			}
			h, err := parseBatchHeader(batch)
			if err != nil {
				return fmt.Errorf("broker: replay at %d: %w", pos, err)
			}
			p.replay(&h, pos+batchRecHdr, len(batch))
			batches++
		case recOffsets:
			var rec offsetsRec
			if err := json.Unmarshal(payload, &rec); err != nil {
				return fmt.Errorf("broker: replay offsets at %d: %w", pos, err)
			}
			for _, o := range rec.Offsets {
				b.groups.Restore(rec.Group, o)
			}
			commits++
		default:
			return fmt.Errorf("broker: unknown WAL record type %d at %d", typ, pos)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("broker: replay: %w", err)
	}
	b.replayInfo = info
	attrs := []any{"batches", batches, "offset_commits", commits, "skipped_deleted", skipped, "end", info.End, "took", time.Since(start)}
	if info.Torn {
		b.log.Warn("WAL replay stopped at a torn or corrupt record; later bytes were discarded",
			append(attrs, "segment", info.TornSegment, "at", info.TornAt, "reason", info.Reason)...)
	} else {
		b.log.Info("WAL replayed", attrs...)
	}
	return nil
}
