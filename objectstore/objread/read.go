package objread

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/weir-io/weir/objectstore/objfmt"
)

// span is what to read from one object of the manifest: adjacent blocks of the
// partition, of which only offsets in ref's range are served.
type span struct {
	ref    ObjectRef
	blocks []objfmt.Block
}

// end is the offset after the span's last served offset.
func (s span) end() int64 {
	return min(s.blocks[len(s.blocks)-1].LastOffset, s.ref.LastOffset) + 1
}

// Read returns whole record batches of (topicID, partition), starting with the batch
// that holds offset, at most maxBytes bytes but always at least one whole batch (KIP-74).
// objs is the partition's manifest from the object holding offset on (objs[0] must hold
// it). When the blocks of objs[0] end before maxBytes is used, Read continues into
// objs[1], ... with whole blocks that fit. The bytes are the batches exactly as stored,
// verified by block and batch CRCs, in a new slice the caller owns.
//
// An offset in the middle of a block costs the bytes of the block before it: like
// objfmt.PartitionIndex.Blocks, Read plans whole blocks within maxBytes, so it may return
// less than maxBytes when more data is available; the next Read continues from there.
// A failure in objs[1:] (a store error, a corrupt block, a missing partition) ends the
// read early with what objs[0] gave; the next Read, starting there, reports it.
func (r *Reader) Read(ctx context.Context, topicID [16]byte, partition int32, offset int64, maxBytes int, objs []ObjectRef) ([]byte, error) {
	if r.isClosed() {
		return nil, ErrClosed
	}
	pk := partKey{topicID, partition}
	seq := r.ra.sequential(pk, offset)
	spans, err := r.walk(ctx, topicID, partition, offset, int64(maxBytes), objs, false)
	if len(spans) == 0 {
		if err == nil {
			err = fmt.Errorf("%w: offset %d of %x/%d, no objects", ErrNotInObject, offset, topicID, partition)
		}
		return nil, err
	}
	if err != nil {
		r.stopped(objs[len(spans)].Key, err)
	}
	if seq {
		r.startReadahead(ctx, topicID, partition, spans[len(spans)-1].end(), objs[len(spans)-1:])
	}
	out, next, err := r.assemble(ctx, spans, offset, maxBytes)
	if err != nil {
		return nil, err
	}
	r.ra.track(pk, next)
	r.m.served.Add(float64(len(out)))
	return out, nil
}

// walk plans the blocks holding offsets from `from` on, in objs order, within budget
// bytes: in objs[0], PartitionIndex.Blocks (at least one block); in each next object,
// only if the previous one was used up, and only whole blocks that fit. It stops at the
// first object it cannot use and returns the spans so far with the reason (nil when the
// budget ran out or the manifest has a gap). cachedOnly uses cached indexes only
// (errNotCached where one is missing).
func (r *Reader) walk(ctx context.Context, topicID [16]byte, partition int32, from, budget int64, objs []ObjectRef, cachedOnly bool) ([]span, error) {
	var spans []span
	for i, ref := range objs {
		if i > 0 && budget <= 0 {
			return spans, nil
		}
		if from < ref.FirstOffset || from > ref.LastOffset {
			if i > 0 {
				return spans, nil
			}
			return nil, fmt.Errorf("%w: offset %d of %x/%d, object %q holds [%d, %d]", ErrNotInObject, from, topicID, partition, ref.Key, ref.FirstOffset, ref.LastOffset)
		}
		var p *objfmt.PartitionIndex
		var err error
		if cachedOnly {
			p, err = r.cachedPartition(ref, topicID, partition)
		} else {
			p, err = r.partition(ctx, ref, topicID, partition)
		}
		if err != nil {
			return spans, err
		}
		bs := p.Blocks(from, budget)
		for k, b := range bs { // serve nothing past the ref's range
			if b.FirstOffset > ref.LastOffset {
				bs = bs[:k]
				break
			}
		}
		if len(bs) == 0 {
			return spans, fmt.Errorf("%w: offset %d of %x/%d, object %q ends at %d", ErrNotInObject, from, topicID, partition, ref.Key, p.LastOffset)
		}
		if i > 0 && bs[0].Length > budget {
			return spans, nil
		}
		sp := span{ref, bs}
		spans = append(spans, sp)
		_, n := objfmt.Span(bs)
		budget -= n
		if last := bs[len(bs)-1].LastOffset; last < ref.LastOffset && last < p.LastOffset {
			return spans, nil // the budget ended inside this object
		}
		from = sp.end()
	}
	return spans, nil
}

// assemble fetches the spans' blocks and concatenates the batches from the one holding
// offset, up to maxBytes (at least one batch). It returns the offset after the last
// batch. Only an error in the first span fails the read.
func (r *Reader) assemble(ctx context.Context, spans []span, offset int64, maxBytes int) ([]byte, int64, error) {
	var parts [][]byte
	total, next := 0, offset
spans:
	for i, sp := range spans {
		blocks, err := r.getBlocks(ctx, sp.ref.Key, sp.blocks)
		if err != nil {
			if i == 0 {
				return nil, 0, err
			}
			r.stopped(sp.ref.Key, err)
			break
		}
		for _, b := range blocks {
			for _, bt := range objfmt.SeekBatch(b.batches, next) {
				if bt.BaseOffset > sp.ref.LastOffset {
					continue spans
				}
				if total > 0 && total+len(bt.Data) > maxBytes {
					break spans
				}
				parts = append(parts, bt.Data)
				total += len(bt.Data)
				next = bt.LastOffset + 1
			}
		}
	}
	if total == 0 { // the index promised the offset, the blocks do not hold it
		return nil, 0, r.corrupt(spans[0].ref.Key, fmt.Errorf("no batch holds offset %d", offset))
	}
	out := make([]byte, 0, total)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, next, nil
}

// stopped logs why a read ended before object key. A manifest that names an object
// without the partition is worth a warning; store errors are the caller's to see when
// its next read starts there, and corruption was logged already.
func (r *Reader) stopped(key string, err error) {
	level := slog.LevelDebug
	if errors.Is(err, ErrNotInObject) {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "objread: read ends before the next object", "key", key, "err", err)
}

// OffsetForTimestamp finds the first block (in objs order, within each ref's range)
// whose max timestamp is at least ts: its first offset (clamped to the ref's first
// offset) and max timestamp; ok is false if there is none. It reads indexes only.
func (r *Reader) OffsetForTimestamp(ctx context.Context, topicID [16]byte, partition int32, ts int64, objs []ObjectRef) (offset, maxTS int64, ok bool, err error) {
	if r.isClosed() {
		return 0, 0, false, ErrClosed
	}
	for _, ref := range objs {
		p, err := r.partition(ctx, ref, topicID, partition)
		if err != nil {
			return 0, 0, false, err
		}
		for _, b := range p.AllBlocks() {
			if b.LastOffset < ref.FirstOffset {
				continue
			}
			if b.FirstOffset > ref.LastOffset {
				break
			}
			if b.MaxTimestamp >= ts {
				return max(b.FirstOffset, ref.FirstOffset), b.MaxTimestamp, true, nil
			}
		}
	}
	return 0, 0, false, nil
}
