package txn

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-io/weir/internal/kcode"
)

// openTxn initializes id and adds partitions to a transaction.
func (h *harness) openTxn(id string, tps ...TopicPartition) Producer {
	h.t.Helper()
	p := h.mustInit(id)
	if err := h.add(id, p, tps...); err != nil {
		h.t.Fatalf("AddPartitions: %v", err)
	}
	return p
}

// TestEndTxnIdempotent: EndTxn is answered once its Prepare record is durable; a retry of
// the same outcome is answered OK while the markers are written and after, writing
// nothing; the other outcome is INVALID_TXN_STATE.
func TestEndTxnIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t", tp("a", 0))
		release := make(chan struct{})
		h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
			<-release
			return make([]error, len(call.partitions))
		})
		wantErr(t, "EndTxn(commit)", h.end("t", p, true), nil)
		synctest.Wait()
		if m := h.store.last(t, "t"); m.State != PrepareCommit {
			t.Fatalf("answered before PrepareCommit was durable: last record %v", m.State)
		}
		wantErr(t, "EndTxn(commit) again, markers in flight", h.end("t", p, true), nil)
		wantErr(t, "EndTxn(abort), markers in flight", h.end("t", p, false), ErrInvalidTxnState)
		close(release)
		synctest.Wait()
		wantErr(t, "EndTxn(commit) again, complete", h.end("t", p, true), nil)
		wantErr(t, "EndTxn(abort), complete", h.end("t", p, false), ErrInvalidTxnState)
		if got := h.store.states("t"); !slices.Equal(got, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}) {
			t.Fatalf("records: %v, want one of each step (retries write nothing)", got)
		}
		if calls := h.markers.callList(); len(calls) != 1 || !calls[0].commit {
			t.Fatalf("marker calls: %+v, want one commit", calls)
		}
		// The next transaction starts afresh.
		wantErr(t, "next AddPartitions", h.add("t", p, tp("b", 0)), nil)
		if d := h.describe("t"); !slices.Equal(d.Partitions, []TopicPartition{tp("b", 0)}) || d.State != Ongoing {
			t.Fatalf("next transaction: %+v", d)
		}
		wantErr(t, "abort it", h.end("t", p, false), nil)
		synctest.Wait()
		wantErr(t, "EndTxn(abort) again", h.end("t", p, false), nil)
		wantErr(t, "EndTxn(commit) of the aborted", h.end("t", p, true), ErrInvalidTxnState)
	})
}

// TestMarkersRetried: partitions whose marker failed are retried, alone, after a backoff
// that doubles; a partition that is gone needs none; once all are written the transaction
// completes, the Complete record retried too while the store refuses it.
func TestMarkersRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t", tp("a", 0), tp("b", 0), tp("gone", 0))
		notLeader := kcode.New("not leader", kcode.NotLeaderOrFollower)
		var at []time.Duration
		start := time.Now()
		h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
			at = append(at, time.Since(start))
			errs := make([]error, len(call.partitions))
			for i, x := range call.partitions {
				switch {
				case x.Topic == "gone":
					errs[i] = fmt.Errorf("deleted: %w", ErrPartitionGone)
				case x.Topic == "a" && len(at) <= 3:
					errs[i] = notLeader
				}
			}
			return errs
		})
		completes := 0
		h.store.setHook(func(rec Record) {
			if rec.Meta.State == CompleteCommit {
				completes++
				if completes <= 2 {
					h.store.setErr(kcode.New("timed out", kcode.RequestTimedOut))
				} else {
					h.store.setErr(nil)
				}
			}
		})
		wantErr(t, "EndTxn(commit)", h.end("t", p, true), nil)
		time.Sleep(time.Minute) // on purpose (fake time): every retry's backoff passes
		synctest.Wait()
		calls := h.markers.callList()
		want := [][]TopicPartition{
			{tp("a", 0), tp("b", 0), tp("gone", 0)},
			{tp("a", 0)}, {tp("a", 0)}, {tp("a", 0)},
		}
		if len(calls) != len(want) {
			t.Fatalf("%d marker calls, want %d: %+v", len(calls), len(want), calls)
		}
		for i, c := range calls {
			if !slices.Equal(c.partitions, want[i]) || !c.commit || c.producer != p || c.epoch != testEpoch {
				t.Fatalf("marker call %d: %+v, want commit by %+v to %v", i, c, p, want[i])
			}
		}
		backoff := h.cfg.RetryBackoff
		if wantAt := []time.Duration{0, backoff, 3 * backoff, 7 * backoff}; !slices.Equal(at, wantAt) {
			t.Fatalf("marker calls at %v, want %v (doubling backoff)", at, wantAt)
		}
		if completes != 3 {
			t.Fatalf("%d Complete writes, want 3 (two refused)", completes)
		}
		if d := h.describe("t"); d.State != CompleteCommit || len(d.Partitions) != 0 {
			t.Fatalf("after the markers: %+v", d)
		}
		if got := h.store.states("t"); !slices.Equal(got, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}) {
			t.Fatalf("records: %v", got)
		}
	})
}

// TestMarkersStale: a partition refusing the marker with a newer producer or coordinator
// epoch means this coordinator is stale: it stops, leaving the transaction in Prepare*
// for the partition's next load, and does not complete it.
func TestMarkersStale(t *testing.T) {
	for _, code := range []int16{kcode.InvalidProducerEpoch, kcode.ProducerFenced, kcode.TransactionCoordinatorFenced} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				p := h.openTxn("t", tp("a", 0), tp("b", 0))
				h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
					return []error{nil, kcode.New("stale", code)}
				})
				wantErr(t, "EndTxn(abort)", h.end("t", p, false), nil)
				time.Sleep(time.Hour) // on purpose (fake time): long enough for any retry to have happened
				synctest.Wait()
				if n := len(h.markers.callList()); n != 1 {
					t.Fatalf("%d marker calls, want 1", n)
				}
				if d := h.describe("t"); d.State != PrepareAbort {
					t.Fatalf("state %v, want PrepareAbort left as it is", d.State)
				}
			})
		})
	}
}

