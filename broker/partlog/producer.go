package partlog

import (
	"fmt"
	"math"

	"github.com/weir-io/weir/internal/recbatch"
)

// Idempotent producer state of one partition. Like Kafka, the last five batches of each
// producer are remembered so that any retry of an in-flight batch (clients allow up to five
// in flight) is recognised and answered with its original offset.

const producerWindow = 5

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
	if h.ProducerEpoch != s.epoch {
		s.entries = s.entries[:0]
		s.epoch = h.ProducerEpoch
	}
	if len(s.entries) == producerWindow {
		copy(s.entries, s.entries[1:])
		s.entries = s.entries[:producerWindow-1]
	}
	s.entries = append(s.entries, seqEntry{epoch: h.ProducerEpoch, first: h.BaseSequence, last: h.BaseSequence + h.LastOffsetDelta, offset: offset})
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
