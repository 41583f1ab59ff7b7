package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/kcode"
)

// Sentinel errors of the coordinator. Each carries the Kafka code the client is answered
// with (internal/kcode), which the front end's errors.go reads back; an operation's error
// wraps one of them first, so it is the first code found.
//
// PRODUCER_FENCED is what Kafka's coordinator answers since KIP-588; the front end answers
// INVALID_PRODUCER_EPOCH instead to the request versions that predate it (InitProducerId
// v0-3, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v0-1), as Kafka does. Likewise
// TRANSACTION_ABORTABLE (ErrNotInTransaction) becomes INVALID_TXN_STATE for a Produce
// older than v11.
var (
	// ErrConcurrentTransactions: another change of the transactional ID is being made
	// durable, or its transaction is being committed or aborted; the client retries.
	ErrConcurrentTransactions = kcode.New("txn: another operation on the transactional id is in progress", kcode.ConcurrentTransactions)
	// ErrProducerFenced: the request's producer epoch is not the transactional ID's
	// current one (a newer producer initialized it: this one is a zombie).
	ErrProducerFenced = kcode.New("txn: producer fenced by a newer epoch of its transactional id", kcode.ProducerFenced)
	// ErrInvalidProducerIDMapping: the transactional ID is unknown here, or its producer
	// ID is not the request's.
	ErrInvalidProducerIDMapping = kcode.New("txn: producer id is not the transactional id's", kcode.InvalidProducerIDMapping)
	// ErrInvalidTxnState: the request does not fit the transaction's state (EndTxn with
	// no transaction, or committing one being aborted).
	ErrInvalidTxnState = kcode.New("txn: invalid transaction state for the request", kcode.InvalidTxnState)
	// ErrInvalidTimeout: a transaction timeout <= 0 or above Config.MaxTimeout.
	ErrInvalidTimeout = kcode.New("txn: transaction timeout out of range", kcode.InvalidTransactionTimeout)
	// ErrNotCoordinator: the transactional ID's partition is not loaded here (or was
	// unloaded while the request waited); the client looks the coordinator up again.
	ErrNotCoordinator = kcode.New("txn: not the coordinator of the transactional id", kcode.NotCoordinator)
	// ErrLoadInProgress: the transactional ID's partition is being loaded here.
	ErrLoadInProgress = kcode.New("txn: the transactional id's partition is loading", kcode.CoordinatorLoadInProgress)
	// ErrCoordinatorNotAvailable: the coordinator is closed, or the store could not
	// take the record for now (the client retries).
	ErrCoordinatorNotAvailable = kcode.New("txn: coordinator not available", kcode.CoordinatorNotAvailable)
	// ErrTransactionalIDNotFound: DescribeTransactions of an ID this coordinator does
	// not know.
	ErrTransactionalIDNotFound = kcode.New("txn: transactional id not found", kcode.TransactionalIDNotFound)
	// ErrInvalidRequest: an empty transactional ID, or a producer ID without an epoch.
	ErrInvalidRequest = kcode.New("txn: invalid request", kcode.InvalidRequest)
	// ErrNotInTransaction: VerifyPartitions' answer for a partition that is not in the
	// producer's transaction (KIP-890: the producer never added it, or the transaction
	// it was added to has ended).
	ErrNotInTransaction = kcode.New("txn: partition is not in the transaction", kcode.TransactionAbortable)
	// ErrRecordTooLarge: the store refused the record as too large (Kafka answers
	// UNKNOWN_SERVER_ERROR: nothing the client can change).
	ErrRecordTooLarge = kcode.New("txn: transaction record too large", kcode.UnknownServerError)

	// ErrPartitionGone is for a MarkerWriter to return for a partition that needs no
	// marker because it no longer exists (its topic was deleted) or cannot take one: the
	// transaction is complete without it, as in Kafka.
	ErrPartitionGone = errors.New("txn: partition gone, no marker needed")
	// ErrRecord: a stored transaction record could not be decoded.
	ErrRecord = errors.New("txn: undecodable transaction record")
	// errClosed: the coordinator was closed.
	errClosed = fmt.Errorf("%w: closed", ErrCoordinatorNotAvailable)
)

// codeOf is the Kafka code err carries: the first a sentinel in it names, else a
// *kerr.Error's, else 0 with false.
func codeOf(err error) (int16, bool) {
	var (
		code int16
		ok   bool
	)
	kcode.Walk(err, func(c int16) bool {
		code, ok = c, true
		return false
	})
	if ok {
		return code, true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, true
	}
	return 0, false
}

// storeError is the error of an operation whose record the Store did not take, mapped
// as Kafka's TransactionStateManager maps log-append errors: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT → COORDINATOR_NOT_AVAILABLE;
// NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR → NOT_COORDINATOR; too large →
// UNKNOWN_SERVER_ERROR; a coordinator's own code passes through. An error without a code
// is a local storage failure (NOT_COORDINATOR); cancellation is COORDINATOR_NOT_AVAILABLE.
func storeError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
	}
	code, ok := codeOf(err)
	if !ok {
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	}
	switch code {
	case kcode.UnknownTopicOrPartition, kcode.NotEnoughReplicas, kcode.NotEnoughReplicasAfterAppend, kcode.RequestTimedOut,
		kcode.CoordinatorNotAvailable:
		return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
	case kcode.NotLeaderOrFollower, kcode.KafkaStorageError, kcode.NotCoordinator:
		return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
	case kcode.CoordinatorLoadInProgress:
		return fmt.Errorf("%w: %w", ErrLoadInProgress, err)
	case kcode.MessageTooLarge, kcode.RecordListTooLarge:
		return fmt.Errorf("%w: %w", ErrRecordTooLarge, err)
	}
	return err // another code: the client is answered with it, as in Kafka
}

// markerOutcome is what a MarkerWriter's error for one partition means.
type markerOutcome int8

const (
	markerDone  markerOutcome = iota // the marker is in the partition (or none is needed)
	markerRetry                      // try that partition again after a backoff
	markerStale                      // this coordinator is stale: stop, the next one resumes
)

// classifyMarker follows Kafka's TransactionMarkerRequestCompletionHandler: written, or
// the partition is gone (ErrPartitionGone, UNSUPPORTED_FOR_MESSAGE_FORMAT) → done; the
// producer's or the coordinator's epoch at the partition is newer than this
// coordinator's (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, TRANSACTION_COORDINATOR_FENCED)
// → stale; anything else (no leader, a timeout, the leader moving) → retry.
func classifyMarker(err error) markerOutcome {
	if err == nil || errors.Is(err, ErrPartitionGone) {
		return markerDone
	}
	code, _ := codeOf(err)
	switch code {
	case kerr.UnsupportedForMessageFormat.Code:
		return markerDone
	case kcode.InvalidProducerEpoch, kcode.ProducerFenced, kcode.TransactionCoordinatorFenced:
		return markerStale
	}
	return markerRetry
}
