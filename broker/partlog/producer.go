package partlog

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// Idempotent producer state of one partition. Like Kafka, the last five batches of each
// producer are remembered so that any retry of an in-flight batch (clients allow up to five
// in flight) is recognised and answered with its original offset.
//
// The state is rebuilt from the batches a load finds in WALs, but the uploader moves
// batches to objects and the WAL is trimmed behind it, so the state of what left the
// WALs travels with the manifest instead: every object range committed carries a
// snapshot of the state as of its end (ProducerSnapshot), and a load starts from the
// snapshot of the manifest's end and applies the WAL batches after it
// (restoreProducersLocked). Like Kafka's producer state snapshots, without its expiry
// by time: the snapshot keeps the metadata.MaxSnapshotProducers most recent producers.

const producerWindow = metadata.ProducerWindow

type seqEntry struct {
	epoch       int16
	first, last int32
	offset      int64
}

type producerState struct {
	epoch   int16
	entries []seqEntry // oldest first, at most producerWindow
}

func (s *producerState) lastSeq() int32 { return s.entries[len(s.entries)-1].last }

// checkSequence decides what to do with an idempotent batch: nil (append),
// *DuplicateError, ErrOutOfOrderSeq, or ErrProducerFenced. It mirrors Kafka's
// ProducerAppendInfo.
func checkSequence(s *producerState, h *recbatch.Header) error {
	if s == nil {
		// An unknown producer may start anywhere, as in Kafka since KIP-360: its state
		// may be gone with data that left the WAL for object storage (or retention),
		// and refusing would break a live producer.
		return nil
	}
	if h.ProducerEpoch < s.epoch {
		return fmt.Errorf("%w: epoch %d < %d", ErrProducerFenced, h.ProducerEpoch, s.epoch)
	}
	if len(s.entries) == 0 {
		// Only an epoch is known (a transaction marker's): any sequence starts it.
		return nil
	}
	switch {
	case h.ProducerEpoch > s.epoch:
		if h.BaseSequence != 0 {
			return fmt.Errorf("%w: new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSeq, h.ProducerEpoch, h.BaseSequence)
		}
		return nil
	}
	last := h.BaseSequence + h.LastOffsetDelta
	for _, e := range s.entries {
		if e.epoch == h.ProducerEpoch && e.first == h.BaseSequence && e.last == last {
			return &DuplicateError{Offset: e.offset}
		}
	}
	if h.BaseSequence != nextSeq(s.lastSeq()) {
		return fmt.Errorf("%w: expected %d, got %d", ErrOutOfOrderSeq, nextSeq(s.lastSeq()), h.BaseSequence)
	}
	return nil
}

// nextSeq wraps at MaxInt32 as Kafka sequences do.
func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

func (s *producerState) record(h *recbatch.Header, offset int64) {
	s.add(seqEntry{epoch: h.ProducerEpoch, first: h.BaseSequence, last: h.BaseSequence + h.LastOffsetDelta, offset: offset})
}

// add appends a batch to the window: a new epoch starts it afresh, a full one drops its
// oldest.
func (s *producerState) add(e seqEntry) {
	if e.epoch != s.epoch {
		s.entries = s.entries[:0]
		s.epoch = e.epoch
	}
	if len(s.entries) == producerWindow {
		copy(s.entries, s.entries[1:])
		s.entries = s.entries[:producerWindow-1]
	}
	s.entries = append(s.entries, e)
}

// forget drops entries at or above offset (a failed WAL write); it reports whether the
// state is now empty.
func (s *producerState) forget(offset int64) bool {
	n := len(s.entries)
	for n > 0 && s.entries[n-1].offset >= offset {
		n--
	}
	s.entries = s.entries[:n]
	if n > 0 {
		s.epoch = s.entries[n-1].epoch
	}
	return n == 0
}

// ProducerSnapshot returns the producer state as of through, the last offset of an object
// range being committed: every batch at or below it counted, none above. Nil when no
// producer has state there.
//
// The window of a producer may have lost its batches at or below through to later ones
// (five newer batches, or a new epoch); those later batches are above through, so they
// stay in a WAL until a later range is committed, and a load applies them after the
// snapshot: the window comes out the same. A producer whose transaction is open as of
// through is kept even then (with no batches), and before the others when there are
// more than metadata.MaxSnapshotProducers: a load must know where its transaction began.
func (p *Partition) ProducerSnapshot(through int64) *metadata.ProducerSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	type cand struct {
		id   int64
		s    *producerState // nil: only its transaction is known
		n    int            // entries at or below through
		last int64          // offset of the last of them
		txn  int64          // first offset of its open transaction, or -1
	}
	txns := p.txnsAtLocked(through + 1)
	var cands []cand
	for id, s := range p.producers {
		n := 0
		for n < len(s.entries) && s.entries[n].offset <= through {
			n++
		}
		c := cand{id: id, s: s, n: n, last: -1, txn: -1}
		if n > 0 {
			c.last = s.entries[n-1].offset
		}
		if first, ok := txns[id]; ok {
			c.txn = first
		}
		if n > 0 || c.txn >= 0 {
			cands = append(cands, c)
		}
	}
	for id, first := range txns {
		if p.producers[id] == nil {
			cands = append(cands, cand{id: id, last: -1, txn: first})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	if len(cands) > metadata.MaxSnapshotProducers {
		// Batch offsets are unique in a partition: the cut is deterministic.
		open := func(c cand) int {
			if c.txn >= 0 {
				return 0
			}
			return 1
		}
		slices.SortFunc(cands, func(a, b cand) int {
			if c := cmp.Compare(open(a), open(b)); c != 0 {
				return c
			}
			if c := cmp.Compare(b.last, a.last); c != 0 {
				return c
			}
			return cmp.Compare(a.id, b.id)
		})
		cands = cands[:metadata.MaxSnapshotProducers]
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.id, b.id) })
	snap := &metadata.ProducerSnapshot{Offset: through + 1, Producers: make([]metadata.ProducerState, len(cands))}
	for i, c := range cands {
		ps := metadata.ProducerState{ID: c.id, Batches: make([][3]int64, c.n)}
		switch {
		case c.n > 0:
			ps.Epoch = c.s.entries[c.n-1].epoch
		case c.s != nil && len(c.s.entries) > 0:
			ps.Epoch = c.s.entries[0].epoch // the oldest known, above through
		case c.s != nil:
			ps.Epoch = c.s.epoch
		}
		ps.Epoch = max(ps.Epoch, 0)
		for j, e := range c.s.windowTo(c.n) {
			ps.Batches[j] = [3]int64{int64(e.first), int64(e.last), e.offset}
		}
		if c.txn >= 0 {
			first := c.txn
			ps.TxnFirst = &first
		}
		snap.Producers[i] = ps
	}
	return snap
}

