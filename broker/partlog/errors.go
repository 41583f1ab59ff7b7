package partlog

import (
	"errors"
	"fmt"

	"github.com/weir-io/weir/internal/kcode"
)

// Sentinel errors of the partition log. Those a client can meet carry the Kafka code it
// is answered with (internal/kcode), which the front end's errors.go reads back.
var (
	ErrNotLeader        = kcode.New("partlog: not the leader of this partition", kcode.NotLeaderOrFollower)
	ErrOffsetOutOfRange = kcode.New("partlog: offset out of range", kcode.OffsetOutOfRange)
	// ErrReplicaBehind: a read replica was asked for an offset past its high watermark,
	// which trails the leader's by the follow's latency: a consumer redirected from the
	// leader at the leader's high watermark lands there. A fetch waits it out (its long
	// poll) and answers OFFSET_OUT_OF_RANGE only if the replica is still behind at the
	// end, as a Kafka follower answers only offsets past its log end: answered at once,
	// the client's KIP-392 check with the leader costs it hundreds of ms.
	ErrReplicaBehind  = kcode.NewWaitable("partlog: read replica behind the offset asked", kcode.OffsetOutOfRange)
	ErrFencedEpoch    = kcode.New("partlog: fenced leader epoch", kcode.FencedLeaderEpoch)
	ErrUnknownEpoch   = kcode.New("partlog: unknown leader epoch", kcode.UnknownLeaderEpoch)
	ErrOutOfOrderSeq  = kcode.New("partlog: out of order sequence number", kcode.OutOfOrderSequenceNumber)
	ErrProducerFenced = kcode.New("partlog: producer epoch is older than the current one", kcode.InvalidProducerEpoch)
	// ErrInvalidTxnState: an idempotent producer wrote a non-transactional batch while
	// its transaction in the partition is open.
	ErrInvalidTxnState = kcode.New("partlog: batch does not fit the producer's transaction state", kcode.InvalidTxnState)
	// ErrInvalidMarker: a control batch to append is not a transaction marker.
	ErrInvalidMarker = kcode.New("partlog: not a transaction marker", kcode.InvalidRecord)
	// ErrControlLink: a control batch is never linked through a zone proxy: no client
	// produces one (the front end refuses them too), and a partition's markers are
	// written by its leader only.
	ErrControlLink = kcode.New("partlog: a control batch is never linked through a zone proxy", kcode.InvalidRecord)
	// ErrLoadIncomplete: loading a partition did not find every offset its chain's WALs
	// must hold up to the end recorded in the chain; it stays unavailable and is loaded
	// again.
	ErrLoadIncomplete = errors.New("partlog: partition load incomplete")
	// ErrStorage: a read from a WAL or from object storage failed (KAFKA_STORAGE_ERROR;
	// the consumer retries).
	ErrStorage = kcode.New("partlog: storage read failed", kcode.KafkaStorageError)
)

// DuplicateError is returned by Prepare for a retried idempotent batch; Offset is where
// the original went.
type DuplicateError struct{ Offset int64 }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("partlog: duplicate batch, originally at offset %d", e.Offset)
}
