package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-io/weir/broker/compact"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objfmt"
	"github.com/weir-io/weir/objectstore/objread"
)

// The log cleaner (Kafka's LogCleaner, on objects). Each partition's leader cleans its
// compacted topics' partitions, every Config.CompactInterval, on the objects already in
// the object store, never the WAL tail:
//
//  1. Cleanable: the manifest's ranges, from the front, whose last offset is below the
//     last stable offset and whose newest batch is older than min.compaction.lag.ms.
//     Ranges marked Compacted (written by an earlier pass) are clean, the rest dirty;
//     the pass runs when dirty/(clean+dirty) bytes reach min.cleanable.dirty.ratio, or
//     the first dirty range is older than max.compaction.lag.ms.
//  2. The offset map is built from the dirty ranges, in order, until it holds
//     Config.CompactMapEntries keys (whole ranges; the rest waits for the next pass).
//  3. From the front to the end of the map, ranges are grouped (at most
//     MaxObjectBytes of input each) and each group is rewritten (broker/compact) into
//     one sparse object (objfmt.FlagSparse) that replaces the group's ranges in one
//     controller command (metadata.ObjectRules.Replace). A group that is one compacted
//     range the pass did not change is not written again.
//
// Safety: the replace names the replaced objects and the leader epoch the pass started
// under, so a leader change (failover, move) or a retention that trimmed the front
// refuses it and the old objects keep serving; the old objects are deleted by garbage
// collection once no manifest references them. A failure mid-pass leaves the groups
// committed so far (each one correct by itself) and the rest as they were.

