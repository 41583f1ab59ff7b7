package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// Transactions at the front end: the transaction API keys (AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions) and
// the transactional forms of FindCoordinator and InitProducerId. They are served, and
// advertised, only when Deps.Txn is set; without it a transactional producer is refused
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as before transactions existed. The
// coordinator (broker/txn, behind the broker's glue) answers NOT_COORDINATOR for ids it
// does not own and COORDINATOR_LOAD_IN_PROGRESS while loading; its errors carry their
// Kafka codes (kafkaCode).

// TxnCoordinator is the transaction coordinator as the front end uses it.
type TxnCoordinator interface {
	// Partition returns the __transaction_state partition of txnID, creating the topic
	// when create is set (FindCoordinator answers with its leader).
	Partition(ctx context.Context, txnID string, create bool) (*metadata.Topic, int32, error)
	// InitProducerID gives txnID its producer ID and a new epoch (fencing any older
	// one, aborting its open transaction); pid and epoch are the producer's current ones
	// (KIP-360) or -1.
	InitProducerID(ctx context.Context, txnID string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error)
	// AddPartitions adds parts to txnID's transaction (verifyOnly: only checks they are
	// in it, KIP-890); one error per part, nil for success.
	AddPartitions(ctx context.Context, txnID string, pid int64, epoch int16, parts []TxnPartition, verifyOnly bool) []error
	// AddOffsets adds group's offsets partition to the transaction.
	AddOffsets(ctx context.Context, txnID string, pid int64, epoch int16, group string) error
	// EndTxn commits or aborts the transaction; it returns once the outcome is durable.
	EndTxn(ctx context.Context, txnID string, pid int64, epoch int16, commit bool) error
	// Describe describes each id (an error per id it does not coordinate).
	Describe(ctx context.Context, txnIDs []string) []TxnDescription
	// List lists the transactions this broker coordinates, filtered (empty: all).
	List(ctx context.Context, states []string, pids []int64) []TxnListing
}

// TxnVerifier is the TxnCoordinator capability the produce path's KIP-890 check uses
// (txnverify.go): it asks the coordinator of txnID, on this broker or another, whether
// topic/partition is in the ongoing transaction of producer pid with epoch. nil: yes;
// otherwise the coordinator's refusal with its Kafka code (TRANSACTION_ABORTABLE: not
// in it), or why it could not be asked. It returns by ctx's end.
type TxnVerifier interface {
	VerifyTxn(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error
}

// TxnWriter is the Writer capability the check needs: whether producer pid has an open
// transaction in the partition (appended, synced or not); a Writer without it (a zone
// proxy's, which refuses transactional batches) is not checked.
type TxnWriter interface {
	OpenTxn(pid int64) bool
}

// TxnPartition is one partition of a transaction.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// TxnDescription is one transactional id as DescribeTransactions shows it.
type TxnDescription struct {
	TxnID         string
	Err           error
	State         string
	TimeoutMs     int32
	StartMs       int64
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TxnPartition
}

// TxnListing is one transaction as ListTransactions shows it.
type TxnListing struct {
	TxnID      string
	ProducerID int64
	State      string
}

// MarkerAppender is the Backend capability WriteTxnMarkers needs: append a transaction
// marker to a partition led here, durably (the WAL's sync, a valid lease, the fence
// still ours), calling done exactly once. Its errors carry their Kafka codes.
type MarkerAppender interface {
	AppendMarker(t *metadata.Topic, index int32, m recbatch.Marker, done func(error))
}

// txnOn reports whether transactions are served.
func txnOn(s *Server) bool { return s.txn != nil }

// txnCode is err's Kafka code for a transaction request of version v of key: like
// Kafka's handlers, PRODUCER_FENCED (KIP-588) is answered INVALID_PRODUCER_EPOCH to
// clients too old to know it (InitProducerId v<4, AddPartitionsToTxn, AddOffsetsToTxn
// and EndTxn v<2), which treat it as fatal the same way.
func txnCode(err error, key, v int16) int16 {
	code := kafkaCode(err)
	if code != kerr.ProducerFenced.Code {
		return code
	}
	switch {
	case key == 22 && v < 4, (key == 24 || key == 25 || key == 26) && v < 2:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
