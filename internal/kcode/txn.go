package kcode

// Kafka error codes of the transaction coordinator (broker/txn), in a block of their own
// so that the packages adding codes for transactions side by side do not edit the same
// lines.
const (
	UnknownServerError           int16 = -1
	UnknownTopicOrPartition      int16 = 3
	MessageTooLarge              int16 = 10
	CoordinatorLoadInProgress    int16 = 14
	CoordinatorNotAvailable      int16 = 15
	NotCoordinator               int16 = 16
	RecordListTooLarge           int16 = 18
	NotEnoughReplicas            int16 = 19
	NotEnoughReplicasAfterAppend int16 = 20
	InvalidRequest               int16 = 42
	InvalidProducerIDMapping     int16 = 49
	InvalidTransactionTimeout    int16 = 50
	ConcurrentTransactions       int16 = 51
	TransactionCoordinatorFenced int16 = 52
	ProducerFenced               int16 = 90
	TransactionalIDNotFound      int16 = 105
	TransactionAbortable         int16 = 120
)