// CompactRound cleans the compacted partitions this broker leads, once.
func (t *Tier) CompactRound() {
	rep, ok := t.manifest.(metadata.ObjectCompactor)
	if !ok {
		return
	}
	v := t.d.Meta.View()
	var dirty int64
	for _, p := range t.d.Led() {
		tp := v.TopicByID(p.ID())
		if tp == nil || !compacts(tp) || int(p.Index()) >= len(tp.Partitions) {
			continue
		}
		n, err := t.compactPartition(rep, v, tp, p)
		dirty += n
		if err != nil {
			t.metrics.cleanFailures.Inc()
			t.log.Warn("compaction failed; the old objects keep serving", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
		if t.ctx.Err() != nil {
			return
		}
	}
	t.metrics.dirtyBytes.Set(float64(dirty))
}

// compacts: cleanup.policy includes compact. The internal topics (__consumer_offsets,
// __transaction_state) compact themselves by rewriting their state (groupload.go,
// txnload.go) and are left alone.
func compacts(t *metadata.Topic) bool {
	return !strings.HasPrefix(t.Name, "__") && t.Compacted()
}

// cleanPlan is what a partition's pass works on.
type cleanPlan struct {
	ranges     []metadata.ObjectRange // from the front of the manifest to the end of the cleanable ranges
	firstDirty int
	dirtyBytes int64
}

// planClean decides whether mp is due and which ranges the pass may touch.
func planClean(tp *metadata.Topic, mp metadata.Partition, lso, nowMs int64) (cleanPlan, bool) {
	minLag := topicInt(tp, "min.compaction.lag.ms")
	maxLag := topicInt(tp, "max.compaction.lag.ms")
	ratio, err := strconv.ParseFloat(configOr(tp, "min.cleanable.dirty.ratio"), 64)
	if err != nil {
		ratio = 0.5
	}
	var pl cleanPlan
	pl.firstDirty = -1
	var clean int64
	for _, r := range mp.Objects {
		if r.LastOffset < mp.LogStartOffset {
			continue // trimmed next; never rewritten
		}
		if r.LastOffset >= lso || (minLag > 0 && r.MaxTimestamp > nowMs-minLag) {
			break
		}
		pl.ranges = append(pl.ranges, r)
		if r.Compacted && pl.firstDirty < 0 {
			clean += r.Bytes
			continue
		}
		if pl.firstDirty < 0 {
			pl.firstDirty = len(pl.ranges) - 1
		}
		pl.dirtyBytes += r.Bytes
	}
	if pl.firstDirty < 0 || pl.dirtyBytes == 0 && clean == 0 {
		return pl, false
	}
	due := float64(pl.dirtyBytes) >= ratio*float64(pl.dirtyBytes+clean)
	if maxLag > 0 && pl.ranges[pl.firstDirty].MaxTimestamp < nowMs-maxLag {
		due = true
	}
	return pl, due
}

func configOr(t *metadata.Topic, key string) string {
	s, _ := t.Config(key)
	return s
}

// compactPartition runs one pass over p if it is due; it returns p's dirty bytes.
func (t *Tier) compactPartition(rep metadata.ObjectCompactor, v *metadata.View, tp *metadata.Topic, p *partlog.Partition) (int64, error) {
	mp := tp.Partitions[p.Index()]
	if mp.Leader != t.d.NodeID || mp.LeaderEpoch != p.LeaderEpoch() || mp.Recovering {
		return 0, nil
	}
	nowMs := t.d.Now().UnixMilli()
	pl, due := planClean(tp, mp, p.LastStable(), nowMs)
	if !due {
		return pl.dirtyBytes, nil
	}
	ctx, cancel := context.WithTimeout(t.ctx, 10*time.Minute)
	defer cancel()
	end := pl.ranges[len(pl.ranges)-1].LastOffset
	ab := compact.NewAborted(p.Aborted(pl.ranges[0].FirstOffset, end))
	// 2. The offset map from the dirty ranges, whole ranges until it is full.
	m := compact.NewOffsetMap(t.cfg.CompactMapEntries)
	last := pl.firstDirty
	for i := pl.firstDirty; i < len(pl.ranges); i++ {
		if i > pl.firstDirty && m.Full() {
			break
		}
		batches, err := t.rangeBatches(ctx, v, p, pl.ranges[i])
		if err != nil {
			return pl.dirtyBytes, err
		}
		for _, b := range batches {
			if err := m.Add(b, ab, 0); err != nil {
				return pl.dirtyBytes, err
			}
		}
		last = i
	}
	// 3. Rewrite from the front to the map's end, group by group.
	cl := &compact.Cleaner{Map: m, Aborted: ab, NowMs: nowMs, DeleteRetentionMs: max(0, topicInt(tp, "delete.retention.ms"))}
	ranges := pl.ranges[:last+1]
	for len(ranges) > 0 {
		n, in := 1, ranges[0].Bytes
		aborted := len(ranges[0].Aborted)
		for n < len(ranges) && in+ranges[n].Bytes <= t.cfg.MaxObjectBytes && aborted+len(ranges[n].Aborted) <= metadata.MaxRangeAborted {
			in += ranges[n].Bytes
			aborted += len(ranges[n].Aborted)
			n++
		}
		if err := t.cleanGroup(ctx, rep, v, p, mp.LeaderEpoch, cl, ranges[:n]); err != nil {
			return pl.dirtyBytes, err
		}
		ranges = ranges[n:]
	}
	t.metrics.cleanedRecords.Add(float64(cl.Stats.RecordsRemoved + cl.Stats.MarkersRemoved))
	t.log.Info("partition compacted", "topic", p.Topic(), "partition", p.Index(), "through", end,
		"keys", m.Len(), "bytes_in", cl.Stats.BytesIn, "bytes_out", cl.Stats.BytesOut, "records_removed", cl.Stats.RecordsRemoved)
	return 0, nil
}

// cleanGroup rewrites consecutive ranges into one object and commits it in their place.
func (t *Tier) cleanGroup(ctx context.Context, rep metadata.ObjectCompactor, v *metadata.View, p *partlog.Partition, epoch int32, cl *compact.Cleaner, group []metadata.ObjectRange) error {
	var in [][]byte
	var inBytes int64
	for _, r := range group {
		bs, err := t.rangeBatches(ctx, v, p, r)
		if err != nil {
			return err
		}
		in = append(in, bs...)
		inBytes += r.Bytes
	}
	res, err := cl.Clean(in, true)
	if err != nil {
		return err
	}
	if !res.Changed && allCompacted(group) {
		return nil // already clean, nothing new to drop: no PUT
	}
	var buf bytes.Buffer
	w := objfmt.NewWriter(&buf, objfmt.Options{BlockSize: t.cfg.BlockSize, Sparse: true, SkipBatchCRC: true})
	id := p.ID()
	var outBytes int64
	for _, b := range res.Batches {
		fb, err := objfmt.SplitBatches(b)
		if err != nil || len(fb) != 1 {
			return fmt.Errorf("tier: compaction produced a bad batch: %v", err)
		}
		if err := w.Add(id, p.Index(), fb[0].BaseOffset, fb[0].LastOffset, fb[0].MaxTimestamp, b); err != nil {
			return fmt.Errorf("tier: writing a compacted object: %w", err)
		}
		outBytes += int64(len(b))
	}
	if _, err := w.Close(); err != nil {
		return fmt.Errorf("tier: writing a compacted object: %w", err)
	}
	rr := metadata.RangeReplace{LeaderEpoch: epoch, Range: metadata.PartitionRange{
		Topic: id, Partition: p.Index(), FirstOffset: group[0].FirstOffset, LastOffset: group[len(group)-1].LastOffset,
		MaxTimestamp: res.MaxTimestamp, Bytes: outBytes,
	}}
	for _, r := range group {
		rr.Replaces = append(rr.Replaces, r.Object)
		for _, a := range r.Aborted {
			if !res.DroppedMarkers[a.Last] {
				rr.Range.Aborted = append(rr.Range.Aborted, a)
			}
		}
	}
	obj, err := t.prepareObject(ctx)
	if err != nil {
		return err
	}
	defer t.abandon(obj.ID)
	size := int64(buf.Len())
	if err := t.objects.Put(ctx, obj.Key, bytes.NewReader(buf.Bytes()), size); err != nil {
		return fmt.Errorf("tier: put compacted %s: %w", obj.Key, err)
	}
	if err := objectstore.Verify(ctx, t.objects, obj.Key, size); err != nil {
		return fmt.Errorf("tier: compacted object %s not committed: %w", obj.Key, err)
	}
	if err := rep.ReplaceRanges(ctx, obj.ID, size, rr); err != nil {
		if errors.Is(err, metadata.ErrObjectRejected) {
			t.metrics.rejected.Inc()
		}
		return fmt.Errorf("tier: replacing %d ranges of %s/%d with %s: %w", len(group), p.Topic(), p.Index(), obj.Key, err)
	}
	t.metrics.cleanedObjects.Inc()
	t.metrics.cleanedBytes.Add(float64(inBytes))
	return nil
}

func allCompacted(rs []metadata.ObjectRange) bool {
	for _, r := range rs {
		if !r.Compacted {
			return false
		}
	}
	return true
}

// rangeBatches reads all batches of a manifest range of p (in offset order).
func (t *Tier) rangeBatches(ctx context.Context, v *metadata.View, p *partlog.Partition, r metadata.ObjectRange) ([][]byte, error) {
	o, ok := v.Object(r.Object)
	if !ok {
		return nil, fmt.Errorf("tier: object %d of %s/%d not in the view", r.Object, p.Topic(), p.Index())
	}
	ref := objread.ObjectRef{Key: o.Key, Size: o.Size, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset}
	var out [][]byte
	for off := r.FirstOffset; off <= r.LastOffset; {
		data, err := t.reader.Read(ctx, p.ID(), p.Index(), off, 8<<20, []objread.ObjectRef{ref})
		if err != nil {
			return nil, err
		}
		bs, err := objfmt.SplitBatches(data)
		if err != nil {
			return nil, err
		}
		next := off
		for _, b := range bs {
			if b.LastOffset >= off && b.BaseOffset <= r.LastOffset {
				out = append(out, b.Data)
			}
			next = max(next, b.LastOffset+1)
		}
		if next == off {
			return nil, fmt.Errorf("tier: reading %s at %d made no progress", o.Key, off)
		}
		off = next
	}
	return out, nil
}
