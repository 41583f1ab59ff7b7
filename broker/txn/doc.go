// Package txn is the transaction coordinator: Kafka's transactions (KIP-98) with
// KIP-360's producer recovery and KIP-890 part 1's partition verification, as pure state
// and logic over injected dependencies, like broker/group. The broker leading partition p
// of __transaction_state is the coordinator of the transactional IDs placed there
// (PartitionFor: FNV-1a 32 of the ID modulo Config.Partitions); it Loads p's records on
// gaining leadership and Unloads p on losing it. Records are made durable through a Store
// (the broker appends them to p), markers are written through a MarkerWriter (the broker
// sends them to the partitions' leaders), producer IDs come from ProducerIDs (the
// controller's blocks). The front end maps the sentinel errors (errors.go) to codes.
//
// Behaviour follows Kafka's TransactionCoordinator, TransactionMetadata and
// TransactionStateManager (transaction version 1: the epoch is not bumped at every
// transaction, KIP-890 part 2 is not done); differences are noted where they are.
//
// # States
//
//	               InitProducerId: epoch+1 (a new producer ID at epoch 0 once the epoch
//	               +-----+         is exhausted); AddPartitions, AddOffsets -> Ongoing
//	               v     |                                          +--+
//	new ID -----> Empty -+------ AddPartitions, AddOffsets ---> Ongoing <-+ AddPartitions,
//	               ^                                           |    |       AddOffsets
//	               |                            EndTxn(commit) |    | EndTxn(abort), or a
//	               |                                           |    | fence: InitProducerId
//	               |                                           v    v over it, or its timeout
//	               |                              PrepareCommit    PrepareAbort (epoch+1)
//	               |                                           |    |
//	               |                          markers written  |    |  markers written
//	               |                                           v    v
//	               +---------- InitProducerId ---- CompleteCommit  CompleteAbort
//	                           (from either)       (AddPartitions, AddOffsets -> Ongoing;
//	                                                idle for IDExpiration -> tombstone)
//
// Every arrow is a record made durable before the change is visible or answered
// (state.go computes the next state, coordinator.go's write makes it durable). While a
// record of an ID is being written, any other change of the ID is answered
// CONCURRENT_TRANSACTIONS, but an addition (Add*) behind an addition, which waits for
// it and is written next. The answers, state by state (CONCURRENT is
// CONCURRENT_TRANSACTIONS, INVALID is INVALID_TXN_STATE, OK a retry answered again):
//
//	                 InitProducerId     Add*            EndTxn(commit)   EndTxn(abort)
//	Empty            epoch+1            -> Ongoing      INVALID          INVALID
//	Ongoing          fence; CONCURRENT  -> Ongoing      -> PrepareCommit -> PrepareAbort
//	PrepareCommit    CONCURRENT         CONCURRENT      OK               INVALID
//	PrepareAbort     CONCURRENT         CONCURRENT      INVALID          OK
//	CompleteCommit   epoch+1            -> Ongoing      OK               INVALID
//	CompleteAbort    epoch+1            -> Ongoing      INVALID          OK
//
// Add* and EndTxn naming another producer ID (or an ID unknown here) get
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, in every state. Kafka
// answers a retried EndTxn in Prepare* with CONCURRENT_TRANSACTIONS until the markers are
// written, which the client retries until it gets OK; Weir answers OK at once.
//
// A fence aborts the open transaction with the producer's epoch bumped: the markers
// carry the new epoch, so the partitions refuse the fenced producer's batches, and its
// requests here get PRODUCER_FENCED. The fencing InitProducerId is answered
// CONCURRENT_TRANSACTIONS once the abort is durable; its retry after the markers bumps
// the epoch again and gets it (the fence's epoch is never handed out), as in Kafka.
// Epochs stop at MaxInt16-1 for producers, so that a fence always has one more.
//
// A Prepare* transaction's markers are written until every partition has one (or is
// gone), with a doubling backoff, then Complete* is written (markers.go); it stops when
// the partition leaves this coordinator, and the next coordinator to load the partition
// writes them again and completes it. Ongoing transactions past their timeout are
// fenced (expire.go, every AbortCheckInterval); IDs without an open transaction and
// unchanged for IDExpiration are forgotten after a tombstone (every
// ExpirationCheckInterval).
//
// # Records
//
// One record of __transaction_state per change: key the transactional ID, value the ID's
// whole state after it (Meta). On load, the latest record of each ID is its state; a
// record in state Dead, or an empty value, is the ID's tombstone. The value (record.go):
//
//	value      := 0x00 'W' 'T' version(0x01) state producer_id producer_epoch
//	              prev_producer_id last_producer_epoch timeout start updated
//	              topics groups
//	state      := byte: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
//	              CompleteCommit 4, CompleteAbort 5, Dead 6 (Kafka's ids)
//	producer_id, prev_producer_id := varint
//	producer_epoch, last_producer_epoch := varint (int16; -1: none)
//	timeout    := uvarint(milliseconds, <= MaxInt32)
//	start, updated := varint(Unix milliseconds; -1: none)
//	topics     := uvarint(n) (str(topic) uvarint(m) varint(partition)*m)*n
//	groups     := uvarint(n) str*n
//	str        := uvarint(len) bytes
//
// A decoder refuses another version rather than guess (the reader is older than the
// writer); counts are checked against the bytes left before anything is allocated.
package txn