// TestEmptyTransactionCompletes: a transaction with no partition (AddPartitions of none)
// completes without a marker call.
func TestEmptyTransactionCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t")
		wantErr(t, "EndTxn(commit)", h.end("t", p, true), nil)
		synctest.Wait()
		if d := h.describe("t"); d.State != CompleteCommit {
			t.Fatalf("state %v", d.State)
		}
		if n := len(h.markers.callList()); n != 0 {
			t.Fatalf("%d marker calls for no partition", n)
		}
	})
}

// TestCrashBetweenPrepareAndComplete: the coordinator dies with a transaction's outcome
// durable and its markers not all written; a new coordinator loading the partition
// resumes it: the markers are written again (to every partition, carrying the new
// coordinator epoch) and the transaction completes. The old coordinator's marker loop
// stopped with it.
func TestCrashBetweenPrepareAndComplete(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(outcome(commit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				p := h.openTxn("t", tp("a", 0), tp("b", 1))
				h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
					errs := make([]error, len(call.partitions))
					for i, x := range call.partitions {
						if x.Topic == "b" {
							errs[i] = kcode.New("not leader", kcode.NotLeaderOrFollower) // never makes it
						}
					}
					return errs
				})
				wantErr(t, "EndTxn", h.end("t", p, commit), nil)
				time.Sleep(time.Second) // on purpose (fake time): a few marker retries before the crash
				synctest.Wait()
				h.c.Close() // the crash
				before := len(h.markers.callList())
				time.Sleep(time.Hour) // on purpose (fake time): long enough for any retry a live loop would make
				synctest.Wait()
				if n := len(h.markers.callList()); n != before {
					t.Fatalf("the closed coordinator made %d marker calls after Close", n-before)
				}
				prepare := map[bool]State{true: PrepareCommit, false: PrepareAbort}[commit]
				if m := h.store.last(t, "t"); m.State != prepare {
					t.Fatalf("last record %v, want %v", m.State, prepare)
				}

				h.markers.setAnswer(nil)
				c2 := h.start()
				st, err := c2.Load(0, testEpoch+1, h.store.replay(0))
				if err != nil || st.Resumed != 1 || st.IDs != 1 {
					t.Fatalf("Load: %+v %v, want 1 id, 1 resumed", st, err)
				}
				synctest.Wait()
				calls := h.markers.callList()[before:]
				if len(calls) != 1 || calls[0].commit != commit || calls[0].producer != p || calls[0].epoch != testEpoch+1 ||
					!slices.Equal(calls[0].partitions, []TopicPartition{tp("a", 0), tp("b", 1)}) {
					t.Fatalf("resumed markers: %+v", calls)
				}
				complete := map[bool]State{true: CompleteCommit, false: CompleteAbort}[commit]
				d, err := c2.Describe("t")
				if err != nil || d.State != complete {
					t.Fatalf("after resuming: %+v %v, want %v", d, err, complete)
				}
				if err := c2.EndTxn(context.Background(), "t", p, commit); err != nil {
					t.Fatalf("EndTxn retried at the new coordinator: %v", err)
				}
			})
		})
	}
}

// TestUnloadStopsMarkers: a partition unloaded while its markers are retried stops them
// and writes no Complete record; requests then get NOT_COORDINATOR.
func TestUnloadStopsMarkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t", tp("a", 0))
		h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
			return []error{kcode.New("not leader", kcode.NotLeaderOrFollower)}
		})
		wantErr(t, "EndTxn", h.end("t", p, true), nil)
		time.Sleep(time.Second) // on purpose (fake time): a few marker retries before the unload
		synctest.Wait()
		if n := h.c.Unload(0); n != 1 {
			t.Fatalf("Unload dropped %d ids, want 1", n)
		}
		before := len(h.markers.callList())
		time.Sleep(time.Hour) // on purpose (fake time): long enough for any retry a live loop would make
		synctest.Wait()
		if n := len(h.markers.callList()); n != before {
			t.Fatalf("%d marker calls after Unload", n-before)
		}
		if m := h.store.last(t, "t"); m.State != PrepareCommit {
			t.Fatalf("last record %v, want PrepareCommit", m.State)
		}
		wantErr(t, "EndTxn after Unload", h.end("t", p, true), ErrNotCoordinator)
		_, err := h.init("t", NoProducer)
		wantErr(t, "InitProducerID after Unload", err, ErrNotCoordinator)
	})
}

// TestAwaitComplete: after EndTxn, AwaitComplete returns once the markers are written
// and Complete* is durable (true), and gives up when its context ends first (false).
func TestAwaitComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t", tp("a", 0))
		var failing atomic.Bool
		failing.Store(true)
		h.markers.setAnswer(func(ctx context.Context, call markerCall) []error {
			if failing.Load() {
				return []error{kcode.New("not leader", kcode.NotLeaderOrFollower)}
			}
			return make([]error, len(call.partitions))
		})
		if err := h.end("t", p, true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if h.c.AwaitComplete(ctx, "t") {
			t.Fatal("AwaitComplete reported completion while every marker was refused")
		}
		cancel()
		failing.Store(false)
		if !h.c.AwaitComplete(context.Background(), "t") {
			t.Fatal("AwaitComplete did not see the transaction complete")
		}
		if d, _ := h.c.Describe("t"); d.State != CompleteCommit {
			t.Fatalf("state after AwaitComplete: %v", d.State)
		}
	})
}
