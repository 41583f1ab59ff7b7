package compact

import (
	"fmt"

	"github.com/weir-io/weir/internal/recbatch"
)

// Cleaner rewrites the batches of one partition in offset order, from its log start,
// with one offset map: one pass. It keeps per-producer transaction state across the
// ranges of the pass, so a marker knows whether data of its transaction was kept.
type Cleaner struct {
	Map     *OffsetMap
	Aborted *Aborted
	// NowMs is the clean's time; DeleteRetentionMs the topic's delete.retention.ms.
	NowMs, DeleteRetentionMs int64
	// MaxDecompressed bounds one batch's decompressed records.
	MaxDecompressed int

	kept  map[int64]bool // producer → its current transaction has kept data
	Stats Stats
}

// Stats count what a cleaner did.
type Stats struct {
	BytesIn, BytesOut  int64
	RecordsRemoved     int64
	BatchesRemoved     int64
	TombstonesRemoved  int64
	MarkersRemoved     int64
	AbortedBatchesGone int64
}

// Result is one rewritten run of batches.
type Result struct {
	Batches [][]byte
	// Changed: some batch was dropped or rewritten (else the run is byte for byte the
	// input, and a range already compacted need not be written again).
	Changed bool
	// DroppedMarkers are the offsets of the transaction markers removed (their
	// aborted-transaction entries go with them).
	DroppedMarkers map[int64]bool
	// MaxTimestamp is the largest maxTimestamp of the kept batches.
	MaxTimestamp int64
}

// Clean rewrites batches (one range of the pass, in offset order). keepLast keeps the
// run's last batch, empty if need be, so the range's last offset stays stored.
func (c *Cleaner) Clean(batches [][]byte, keepLast bool) (Result, error) {
	if c.kept == nil {
		c.kept = map[int64]bool{}
	}
	res := Result{DroppedMarkers: map[int64]bool{}}
	for i, b := range batches {
		last := keepLast && i == len(batches)-1
		out, changed, err := c.batch(b, last, &res)
		if err != nil {
			return Result{}, err
		}
		res.Changed = res.Changed || changed
		c.Stats.BytesIn += int64(len(b))
		if out == nil {
			c.Stats.BatchesRemoved++
			continue
		}
		c.Stats.BytesOut += int64(len(out))
		h, _ := recbatch.Parse(out)
		res.MaxTimestamp = max(res.MaxTimestamp, h.MaxTimestamp)
		res.Batches = append(res.Batches, out)
	}
	return res, nil
}

// horizonPassed: the batch has a delete horizon and it is behind the clean's time.
func (c *Cleaner) horizonPassed(h *recbatch.Header) bool {
	hz, ok := h.DeleteHorizon()
	return ok && c.NowMs >= hz
}

// batch returns the batch to keep (nil: none) and whether it differs from b.
func (c *Cleaner) batch(b []byte, last bool, res *Result) ([]byte, bool, error) {
	h, err := recbatch.Frame(b)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrCompact, err)
	}
	b = b[:h.Size()]
	newHorizon := c.NowMs + c.DeleteRetentionMs
	if h.Control() {
		// A marker ends its producer's transaction: removable once nothing of the
		// transaction is left before it and its delete horizon passed.
		kept := c.kept[h.ProducerID]
		delete(c.kept, h.ProducerID)
		if !kept && c.horizonPassed(&h) && !last {
			res.DroppedMarkers[h.BaseOffset] = true
			c.Stats.MarkersRemoved++
			return nil, true, nil
		}
		if _, ok := h.DeleteHorizon(); !ok && !kept {
			return c.rebuild(h, b, newHorizon, nil, true)
		}
		return b, false, nil
	}
	if h.Transactional() && c.Aborted.Has(h.ProducerID, h.BaseOffset) {
		c.Stats.AbortedBatchesGone++
		c.Stats.RecordsRemoved += int64(h.RecordCount)
		if last {
			out, err := recbatch.Rebuild(h, nil, -1)
			return out, true, err
		}
		return nil, true, nil
	}
	_, recs, err := recbatch.ReadRecords(b, c.MaxDecompressed)
	if err != nil {
		return nil, false, fmt.Errorf("%w: batch at %d: %w", ErrCompact, h.BaseOffset, err)
	}
	keep := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		if r.Key != nil {
			if latest, ok := c.Map.Latest(r.Key); ok && r.Offset < latest {
				c.Stats.RecordsRemoved++
				continue
			}
		}
		if r.Value == nil && r.Key != nil {
			if c.horizonPassed(&h) {
				c.Stats.RecordsRemoved++
				c.Stats.TombstonesRemoved++
				continue
			}
			tombstones = true
		}
		keep = append(keep, r)
	}
	if h.Transactional() && len(keep) > 0 {
		c.kept[h.ProducerID] = true
	}
	_, hasHorizon := h.DeleteHorizon()
	switch {
	case len(keep) == len(recs) && (!tombstones || hasHorizon):
		return b, false, nil
	case len(keep) == 0 && !last:
		return nil, true, nil
	}
	horizon := int64(-1)
	if tombstones && !hasHorizon {
		horizon = newHorizon
	}
	return c.rebuild(h, b, horizon, keep, len(keep) == len(recs))
}

// rebuild encodes the batch again with recs (all of them when all is set: only the
// horizon changes).
func (c *Cleaner) rebuild(h recbatch.Header, b []byte, horizon int64, recs []recbatch.Record, all bool) ([]byte, bool, error) {
	if all && recs == nil {
		var err error
		if _, recs, err = recbatch.ReadRecords(b, c.MaxDecompressed); err != nil {
			return nil, false, fmt.Errorf("%w: batch at %d: %w", ErrCompact, h.BaseOffset, err)
		}
	}
	out, err := recbatch.Rebuild(h, recs, horizon)
	if err != nil {
		return nil, false, fmt.Errorf("%w: batch at %d: %w", ErrCompact, h.BaseOffset, err)
	}
	return out, true, nil
}
