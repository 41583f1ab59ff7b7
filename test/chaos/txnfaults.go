package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transaction faults that need a transaction at a chosen step (--txn). Each runs
// its own writer (a writer number after the load's, so its records are checked with
// theirs), whose transactions go to the load's map: the read_committed check at the
// end judges them as any other.
//
// txn-leader-kill: the writer begins, produces one record to each of TxnRecords
// partitions (AddPartitionsToTxn, then the produce, both answered), the fault SIGKILLs
// the broker leading the first of them and the writer commits at once: the coordinator
// must write a marker to a partition whose leader is gone (it waits for the failover).
// The broker is started again RestartAfter after the kill; the writer then runs
// txnAfterFault more transactions.
//
// txn-producer-pause: the writer, with a transaction timeout of txnPauseTimeout,
// begins, produces, and stops before EndTxn until the coordinator has aborted the
// transaction on its own (DescribeTransactions no longer shows it Ongoing under the
// same epoch; the coordinator checks every 10 s), then asks to commit. The commit must
// fail (the abort bumped the epoch: the producer is fenced) and the records stay
// invisible to read_committed (outcome "expired"); a fenced client is replaced, and the
// writer's next txnAfterFault transactions must commit.

const (
	// txnPauseTimeout is the paused writer's transaction.timeout.ms.
	txnPauseTimeout = 3 * time.Second
	// txnPauseMax bounds the pause: the timeout, the coordinator's 10 s check interval
	// and room for a loaded machine.
	txnPauseMax = txnPauseTimeout + 40*time.Second
	// txnAfterFault is how many transactions a fault's writer runs after the fault.
	txnAfterFault = 3
)

// newFaultWriter reserves a writer number for a fault's writer.
func (t *txnLoad) newFaultWriter() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.cfg.TxnWriters + t.faultWriters
	t.faultWriters++
	return w
}

// track adds transaction (w, n) to the checked ones.
func (t *txnLoad) track(w, n int, st *txnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.txns[txnKey{w, n}] = st
}

// setOutcome records a fault writer's outcome (under t.mu: the report may read it).
func (t *txnLoad) setOutcome(st *txnState, outcome string, commitSent bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st.outcome, st.commitSent = outcome, commitSent
	if err != nil {
		st.err = err.Error()
	}
}

// openTxn begins transaction n of writer w on cl and produces its records (one per
// partition from the first), all answered: AddPartitionsToTxn is done for each.
func (t *txnLoad) openTxn(ctx context.Context, cl *kgo.Client, w, n int, st *txnState) ([]int32, error) {
	t.track(w, n, st)
	if err := cl.BeginTransaction(); err != nil {
		return nil, err
	}
	var parts []int32
	recs := make([]*kgo.Record, t.cfg.TxnRecords)
	for r := range recs {
		p := int32((n*t.cfg.TxnRecords + r + w) % t.cfg.Partitions)
		parts = append(parts, p)
		recs[r] = &kgo.Record{Topic: t.cfg.txnTopic(), Partition: p, Value: []byte(txnValue(w, n, r))}
	}
	return parts, cl.ProduceSync(ctx, recs...).FirstErr()
}

// after runs txnAfterFault transactions of writer w from n on (a new client when cl
// is nil or one fails) and returns how many committed.
func (t *txnLoad) after(cl *kgo.Client, w, n int) int {
	committed := 0
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for i := 0; i < txnAfterFault; i++ {
		if cl == nil {
			var err error
			if cl, err = t.client(w, 15*time.Second); err != nil {
				continue
			}
		}
		st := &txnState{outcome: txnUnknown}
		t.track(w, n+i, st)
		ok := t.one(cl, w, n+i, st)
		t.mu.Lock()
		if st.outcome == txnCommitted || st.outcome == txnAborted && (n+i)%5 == 4 {
			committed++
		}
		t.mu.Unlock()
		if !ok {
			cl.Close()
			cl = nil
		}
	}
	return committed
}

// partitionLeader is the broker leading partition p of topic, from Metadata.
func partitionLeader(ctx context.Context, boot []string, topic string, p int32) (int32, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return 0, err
	}
	if pd, ok := md.Topics[topic].Partitions[p]; ok && pd.Err == nil && pd.Leader >= 0 {
		return pd.Leader, nil
	}
	return 0, fmt.Errorf("chaos: no leader for %s/%d in Metadata", topic, p)
}

