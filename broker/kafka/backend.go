package kafka

import (
	"context"
	"time"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// Backend is the rest of the broker as the handlers see it.
type Backend interface {
	// Writer returns the append path of partition index of t (t nil: unknown topic) for a
	// client of zone ("" unknown): the partition's own when led here, a proxy's when led
	// in another zone and the client is in this broker's (zone routing).
	// Errors: metadata.ErrUnknownTopic, partlog.ErrNotLeader (not led here, not ready, or
	// this broker may not ack: its lease ran out).
	Writer(t *metadata.Topic, index int32, zone string) (Writer, error)
	// Reader returns the read path of partition index of t for a client of zone, checking
	// the request's current leader epoch (-1: unchecked): the partition's own when led
	// here, a read replica's when led in another zone and the client is in this broker's.
	Reader(t *metadata.Topic, index int32, currentEpoch int32, zone string) (Reader, error)
	// Refresh applies the current metadata now (after a topic change), so the partitions
	// this broker leads exist before the answer is sent.
	Refresh()
	// Admit is the delay to impose on a produce request, or the error refusing it (the
	// WAL is full while uploads lag).
	Admit() (time.Duration, error)
	// CoordinatorPartition returns the __consumer_offsets partition of a group, creating
	// the topic when create is set.
	CoordinatorPartition(ctx context.Context, group string, create bool) (*metadata.Topic, int32, error)
}

// AppendResult is the outcome of one append: the base offset the batch got (or had, for
// an idempotent retry), the log start, and the LogAppendTime given to it (-1: none).
type AppendResult struct {
	Base, LogStart, AppendTime int64
	Err                        error
}

// Writer is a partition's append path.
type Writer interface {
	// Append makes batch (exactly one validated record batch, h its header) durable and
	// calls done exactly once, possibly on another goroutine, when it is acked or failed.
	// Appends of one caller reach the log in call order.
	Append(h *recbatch.Header, batch []byte, logAppendTime bool, done func(AppendResult))
	// Offsets returns the log start and the high watermark.
	Offsets() (logStart, hw int64)
	// SetLogStart raises the log start offset (DeleteRecords), in the metadata first.
	SetLogStart(ctx context.Context, offset int64) error
}

// Reader is a partition's read path.
type Reader interface {
	// Topic is the partition's topic name (metrics).
	Topic() string
	// Read returns whole record batches from the one holding offset on, up to about
	// maxBytes; when first it returns at least one batch even if larger (KIP-74).
	Read(ctx context.Context, offset int64, maxBytes int, first bool, currentEpoch int32) (data []byte, hw, logStart int64, err error)
	// LogInfo returns the log start, the high watermark and the leader epoch.
	LogInfo() (logStart, hw int64, leaderEpoch int32)
	// Wait registers c to be signalled (non-blocking send) when the high watermark
	// advances or the partition goes away; Unwait removes it.
	Wait(c chan struct{})
	Unwait(c chan struct{})
	// MaxTimestamp is the offset and timestamp of the record batch with the largest
	// timestamp.
	MaxTimestamp() (offset, ts int64)
	// OffsetForTime is the first offset whose batch timestamp is at or after ts.
	OffsetForTime(ctx context.Context, ts int64) (offset, batchTS int64, ok bool)
	// EndOffsetForEpoch answers OffsetForLeaderEpoch.
	EndOffsetForEpoch(epoch int32) (int32, int64)
	// ReadCommitted is Read for a read_committed consumer (isolation level 1): no batch
	// at or above the last stable offset, and the aborted transactions whose markers
	// lie at or above offset and that begin at or before the last offset returned.
	ReadCommitted(ctx context.Context, offset int64, maxBytes int, first bool, currentEpoch int32) (CommittedRead, error)
	// LastStable is the last stable offset: the first offset of the oldest open
	// transaction, else the high watermark.
	LastStable() int64
}

// CommittedRead is what ReadCommitted found; the offsets are set even with an error.
type CommittedRead struct {
	Data              []byte
	HW, LSO, LogStart int64
	Aborted           []metadata.AbortedTxn
}

// Optional capabilities of the metadata store (Deps.Meta), found by type assertion as
// the broker finds metadata.Recoverer and metadata.ObjectManifest.

// partitionMover is the part of metadata.Mover the reassignment APIs use: a store that
// can move a partition's leadership gracefully to another broker (the controller's
// client). A standalone broker's LocalStore cannot, and AlterPartitionReassignments
// says so.
type partitionMover interface {
	// MovePartition begins a graceful move to target (an active, not draining broker
	// other than the leader); the leader hands off and the target leads from the end
	// offset on. On return this broker's View shows the move.
	MovePartition(ctx context.Context, id metadata.TopicID, partition int32, target int32) error
	// CancelMove abandons a pending move (no move: nothing happens); the leader stays.
	CancelMove(ctx context.Context, id metadata.TopicID, partition int32) error
}

var _ partitionMover = metadata.Mover(nil)
