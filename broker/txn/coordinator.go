package txn

// coordinator.go holds the Coordinator: the loaded partitions of __transaction_state
// and their transactional IDs, what it depends on (Store, MarkerWriter, ProducerIDs), the
// durable write every transition goes through, and its periodic rounds.
//
// Concurrency model: one mutex (Coordinator.mu) guards every partition and ID in memory;
// it is never held across a call to a dependency (a store write, a marker write, an ID
// allocation). An ID being changed has its next state in txn.pending until the store
// answers, and any other change of it meanwhile is refused with CONCURRENT_TRANSACTIONS
// (the client retries), as in Kafka: a transactional ID has one producer, which sends
// one request of its transaction at a time, so the refusals are rare and each change is
// computed from a state that is current and durable. The exception is an addition
// behind an addition, which waits for it (add.go's awaitAdd: clients add partitions
// from each broker connection at once) and is then computed from the state it left.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Store makes records of __transaction_state durable (the broker appends them to the
// partition and waits for fdatasync). partition and coordinatorEpoch are the ones Load
// was given: a store that does not lead the partition at that epoch any more refuses
// the record with an error carrying NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR
// (internal/kcode). Other errors are mapped as Kafka maps log-append errors (storeError);
// one without a code is a local storage failure. A failed call may or may not have been
// persisted.
type Store interface {
	Write(ctx context.Context, partition, coordinatorEpoch int32, rec Record) error
}

// MarkerWriter writes transaction markers (the broker sends WriteTxnMarkers to each
// partition's leader). WriteMarkers appends to each of partitions a marker ending the
// producer's transaction there, commit or abort, stamped with coordinatorEpoch; it
// returns one error per partition, in order: nil once the marker is durable (or the
// producer has no open transaction there: a marker written again is a no-op),
// ErrPartitionGone when the partition no longer exists, or the partition leader's error
// (carrying its Kafka code: INVALID_PRODUCER_EPOCH or PRODUCER_FENCED for a producer
// epoch newer than the marker's, TRANSACTION_COORDINATOR_FENCED for a newer coordinator,
// anything else is retried). ctx ends when the coordinator stops writing them (the
// partition left, or the call took Config.MarkerTimeout); a call must return soon after.
// Only one loop writes a transaction's markers, but a call of a loop stopped by a new
// Load of the partition may still be returning when the new loop's first call starts.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, producer Producer, commit bool, coordinatorEpoch int32, partitions []TopicPartition) []error
}

// ProducerIDs hands out producer IDs never handed out before (the controller's producer
// ID blocks; metadata.Store has this method).
type ProducerIDs interface {
	AllocateProducerID(ctx context.Context) (int64, error)
}

// Deps are what a Coordinator works through. All are required.
type Deps struct {
	Store       Store
	Markers     MarkerWriter
	ProducerIDs ProducerIDs
	// OffsetsPartition is the partition of __consumer_offsets holding a group's offsets
	// (AddOffsetsToTxn adds it to the transaction).
	OffsetsPartition func(group string) int32
}

// Coordinator is the transaction coordinator of the partitions of __transaction_state
// loaded into it. It is safe for concurrent use.
type Coordinator struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	ctx    context.Context // cancelled by Close: the parent of every partition's
	cancel context.CancelFunc
	wg     sync.WaitGroup // marker loops and periodic rounds running

	mu     sync.Mutex
	closed bool
	parts  map[int32]*partition
	timers [2]Timer // the abort and expiration rounds
}

// partition is one loaded (or loading) partition of __transaction_state.
type partition struct {
	index, epoch int32
	loading      bool            // Load is replaying its records
	txns         map[string]*txn // by transactional ID
	// ctx is cancelled when the partition leaves this coordinator (Unload, a new Load of
	// it, Close): its marker loops and background writes stop.
	ctx    context.Context
	cancel context.CancelFunc
}

// txn is one transactional ID in memory.
type txn struct {
	id string
	m  Meta // durable (but see fenceFailed)
	// pending is the next state while it is being made durable; nil otherwise.
	pending *Meta
	// written is closed when the write of pending ends (add waits on it).
	written chan struct{}
	// fenceFailed: a fence's PrepareAbort failed to become durable, and m's epoch holds
	// the bumped one it tried (so the fenced producer stays fenced, and the next attempt
	// fences at that same epoch instead of bumping again), as Kafka's
	// hasFailedEpochFence.
	fenceFailed bool
}

