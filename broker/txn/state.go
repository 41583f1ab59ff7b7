package txn

// state.go is the state of one transactional ID (Kafka's TransactionMetadata) and its
// transitions, as pure functions from the current state to the next one: the operations
// (init.go, add.go, endtxn.go, markers.go, expire.go) make the result durable and only
// then take it as the current state.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// State is a transaction's state (Kafka's TransactionState; the names are Kafka's, which
// DescribeTransactions and ListTransactions show).
type State int8

const (
	// Empty: the ID has a producer ID and epoch and no transaction.
	Empty State = iota
	// Ongoing: partitions (or a group's offsets) were added; data may be written.
	Ongoing
	// PrepareCommit and PrepareAbort: EndTxn (or a fence, a timeout) decided the outcome
	// and made it durable; markers are being written to the transaction's partitions.
	PrepareCommit
	PrepareAbort
	// CompleteCommit and CompleteAbort: every marker is written. The ID may start its
	// next transaction.
	CompleteCommit
	CompleteAbort
	// Dead: the ID expired. Its record is the tombstone; it is never a state in memory.
	Dead
	// PrepareEpochFence is Kafka's name for a fence in progress. Weir never has it: a
	// fence writes PrepareAbort with the bumped epoch at once. Known for ListTransactions'
	// state filter only.
	PrepareEpochFence
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// stateByName is the State Kafka calls name.
func stateByName(name string) (State, bool) {
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// ongoing reports whether a transaction is open (partitions may hold its data).
func (s State) ongoing() bool { return s == Ongoing || s == PrepareCommit || s == PrepareAbort }

// expirable reports whether an ID in state s may expire (Kafka's isExpirationAllowed).
func (s State) expirable() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// NoProducerID and NoEpoch are Kafka's "none" values.
const (
	NoProducerID int64 = -1
	NoEpoch      int16 = -1
)

// exhaustedEpoch is the first epoch a producer may not be given: MaxInt16 is kept so that
// a producer at the epoch below it can still be fenced (Kafka's isEpochExhausted).
const exhaustedEpoch = math.MaxInt16 - 1

// Producer is a producer ID and epoch.
type Producer struct {
	ID    int64
	Epoch int16
}

// NoProducer is a request's "no current producer".
var NoProducer = Producer{NoProducerID, NoEpoch}

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func comparePartitions(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Meta is the durable state of a transactional ID: what each record holds.
type Meta struct {
	State State
	// ProducerID and ProducerEpoch are the producer's current ones. ProducerEpoch is
	// NoEpoch only before the first InitProducerId of the ID is durable.
	ProducerID    int64
	ProducerEpoch int16
	// PrevProducerID is the producer ID before the last InitProducerId (itself when that
	// kept it; the one before when the epoch was exhausted and a new ID was given), for
	// KIP-360's retry after a new ID. LastProducerEpoch is the epoch before the last
	// bump by the producer itself (KIP-360), NoEpoch once another producer bumped it.
	PrevProducerID    int64
	LastProducerEpoch int16
	// Timeout is the transaction timeout the producer asked for (transaction.timeout.ms).
	Timeout time.Duration
	// Partitions are the transaction's partitions, sorted, without duplicates; Groups
	// the consumer groups whose offsets it commits (their __consumer_offsets partitions
	// are in Partitions), sorted. Both are empty outside Ongoing and Prepare*.
	Partitions []TopicPartition
	Groups     []string
	// Start is when the transaction began (its first partition was added); zero outside
	// one. Updated is the time of the last change (for expiration).
	Start, Updated time.Time
}

// clone is m with its own slices.
func (m Meta) clone() Meta {
	m.Partitions = slices.Clone(m.Partitions)
	m.Groups = slices.Clone(m.Groups)
	return m
}

// hasPartitions reports whether every partition of ps is in m.
func (m *Meta) hasPartitions(ps []TopicPartition) bool {
	for _, p := range ps {
		if _, ok := slices.BinarySearchFunc(m.Partitions, p, comparePartitions); !ok {
			return false
		}
	}
	return true
}

// exhausted reports whether m's epoch may not be bumped for a producer any more.
func (m *Meta) exhausted() bool { return m.ProducerEpoch >= exhaustedEpoch }

// ---- transitions ------------------------------------------------------------------

// initTransition is InitProducerId's next state for an ID without a transaction (Empty,
// CompleteCommit, CompleteAbort) that needs no new producer ID: the epoch bumped, or, for
// KIP-360's retry of a bump that was made (current is the epoch before it), the same one.
// A current producer that is neither is fenced. current is NoProducer when the producer
// gave none.
func initTransition(m Meta, current Producer, timeout time.Duration, now time.Time) (Meta, error) {
	next := m.clone()
	switch {
	case current == NoProducer:
		// A new producer: every earlier one is fenced.
		next.ProducerEpoch, next.LastProducerEpoch = m.ProducerEpoch+1, NoEpoch
	case m.ProducerEpoch == NoEpoch || current.Epoch == m.ProducerEpoch:
		// The producer bumps its own epoch to go on after an error (KIP-360).
		next.ProducerEpoch, next.LastProducerEpoch = m.ProducerEpoch+1, m.ProducerEpoch
	case current.Epoch == m.LastProducerEpoch:
		// A retry of that bump whose answer was lost: answered with the same epoch (and
		// the producer ID before it kept, for a retry again).
		next = emptied(next, m, timeout, now)
		next.PrevProducerID = m.PrevProducerID
		return next, nil
	default:
		return Meta{}, fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, current.Epoch, m.ProducerEpoch)
	}
	return emptied(next, m, timeout, now), nil
}

// rotateTransition is InitProducerId's next state once the epoch is exhausted: a new
// producer ID at epoch 0. The old epoch is kept as LastProducerEpoch when the producer
// itself asked (so its retry finds it, KIP-360).
func rotateTransition(m Meta, newID int64, current Producer, timeout time.Duration, now time.Time) Meta {
	next := m.clone()
	next.ProducerID, next.ProducerEpoch, next.LastProducerEpoch = newID, 0, NoEpoch
	if current != NoProducer {
		next.LastProducerEpoch = m.ProducerEpoch
	}
	return emptied(next, m, timeout, now)
}

// emptied finishes an InitProducerId transition: state Empty with no transaction.
func emptied(next, m Meta, timeout time.Duration, now time.Time) Meta {
	next.State = Empty
	next.PrevProducerID = m.ProducerID
	next.Timeout = timeout
	next.Partitions, next.Groups = nil, nil
	next.Start, next.Updated = time.Time{}, now
	return next
}

// validCurrent reports whether an InitProducerId naming current may go on with m (Kafka's
// isValidProducerId): the ID has no epoch yet, or current is its producer ID, or current
// is the ID before an exhausted epoch made a new one (a retry of that rotation).
func validCurrent(m Meta, current Producer) bool {
	return current == NoProducer || m.ProducerEpoch == NoEpoch || current.ID == m.ProducerID ||
		(current.ID == m.PrevProducerID && current.Epoch >= exhaustedEpoch)
}

// needsRotation reports whether InitProducerId must give a new producer ID: the epoch is
// exhausted and the request is not a retry of an earlier answer.
func needsRotation(m Meta, current Producer) bool {
	return m.exhausted() && (current == NoProducer || current.Epoch == m.ProducerEpoch)
}

// addTransition is the next state once partitions and groups are added: Ongoing, starting
// a transaction if none was open.
func addTransition(m Meta, parts []TopicPartition, groups []string, now time.Time) Meta {
	next := m.clone()
	if !m.State.ongoing() {
		next.Start = now
		next.Partitions, next.Groups = nil, nil
	}
	next.State = Ongoing
	next.Partitions = mergeSorted(next.Partitions, parts, comparePartitions)
	next.Groups = mergeSorted(next.Groups, groups, cmp.Compare[string])
	next.Updated = now
	return next
}

// prepareTransition is the next state of EndTxn from Ongoing: PrepareCommit or
// PrepareAbort, same producer and partitions.
func prepareTransition(m Meta, commit bool, now time.Time) Meta {
	next := m.clone()
	next.State = PrepareAbort
	if commit {
		next.State = PrepareCommit
	}
	next.Updated = now
	return next
}

// fenceTransition aborts m's open transaction with the epoch bumped (Kafka's
// prepareFenceProducerEpoch then PrepareAbort): the producer that opened it is fenced,
// its markers carry the new epoch and the partitions refuse its old one. epoch is the
// epoch to fence at: m's plus one, or m's own when an earlier fence of the same
// transaction already took that epoch in memory and failed to make it durable.
func fenceTransition(m Meta, epoch int16, now time.Time) Meta {
	next := prepareTransition(m, false, now)
	next.ProducerEpoch, next.LastProducerEpoch = epoch, NoEpoch
	return next
}

// completeTransition is the next state once every marker is written.
func completeTransition(m Meta, now time.Time) Meta {
	next := m.clone()
	next.State = CompleteAbort
	if m.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.Partitions, next.Groups = nil, nil
	next.Updated = now
	return next
}

// deadTransition is the tombstone of an expired ID.
func deadTransition(m Meta, now time.Time) Meta {
	next := m.clone()
	next.State = Dead
	next.Partitions, next.Groups = nil, nil
	next.Updated = now
	return next
}

// mergeSorted is the sorted union of sorted (deduplicated) a and any b.
func mergeSorted[T any](a, b []T, compare func(T, T) int) []T {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, compare)
	return slices.CompactFunc(out, func(x, y T) bool { return compare(x, y) == 0 })
}
