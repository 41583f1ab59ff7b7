package kafka

// KIP-890 part 1 on the produce path: a partition leader appends a producer's first
// transactional batch in a partition (no open transaction of that producer there) only
// once the producer's transaction coordinator says the partition is in its ongoing
// transaction (TxnVerifier: VerifyPartitions on this broker, or peer.OpVerifyTxn to the
// coordinator's broker). Without the check a late batch of a transaction that already
// ended (a retry, delayed on the network, of the same producer epoch) opened a
// transaction no coordinator knows: the partition's last stable offset stayed on it,
// blocking read_committed consumers, until the producer's next marker there (a
// "hanging transaction").
//
// The check is asynchronous: the connection's reader goes on with its next request and
// the WAL with other appends; the produce answer waits for it (answers still go out in
// request order). While it is outstanding, further transactional batches of the same
// producer and epoch to the partition wait behind the batch checked, in arrival order,
// and share its answer: appended in order after it, or refused with it. So an idempotent
// producer's batch n+1 cannot overtake batch n (it would be OUT_OF_ORDER_SEQUENCE).
// Nothing is cached beyond that question in flight: the next first batch asks again.
//
// A coordinator that does not answer within the timeout, is loading, moving or not
// reachable gives NOT_ENOUGH_REPLICAS (retriable, no metadata refresh), a partition not
// in the transaction INVALID_TXN_STATE, as Kafka's ReplicaManager answers (errors.go:
// unverified). Neither appends anything.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/metadata"
)

// DefaultVerifyTxnTimeout bounds one check when Config.VerifyTxnTimeout is 0.
const DefaultVerifyTxnTimeout = 10 * time.Second

// txnGate holds the checks in flight and the batches waiting behind each.
type txnGate struct {
	v       TxnVerifier
	timeout time.Duration

	// mu is held while a finished check's batches are handed to the WAL (Writer.Append
	// queues, blocking only while the WAL's queue is full), so a batch that arrives
	// meanwhile finds either the check still in flight or its batches already queued.
	mu      sync.Mutex
	waiting map[gateKey][]func(error)
}

// gateKey is one producer epoch's batches to one partition.
type gateKey struct {
	topic     metadata.TopicID
	partition int32
	pid       int64
	epoch     int16
}

// newTxnGate returns the check, or nil when it is off or the coordinator cannot be asked.
func newTxnGate(cfg Config, coord TxnCoordinator) *txnGate {
	v, ok := coord.(TxnVerifier)
	if !cfg.VerifyTxnPartitions || !ok {
		return nil
	}
	timeout := cfg.VerifyTxnTimeout
	if timeout <= 0 {
		timeout = DefaultVerifyTxnTimeout
	}
	return &txnGate{v: v, timeout: timeout, waiting: map[gateKey][]func(error){}}
}

// admit runs append for a transactional batch of producer pid/epoch to partition index of
// t through w: at once when the producer's transaction is open there, else once
// the coordinator has answered (run(nil)) or refused, timed out or could not be asked
// (run(err), err wrapping the Kafka code to answer). run is called exactly once, on this
// goroutine or the check's.
func (g *txnGate) admit(ctx context.Context, txnID string, t *metadata.Topic, index int32, pid int64, epoch int16, w Writer, run func(error)) {
	k := gateKey{t.ID, index, pid, epoch}
	g.mu.Lock()
	if q, ok := g.waiting[k]; ok {
		g.waiting[k] = append(q, run)
		g.mu.Unlock()
		return
	}
	if tw, ok := w.(TxnWriter); !ok || tw.OpenTxn(pid) {
		g.mu.Unlock()
		run(nil)
		return
	}
	g.waiting[k] = []func(error){run}
	g.mu.Unlock()
	go func() {
		err := g.ask(ctx, txnID, t.Name, index, pid, epoch)
		g.mu.Lock()
		defer g.mu.Unlock()
		q := g.waiting[k]
		delete(g.waiting, k)
		for _, r := range q {
			r(err)
		}
	}()
}

// ask asks the coordinator, giving up after the timeout even if it does not return.
func (g *txnGate) ask(ctx context.Context, txnID, topic string, index int32, pid int64, epoch int16) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	answer := make(chan error, 1)
	go func() { answer <- g.v.VerifyTxn(ctx, txnID, pid, epoch, topic, index) }()
	select {
	case err := <-answer:
		return unverified(err)
	case <-ctx.Done():
		return unverified(fmt.Errorf("%w: the coordinator of %q did not answer within %v", kerr.RequestTimedOut, txnID, g.timeout))
	}
}
