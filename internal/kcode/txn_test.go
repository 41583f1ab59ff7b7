package kcode

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTxnCodesAreKafkas: every transaction constant is the code of the error Kafka names
// so.
func TestTxnCodesAreKafkas(t *testing.T) {
	for _, c := range []struct {
		got  int16
		want *kerr.Error
	}{
		{UnknownServerError, kerr.UnknownServerError},
		{UnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
		{MessageTooLarge, kerr.MessageTooLarge},
		{CoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
		{CoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
		{NotCoordinator, kerr.NotCoordinator},
		{RecordListTooLarge, kerr.RecordListTooLarge},
		{NotEnoughReplicas, kerr.NotEnoughReplicas},
		{NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
		{InvalidRequest, kerr.InvalidRequest},
		{InvalidTxnState, kerr.InvalidTxnState},
		{InvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
		{InvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
		{ConcurrentTransactions, kerr.ConcurrentTransactions},
		{TransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
		{ProducerFenced, kerr.ProducerFenced},
		{TransactionalIDNotFound, kerr.TransactionalIDNotFound},
		{TransactionAbortable, kerr.TransactionAbortable},
	} {
		if c.got != c.want.Code {
			t.Errorf("%s: %d, want %d", c.want.Message, c.got, c.want.Code)
		}
	}
}