// windowTo is the first n entries of s's window (none of a nil s).
func (s *producerState) windowTo(n int) []seqEntry {
	if s == nil {
		return nil
	}
	return s.entries[:n]
}

// SnapshotProducers bounds the number of producers ProducerSnapshot(through) would hold
// now or as of any lower offset the range could end at; the uploader budgets a commit's
// weight with it before taking the snapshot. Producers with transactions are bounded by
// those open now and the markers not uploaded yet (a transaction open at an offset in
// the range is either still open or ended by one of them).
func (p *Partition) SnapshotProducers(through int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.txns)
	for _, s := range p.producers {
		if len(s.entries) > 0 && s.entries[0].offset <= through {
			n++
		}
	}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= p.tier.uploaded })
	for _, b := range p.batches[i:] {
		if b.kind.marker() {
			n++
		}
	}
	return min(n, metadata.MaxSnapshotProducers)
}

// restoreProducersLocked puts the snapshot of the manifest's end (p.tier.snap) under the
// state FinishLoad rebuilt from the WAL batches it collected from need on. The snapshot
// is used only when it reaches need: the batches between an older snapshot and need may
// be in no WAL any more, and a stale window would refuse a live producer's next
// sequence. Without a usable snapshot the state is the WALs' alone, as before snapshots.
//
// A producer in the snapshot gets the snapshot's batches followed by its rebuilt batches
// from the snapshot's offset on: the rebuilt window holds all of those unless five newer
// ones or a new epoch pushed them out, and then the snapshot's are pushed out too. A
// producer only the WALs know keeps its rebuilt state. Applying the same snapshot again
// (a load retried) changes nothing.
func (p *Partition) restoreProducersLocked(need int64) {
	snap := p.tier.snap
	if snap == nil || snap.Offset < need {
		return
	}
	for _, sp := range snap.Producers {
		s := &producerState{epoch: sp.Epoch}
		for _, b := range sp.Batches {
			s.entries = append(s.entries, seqEntry{epoch: sp.Epoch, first: int32(b[0]), last: int32(b[1]), offset: b[2]})
		}
		if len(s.entries) > producerWindow {
			s.entries = s.entries[len(s.entries)-producerWindow:]
		}
		cur := p.producers[sp.ID]
		if cur != nil {
			if cur.epoch > s.epoch {
				// A marker of a newer epoch after the snapshot started the window
				// afresh (its own batches, if any, follow).
				s.epoch, s.entries = cur.epoch, s.entries[:0]
			}
			for _, e := range cur.entries {
				if e.offset >= snap.Offset {
					s.add(e)
				}
			}
		}
		if len(s.entries) > 0 || cur != nil || sp.TxnFirst != nil {
			p.setProducer(sp.ID, s)
		}
	}
	p.restoreTxnsLocked(snap)
}
