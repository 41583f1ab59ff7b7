package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// This file is the only place where errors become Kafka codes. A handler sets a code
// itself only for a condition it finds itself in the request or in the connection's
// protocol state (a version it does not serve, SaslAuthenticate before SaslHandshake, a
// denied ACL check, a duplicate in the request); an error value from anywhere else is
// translated here. Storage sentinels (wal, broker/partlog, broker/tier) carry their code
// (internal/kcode), so the front end needs neither those packages nor a list of their
// sentinels; metadata's, recbatch's and acl's, which the front end uses anyway, are named
// below.

// kafkaCode translates an internal error to a Kafka error code.
func kafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code // a code another broker answered, passed through
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
	case errors.Is(err, errFetchSessionNotFound):
		return kerr.FetchSessionIDNotFound.Code
	case errors.Is(err, errFetchSessionEpoch):
		return kerr.InvalidFetchSessionEpoch.Code
	case errors.Is(err, errFetchSessionTopicID):
		return kerr.FetchSessionTopicIDError.Code
	case errors.Is(err, metadata.ErrFenced):
		// This broker fenced: like a closed WAL or a partition not led here (their
		// sentinels carry NOT_LEADER_OR_FOLLOWER), the one answer every client takes as
		// "refresh the metadata and retry now".
		return kerr.NotLeaderForPartition.Code
	}
	code, coded := sentinelCode(err)
	if coded && code != kcode.KafkaStorageError {
		return code
	}
	switch {
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
	case coded:
		return code
	default:
		return kerr.UnknownServerError.Code
	}
}

// sentinelCode is the code the sentinels in err's tree carry (internal/kcode): the
// first one's, except that KAFKA_STORAGE_ERROR yields to any other, here and to
// metadata's sentinels in kafkaCode. A storage error says least: a WAL read that failed
// because the WAL closed is NOT_LEADER_OR_FOLLOWER (the client goes elsewhere rather than
// retrying a broker shutting down), one past the log's end OFFSET_OUT_OF_RANGE.
func sentinelCode(err error) (code int16, ok bool) {
	kcode.Walk(err, func(c int16) bool {
		code, ok = c, true
		return c == kcode.KafkaStorageError // look on for a code that says more
	})
	return code, ok
}

// scramCode is kafkaCode for the answers of Describe/AlterUserScramCredentials.
func scramCode(err error) int16 {
	switch {
	case errors.Is(err, metadata.ErrScramNotFound):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, metadata.ErrScramMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, metadata.ErrScramCredential):
		return kerr.UnacceptableCredential.Code
	case errors.Is(err, metadata.ErrScramDuplicate):
		return kerr.DuplicateResource.Code
	}
	return kafkaCode(err)
}

// saslStepCode is the code of a failed SASL exchange step (security/sasl's Session.Step):
// SASL_AUTHENTICATION_FAILED whatever the error, so the client learns nothing about which
// of user and password was wrong (the handler's message tells a malformed message apart).
func saslStepCode(error) int16 { return kerr.SaslAuthenticationFailed.Code }

// errMessage is the error text sent to clients in responses that carry one.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// unverified is the error a transactional batch is refused with when its partition's
// check (txnverify.go) did not say yes, err being the coordinator's answer or why it
// could not be asked; nil stays nil. As Kafka's ReplicaManager: a partition not in the
// transaction (the coordinator's TRANSACTION_ABORTABLE, or a refusal of this broker's
// right to ask) is INVALID_TXN_STATE; a coordinator that could not answer (not
// reachable, loading, moved, busy ending the transaction, or timed out) is
// NOT_ENOUGH_REPLICAS, which every producer retries without refreshing its metadata;
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH, which producers expect on Produce.
func unverified(err error) error {
	if err == nil {
		return nil
	}
	switch kafkaCode(err) {
	case kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code, kerr.ClusterAuthorizationFailed.Code:
		return fmt.Errorf("%w: partition was not added to the transaction: %w", kerr.InvalidTxnState, err)
	case kerr.ProducerFenced.Code:
		return fmt.Errorf("%w: %w", kerr.InvalidProducerEpoch, err)
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code, kerr.RequestTimedOut.Code,
		kerr.NotLeaderForPartition.Code, kerr.UnknownServerError.Code:
		return fmt.Errorf("%w: unable to verify the partition has been added to the transaction: %w", kerr.NotEnoughReplicas, err)
	}
	return err
}
