package tier

import (
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// WAL trimming. A segment of this broker's WAL may be removed once every batch in it that
// anyone still needs is in object storage. Needed are the batches of
//   - partitions led here: from the first one not uploaded (Partition.WALNeed);
//   - partitions that moved away (or were led here before a restart) while part of their
//     range in this WAL was not uploaded yet: the new leader reads those batches from this
//     WAL until it has uploaded them. A pin keeps the position of the first such batch
//     until the partition's manifest reaches the end of this broker's range (or its log
//     start passes it, or the topic is deleted).
//   - batches written here as a zone-routing proxy (proxypins.go), until their leader
//     uploaded them.
// While a partition is still loading its index is incomplete, so nothing is trimmed.

// walPin keeps this WAL from pos on until the partition's objects reach end. end is the
// first offset the pin does not keep (exclusive): the partition's next offset when it
// moved away, or the end of this broker's log range. It is released when the manifest's
// UploadedThrough (its last offset + 1) or the log start reaches end, so a single-record
// last batch at end-1 stays pinned until it is uploaded (trim_test.go).
type walPin struct {
	pos wal.Pos
	end int64
}

// Pin records that the WAL is needed from pos on for the partition's offsets below end
// (the lowest position wins).
func (t *Tier) Pin(k partlog.Key, pos wal.Pos, end int64) {
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	if old, ok := t.pins[k]; ok && old.pos <= pos {
		if end > old.end {
			old.end = end
			t.pins[k] = old
		}
		return
	}
	t.pins[k] = walPin{pos: pos, end: max(end, t.pins[k].end)}
}

// released reports whether the view shows a pin's data safe: uploaded, below the log
// start, or deleted.
func released(v *metadata.View, k partlog.Key, pn walPin) bool {
	t := v.TopicByID(k.ID)
	if t == nil || int(k.Index) >= len(t.Partitions) {
		return true
	}
	mp := t.Partitions[k.Index]
	return mp.UploadedThrough() >= pn.end || mp.LogStartOffset >= pn.end
}

// pinnedLocked lowers the trim point at to the lowest position a pin keeps, forgetting the
// pins the view releases. t.pinMu is held.
func (t *Tier) pinnedLocked(v *metadata.View, at wal.Pos) wal.Pos {
	for k, pn := range t.pins {
		if released(v, k, pn) {
			delete(t.pins, k)
		} else if pn.pos < at {
			at = pn.pos
		}
	}
	return at
}

// Trim removes the WAL segments nobody needs any more.
func (t *Tier) Trim() {
	w := t.d.WAL
	at := w.End()
	parts := t.d.Led()
	for _, p := range parts {
		if p.State() == partlog.Loading {
			return
		}
		if pos, ok := p.WALNeed(w); ok && pos < at {
			at = pos
		}
	}
	v := t.d.Meta.View()
	t.pinMu.Lock()
	at = t.pinnedLocked(v, at)
	if pos, ok := t.proxyTrimPointLocked(v); ok && pos < at {
		at = pos
	}
	t.pinMu.Unlock()
	cut := w.TrimPoint(at)
	if cut <= w.Start() {
		return
	}
	// Index entries of the segments going go first, so a read that raced with the trim
	// finds objects on its second try.
	for _, p := range parts {
		p.DropUploaded(cut, w)
	}
	removed, err := w.TrimBefore(at)
	if err != nil {
		t.log.Warn("trimming the WAL failed", "err", err)
	}
	if len(removed) > 0 {
		t.metrics.trimmed.Add(float64(len(removed)))
		t.log.Debug("WAL trimmed", "segments", len(removed), "before", at)
	}
}

// PinReplayed pins a batch found at replay for a partition this broker does not lead,
// when its offsets are still needed by the partition's leader.
func (t *Tier) PinReplayed(v *metadata.View, id metadata.TopicID, idx int32, h *recbatch.Header, pos wal.Pos) {
	tp := v.TopicByID(id)
	if tp == nil || int(idx) >= len(tp.Partitions) {
		return
	}
	mp := tp.Partitions[idx]
	last := h.LastOffset()
	if last < mp.UploadedThrough() || last < mp.LogStartOffset {
		return
	}
	for _, r := range partlog.ChainOf(mp) {
		if r.Broker == t.d.NodeID && r.Holds(h.BaseOffset) {
			end := r.End
			if end < 0 {
				end = 1<<63 - 1
			}
			t.Pin(partlog.Key{ID: id, Index: idx}, pos, end)
			return
		}
	}
}
