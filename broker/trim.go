package broker

import (
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// WAL trimming. A segment of this broker's WAL may be removed once every batch in it that
// anyone still needs is in object storage. Needed are the batches of
//   - partitions led here: from the first one not uploaded (partition.walNeed);
//   - partitions that moved away (or were led here before a restart) while part of their
//     range in this WAL was not uploaded yet: the new leader reads those batches from this
//     WAL until it has uploaded them. A pin keeps the position of the first such batch
//     until the partition's manifest reaches the end of this broker's link (or its log
//     start passes it, or the topic is deleted).
// While a partition is still loading its index is incomplete, so nothing is trimmed.

type partKey struct {
	id    metadata.TopicID
	index int32
}

// walPin keeps this WAL from pos on until the partition's objects reach end.
type walPin struct {
	pos wal.Pos
	end int64
}

// pin records that the WAL is needed from pos on for the partition's offsets below end
// (the lowest position wins).
func (b *Broker) pin(k partKey, pos wal.Pos, end int64) {
	b.pinMu.Lock()
	defer b.pinMu.Unlock()
	if old, ok := b.pins[k]; ok && old.pos <= pos {
		if end > old.end {
			old.end = end
			b.pins[k] = old
		}
		return
	}
	b.pins[k] = walPin{pos: pos, end: max(end, b.pins[k].end)}
}

// pinOnDrop pins a partition that stops being led here (called with p.mu held).
func (b *Broker) pinOnDropLocked(p *partition) {
	if !b.tiered() {
		return
	}
	up := p.tier.uploaded
	for _, bl := range p.batches {
		if bl.last >= up && bl.synced && bl.src == logReader(b.wal) {
			b.pin(partKey{p.id, p.index}, bl.pos, p.next)
			return
		}
	}
}

// released reports whether the view shows a pin's data safe: uploaded, below the log
// start, or deleted.
func released(v *metadata.View, k partKey, pn walPin) bool {
	t := v.TopicByID(k.id)
	if t == nil || int(k.index) >= len(t.Partitions) {
		return true
	}
	mp := t.Partitions[k.index]
	return mp.UploadedThrough() >= pn.end || mp.LogStartOffset >= pn.end
}

// trimWAL removes the WAL segments nobody needs any more.
func (b *Broker) trimWAL() {
	if !b.tiered() {
		return
	}
	at := b.wal.End()
	parts := b.ledPartitions()
	for _, p := range parts {
		p.mu.Lock()
		loading := p.state == partLoading
		p.mu.Unlock()
		if loading {
			return
		}
		if pos, ok := p.walNeed(b.wal); ok && pos < at {
			at = pos
		}
	}
	v := b.meta.View()
	b.pinMu.Lock()
	for k, pn := range b.pins {
		if released(v, k, pn) {
			delete(b.pins, k)
		} else if pn.pos < at {
			at = pn.pos
		}
	}
	b.pinMu.Unlock()
	cut := b.wal.TrimPoint(at)
	if cut <= b.wal.Start() {
		return
	}
	// Index entries of the segments going go first, so a read that raced with the trim
	// finds objects on its second try.
	for _, p := range parts {
		p.mu.Lock()
		p.dropUploadedLocked(cut, b.wal)
		p.mu.Unlock()
	}
	removed, err := b.wal.TrimBefore(at)
	if err != nil {
		b.log.Warn("trimming the WAL failed", "err", err)
	}
	if len(removed) > 0 {
		b.metrics.tier.trimmed.Add(float64(len(removed)))
		b.log.Debug("WAL trimmed", "segments", len(removed), "before", at)
	}
}

// pinReplayed pins a batch found at replay for a partition this broker does not lead,
// when its offsets are still needed by the partition's leader.
func (b *Broker) pinReplayed(v *metadata.View, id metadata.TopicID, idx int32, h *batchHeader, pos wal.Pos) {
	t := v.TopicByID(id)
	if t == nil || int(idx) >= len(t.Partitions) {
		return
	}
	mp := t.Partitions[idx]
	last := h.BaseOffset + int64(h.LastOffsetDelta)
	if last < mp.UploadedThrough() || last < mp.LogStartOffset {
		return
	}
	for _, r := range chainOf(mp) {
		if r.broker == b.cfg.NodeID && r.holds(h.BaseOffset) {
			end := r.end
			if end < 0 {
				end = 1<<63 - 1
			}
			b.pin(partKey{id, idx}, pos, end)
			return
		}
	}
}
