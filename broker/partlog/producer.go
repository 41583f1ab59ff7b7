package partlog

import (
	"cmp"
	"fmt"
	"math"
	"slices"

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
	if s == nil || len(s.entries) == 0 {
		// An unknown producer may start anywhere, as in Kafka since KIP-360: its state
		// may be gone with data that left the WAL for object storage (or retention),
		// and refusing would break a live producer.
		return nil
	}
	switch {
	case h.ProducerEpoch < s.epoch:
		return fmt.Errorf("%w: epoch %d < %d", ErrProducerFenced, h.ProducerEpoch, s.epoch)
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
// snapshot: the window comes out the same.
func (p *Partition) ProducerSnapshot(through int64) *metadata.ProducerSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	type cand struct {
		id   int64
		s    *producerState
		n    int   // entries at or below through
		last int64 // offset of the last of them
	}
	var cands []cand
	for id, s := range p.producers {
		n := 0
		for n < len(s.entries) && s.entries[n].offset <= through {
			n++
		}
		if n > 0 {
			cands = append(cands, cand{id, s, n, s.entries[n-1].offset})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	if len(cands) > metadata.MaxSnapshotProducers {
		// Batch offsets are unique in a partition: the cut is deterministic.
		slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(b.last, a.last) })
		cands = cands[:metadata.MaxSnapshotProducers]
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.id, b.id) })
	snap := &metadata.ProducerSnapshot{Offset: through + 1, Producers: make([]metadata.ProducerState, len(cands))}
	for i, c := range cands {
		es := c.s.entries[:c.n]
		ps := metadata.ProducerState{ID: c.id, Epoch: es[len(es)-1].epoch, Batches: make([][3]int64, len(es))}
		for j, e := range es {
			ps.Batches[j] = [3]int64{int64(e.first), int64(e.last), e.offset}
		}
		snap.Producers[i] = ps
	}
	return snap
}

// SnapshotProducers is the number of producers ProducerSnapshot(through) would hold now;
// the uploader budgets a commit's weight with it before taking the snapshot.
func (p *Partition) SnapshotProducers(through int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.producers {
		if len(s.entries) > 0 && s.entries[0].offset <= through {
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
		if cur := p.producers[sp.ID]; cur != nil {
			for _, e := range cur.entries {
				if e.offset >= snap.Offset {
					s.add(e)
				}
			}
		}
		if len(s.entries) > 0 {
			p.setProducer(sp.ID, s)
		}
	}
}