// runTxnLeaderKill is txn-leader-kill.
func runTxnLeaderKill(ctx context.Context, cfg Config, t target, tl *txnLoad, ev *Event, wait func(time.Duration) bool, log *slog.Logger) error {
	w := tl.newFaultWriter()
	cl, err := tl.client(w, 15*time.Second)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	st := &txnState{outcome: txnUnknown}
	parts, err := tl.openTxn(tctx, cl, w, 0, st)
	if err != nil {
		cl.Close()
		tl.setOutcome(st, txnUnknown, false, err)
		return fmt.Errorf("chaos: txn-leader-kill: writer %d could not open its transaction: %w", w, err)
	}
	// The victim leads one of the transaction's partitions but is not the writer's
	// coordinator: killing the coordinator is txn-coordinator-kill's fault, and an
	// EndTxn sent to a dead coordinator ends unknown to the client, which is not what
	// this fault checks (the coordinator writing a marker through a leader's failover).
	coord, err := findCoordinator(tctx, t.Bootstrap(), cfg.txnID(w), 1)
	if err != nil {
		cl.Close()
		tl.setOutcome(st, txnUnknown, false, err)
		return err
	}
	victim, part := int32(-1), parts[0]
	for _, p := range parts {
		leader, err := partitionLeader(tctx, t.Bootstrap(), cfg.txnTopic(), p)
		if err != nil {
			cl.Close()
			tl.setOutcome(st, txnUnknown, false, err)
			return err
		}
		if leader != coord {
			victim, part = leader, p
			break
		}
	}
	if victim < 0 {
		cl.Close()
		tl.setOutcome(st, txnUnknown, false, nil)
		return fmt.Errorf("chaos: txn-leader-kill: writer %d's coordinator %d leads every partition of its transaction %v", w, coord, parts)
	}
	log.Info("fault", "fault", ev.Fault, "broker", victim, "partition", part, "coordinator", coord, "writer", w)
	ev.Brokers = []int32{victim}
	ev.Steps = []EventStep{{victim, time.Now()}}
	if err := t.Kill(victim); err != nil {
		cl.Close()
		return err
	}
	killed := time.Now()
	tl.setOutcome(st, txnUnknown, true, nil)
	cerr := cl.EndTransaction(tctx, kgo.TryCommit)
	outcome := txnCommitted
	if cerr != nil {
		outcome = txnUnknown
		cl.Close()
		cl = nil
	}
	tl.setOutcome(st, outcome, true, cerr)
	took := time.Since(killed)
	wait(time.Until(killed.Add(cfg.RestartAfter)))
	if err := t.Start(victim); err != nil {
		if cl != nil {
			cl.Close()
		}
		return err
	}
	n := tl.after(cl, w, 1)
	ev.Note = fmt.Sprintf("writer %d: transaction over partitions %v, coordinator broker %d; broker %d (leader of %s/%d) killed after AddPartitionsToTxn and the produce; commit asked at once: %s in %v (err: %v); then %d of %d transactions ended as asked",
		w, parts, coord, victim, cfg.txnTopic(), part, outcome, took.Round(time.Millisecond), cerr, n, txnAfterFault)
	if n != txnAfterFault {
		return fmt.Errorf("chaos: txn-leader-kill: writer %d: %d of the %d transactions after the fault ended as asked", w, n, txnAfterFault)
	}
	return nil
}

// runTxnProducerPause is txn-producer-pause.
func runTxnProducerPause(ctx context.Context, cfg Config, t target, tl *txnLoad, ev *Event, log *slog.Logger) error {
	w := tl.newFaultWriter()
	cl, err := tl.client(w, txnPauseTimeout)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, txnPauseMax+60*time.Second)
	defer cancel()
	st := &txnState{outcome: txnUnknown}
	if _, err := tl.openTxn(tctx, cl, w, 0, st); err != nil {
		cl.Close()
		tl.setOutcome(st, txnUnknown, false, err)
		return fmt.Errorf("chaos: txn-producer-pause: writer %d could not open its transaction: %w", w, err)
	}
	// From here the coordinator must abort it: its records must never be read.
	tl.setOutcome(st, txnExpired, false, nil)
	log.Info("fault", "fault", ev.Fault, "writer", w, "timeout", txnPauseTimeout)
	paused := time.Now()
	state, err := awaitTxnAborted(tctx, t.Bootstrap(), cfg.txnID(w))
	if err != nil {
		cl.Close()
		return fmt.Errorf("chaos: txn-producer-pause: writer %d paused %v: %w", w, time.Since(paused).Round(time.Millisecond), err)
	}
	pause := time.Since(paused)
	cerr := cl.EndTransaction(tctx, kgo.TryCommit)
	if cerr == nil {
		// The commit of an aborted transaction was acknowledged: the check counts it as
		// committed, which its missing records then contradict.
		tl.setOutcome(st, txnCommitted, true, nil)
		cl.Close()
		return fmt.Errorf("chaos: txn-producer-pause: writer %d: the commit after %v, past the %v timeout, succeeded", w, pause.Round(time.Millisecond), txnPauseTimeout)
	}
	tl.setOutcome(st, txnExpired, false, cerr)
	// Whether the client recovers (KIP-360) or is fenced for good is the client's
	// business; a new one with the same id always works.
	cl.Close()
	n := tl.after(nil, w, 1)
	ev.Note = fmt.Sprintf("writer %d: transaction open past its %v timeout, paused %v until DescribeTransactions showed %s; the commit then failed: %v; then %d of %d transactions ended as asked",
		w, txnPauseTimeout, pause.Round(time.Millisecond), state, cerr, n, txnAfterFault)
	if n != txnAfterFault {
		return fmt.Errorf("chaos: txn-producer-pause: writer %d: %d of the %d transactions after the fault ended as asked", w, n, txnAfterFault)
	}
	return nil
}

// errTxnStillOpen is awaitTxnAborted's answer when the coordinator never aborted.
var errTxnStillOpen = errors.New("chaos: the transaction is still open past its timeout")

// awaitTxnAborted waits, through DescribeTransactions, until id's transaction is no
// longer Ongoing (the coordinator aborted it), for at most txnPauseMax; it returns the
// state seen and the epoch.
func awaitTxnAborted(ctx context.Context, boot []string, id string) (string, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(txnPauseMax)
	last := "not described"
	for time.Now().Before(deadline) {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err == nil {
			if d, ok := ds[id]; ok && d.Err == nil {
				last = fmt.Sprintf("%s (epoch %d)", d.State, d.ProducerEpoch)
				if d.State != "Ongoing" {
					return last, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return last, fmt.Errorf("%w: %s after %v", errTxnStillOpen, last, txnPauseMax)
}
