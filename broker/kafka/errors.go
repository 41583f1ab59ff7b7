package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/wal"
)

// kafkaCode translates an internal error to a Kafka error code. This is the only place
// where package errors become protocol codes.
func kafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, recbatch.ErrCRC):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recbatch.ErrMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, recbatch.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, recbatch.ErrTooShort), errors.Is(err, recbatch.ErrLength):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recbatch.ErrInvalid), errors.Is(err, recbatch.ErrMultiple):
		return kerr.InvalidRecord.Code
	case errors.Is(err, recbatch.ErrTransactional):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, partlog.ErrOutOfOrderSeq):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, partlog.ErrProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, partlog.ErrNotLeader), errors.Is(err, wal.ErrClosed), errors.Is(err, metadata.ErrFenced):
		// Not served here (any more): not led, loading, moving away, lease lapsed; this
		// broker shutting down or restarting on a new WAL (a closed WAL), or fenced. The
		// one answer every client takes as "refresh the metadata and retry now".
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, partlog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, partlog.ErrFencedEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, partlog.ErrUnknownEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, metadata.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, metadata.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, metadata.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, metadata.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, metadata.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, metadata.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, metadata.ErrInvalidOffset):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, metadata.ErrMoveRefused):
		// A reassignment the controller refused for a reason the handler's View did not
		// show yet (the message says which): the assignment cannot be applied as asked.
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, metadata.ErrACLRejected), errors.Is(err, acl.ErrInvalid):
		return kerr.InvalidRequest.Code
	case errors.Is(err, metadata.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, wal.ErrNoSpace), errors.Is(err, wal.ErrIO), errors.Is(err, wal.ErrFailed),
		errors.Is(err, partlog.ErrStorage), errors.Is(err, tier.ErrWALFull):
		return kerr.KafkaStorageError.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// errMessage is the error text sent to clients in responses that carry one.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