// New returns a Coordinator with no partition loaded, and starts its periodic rounds
// (AbortTimedOut, ExpireIDs) on cfg.Clock. Close stops them.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.Markers == nil || deps.ProducerIDs == nil || deps.OffsetsPartition == nil {
		return nil, fmt.Errorf("txn: Deps needs Store, Markers, ProducerIDs and OffsetsPartition")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, deps: deps, log: log, ctx: ctx, cancel: cancel, parts: map[int32]*partition{}}
	c.every(0, cfg.AbortCheckInterval, func() { c.AbortTimedOut() })
	c.every(1, cfg.ExpirationCheckInterval, func() { c.ExpireIDs() })
	return c, nil
}

// PartitionFor is the partition of __transaction_state holding id's records.
func (c *Coordinator) PartitionFor(id string) int32 { return PartitionFor(id, c.cfg.Partitions) }

// Close stops the periodic rounds and every marker loop and waits for them. Requests
// afterwards get COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, t := range c.timers {
		if t != nil {
			t.Stop()
		}
	}
	for _, p := range c.parts {
		p.cancel()
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) now() time.Time { return c.cfg.Clock.Now() }

// lookupLocked finds id's partition and its state (nil when the partition has none).
// Called with c.mu held.
func (c *Coordinator) lookupLocked(id string) (*partition, *txn, error) {
	if c.closed {
		return nil, nil, errClosed
	}
	p := c.parts[c.PartitionFor(id)]
	switch {
	case p == nil:
		return nil, nil, fmt.Errorf("%w: partition %d of %s is not loaded here", ErrNotCoordinator, c.PartitionFor(id), TopicName)
	case p.loading:
		return nil, nil, fmt.Errorf("%w: partition %d of %s", ErrLoadInProgress, p.index, TopicName)
	}
	return p, p.txns[id], nil
}

// current reports whether t is still the state of its ID in p, and p still loaded here.
// Called with c.mu held.
func (c *Coordinator) current(p *partition, t *txn) bool {
	return !c.closed && c.parts[p.index] == p && !p.loading && p.txns[t.id] == t
}

// write makes next t's durable state through the Store, then t's current one. Called
// with c.mu held and t.pending nil; c.mu is released during the store call and held
// again when write returns. The error is storeError's, or NOT_COORDINATOR when p or t
// stopped being current meanwhile (the record may be in the log: the partition's next
// load finds it).
func (c *Coordinator) write(ctx context.Context, p *partition, t *txn, next Meta) error {
	t.pending, t.written = &next, make(chan struct{})
	c.mu.Unlock()
	err := c.deps.Store.Write(ctx, p.index, p.epoch, Record{TransactionalID: t.id, Meta: next})
	c.mu.Lock()
	t.pending = nil
	close(t.written)
	switch {
	case c.closed:
		return errClosed
	case !c.current(p, t):
		return fmt.Errorf("%w: partition %d of %s left while a record was written", ErrNotCoordinator, p.index, TopicName)
	case err != nil:
		return storeError(err)
	}
	t.m = next
	return nil
}

// producerTxnLocked finds id's state for a request naming its producer
// (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, verification): the ID is known here,
// with that producer ID, at that epoch. Called with c.mu held.
func (c *Coordinator) producerTxnLocked(id string, producer Producer) (*partition, *txn, error) {
	if id == "" {
		return nil, nil, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	p, t, err := c.lookupLocked(id)
	switch {
	case err != nil:
		return nil, nil, err
	case t == nil:
		return nil, nil, fmt.Errorf("%w: unknown transactional id", ErrInvalidProducerIDMapping)
	case t.m.ProducerID != producer.ID:
		return nil, nil, fmt.Errorf("%w: producer id %d, the transactional id's is %d", ErrInvalidProducerIDMapping, producer.ID, t.m.ProducerID)
	case t.m.ProducerEpoch != producer.Epoch:
		return nil, nil, fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, producer.Epoch, t.m.ProducerEpoch)
	}
	return p, t, nil
}

// every runs round every d until Close (timer slot i).
func (c *Coordinator) every(i int, d time.Duration, round func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.timers[i] = c.cfg.Clock.AfterFunc(d, func() {
		if !c.begin() {
			return
		}
		defer c.wg.Done()
		round()
		c.every(i, d, round)
	})
}

// begin counts a goroutine of the coordinator in, unless it is closed.
func (c *Coordinator) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1) // under c.mu: never concurrent with Close's Wait
	return true
}

// sleep waits d on the Clock; false if ctx ended first.
func (c *Coordinator) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := c.cfg.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
