package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/metadata"
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
	case errors.Is(err, errBatchCRC):
		return kerr.CorruptMessage.Code
	case errors.Is(err, errBatchMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, errMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, errBatchTooShort), errors.Is(err, errBatchLength):
		return kerr.CorruptMessage.Code
	case errors.Is(err, errBatchInvalid), errors.Is(err, errBatchMultiple):
		return kerr.InvalidRecord.Code
	case errors.Is(err, errBatchTxn):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, errOutOfOrderSeq):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, errProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, errNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, errOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, errFencedEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, errUnknownEpoch):
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
	case errors.Is(err, metadata.ErrNotController):
		return kerr.NotController.Code
	case errors.Is(err, wal.ErrNoSpace), errors.Is(err, wal.ErrFailed), errors.Is(err, wal.ErrClosed),
		errors.Is(err, errStorage), errors.Is(err, errWALFull):
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

func errorsIsExists(err error) bool { return errors.Is(err, metadata.ErrTopicExists) }
