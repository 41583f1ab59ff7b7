package partlog

import (
	"errors"
	"fmt"
)

// Sentinel errors of the partition log; the Kafka front end maps them to error codes.
var (
	ErrNotLeader        = errors.New("partlog: not the leader of this partition")
	ErrOffsetOutOfRange = errors.New("partlog: offset out of range")
	ErrFencedEpoch      = errors.New("partlog: fenced leader epoch")
	ErrUnknownEpoch     = errors.New("partlog: unknown leader epoch")
	ErrOutOfOrderSeq    = errors.New("partlog: out of order sequence number")
	ErrProducerFenced   = errors.New("partlog: producer epoch is older than the current one")
	// ErrLoadIncomplete: loading a partition did not find every offset its chain's WALs
	// must hold up to the end recorded in the chain; it stays unavailable and is loaded
	// again.
	ErrLoadIncomplete = errors.New("partlog: partition load incomplete")
	// ErrStorage: a read from a WAL or from object storage failed (KAFKA_STORAGE_ERROR;
	// the consumer retries).
	ErrStorage = errors.New("partlog: storage read failed")
)

// DuplicateError is returned by Prepare for a retried idempotent batch; Offset is where
// the original went.
type DuplicateError struct{ Offset int64 }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("partlog: duplicate batch, originally at offset %d", e.Offset)
}
