package tier

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/objectstore/objfmt"
	"github.com/weir-io/weir/objectstore/objread"
)

// Read reads the partition's batches from offset on out of objects (refs, from
// Partition.Read), up to about limit bytes (objread's rules: whole batches, at least one).
func (t *Tier) Read(ctx context.Context, p *partlog.Partition, offset int64, limit int, refs []objread.ObjectRef) ([]byte, error) {
	return t.reader.Read(ctx, p.ID(), p.Index(), offset, limit, refs)
}

// OffsetForTime is Partition.OffsetForTime over objects too: the first object whose
// newest batch is at or after ts is searched through its index (block granularity, so the
// answer may be a little early, never late).
func (t *Tier) OffsetForTime(ctx context.Context, p *partlog.Partition, ts int64) (offset, batchTS int64, ok bool) {
	refs, logStart := p.ObjectsForTime(ts)
	if refs != nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		off, mts, found, err := t.reader.OffsetForTimestamp(ctx, p.ID(), p.Index(), ts, refs)
		cancel()
		if err == nil && found {
			return max(off, logStart), mts, true
		}
		if err != nil {
			t.log.Warn("offset for timestamp: object index read failed", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
	return p.OffsetForTime(ts)
}

// ReadObjectBatches calls fn, in offset order, for each batch of p that only object
// storage holds (from the log start to the first indexed batch).
func (t *Tier) ReadObjectBatches(ctx context.Context, p *partlog.Partition, fn func(base int64, batch []byte)) error {
	offset, end, all := p.ObjectSpan()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for offset < end {
		i := sort.Search(len(all), func(i int) bool { return all[i].LastOffset >= offset })
		if i == len(all) {
			return nil
		}
		offset = max(offset, all[i].FirstOffset)
		data, err := t.reader.Read(ctx, p.ID(), p.Index(), offset, 8<<20, all[i:min(len(all), i+partlog.MaxObjectRefs)])
		if err != nil {
			return err
		}
		batches, err := objfmt.SplitBatches(data)
		if err != nil {
			return fmt.Errorf("tier: object data at offset %d: %w", offset, err)
		}
		for _, bt := range batches {
			if bt.LastOffset >= offset && bt.BaseOffset < end {
				fn(bt.BaseOffset, bt.Data)
			}
			offset = max(offset, bt.LastOffset+1)
		}
	}
	return nil
}
