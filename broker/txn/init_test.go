package txn

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestInitNewAndBump: a new ID gets a new producer ID at epoch 0, durable before the
// answer; each InitProducerId after bumps the epoch and keeps the ID.
func TestInitNewAndBump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		if p != (Producer{1000, 0}) {
			t.Fatalf("first InitProducerID: %+v, want {1000 0}", p)
		}
		if m := h.store.last(t, "t"); m.State != Empty || m.ProducerID != 1000 || m.ProducerEpoch != 0 || m.Timeout != testTimeout {
			t.Fatalf("record: %+v", m)
		}
		for want := int16(1); want <= 3; want++ {
			if p := h.mustInit("t"); p != (Producer{1000, want}) {
				t.Fatalf("InitProducerID: %+v, want {1000 %d}", p, want)
			}
		}
		if p := h.mustInit("other"); p.ID != 1001 || p.Epoch != 0 {
			t.Fatalf("another id: %+v", p)
		}
		// The allocator failing: COORDINATOR_NOT_AVAILABLE, nothing created.
		h.ids.err = errors.New("controller away")
		_, err := h.init("third", NoProducer)
		wantErr(t, "InitProducerID without producer ids", err, ErrCoordinatorNotAvailable)
		if _, err := h.c.Describe("third"); !errors.Is(err, ErrTransactionalIDNotFound) {
			t.Fatalf("Describe after a failed allocation: %v", err)
		}
	})
}

// TestZombieFenced: a second producer's InitProducerId over the first one's open
// transaction aborts it with the epoch bumped (the abort markers carry the new epoch)
// and answers CONCURRENT_TRANSACTIONS; its retry gets the epoch after. From then on the
// first producer is refused everywhere (its AddPartitions, AddOffsets, EndTxn, and a
// KIP-360 InitProducerId naming its old epoch), and its data was aborted, not committed.
func TestZombieFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		zombie := h.mustInit("t")
		wantErr(t, "AddPartitions", h.add("t", zombie, tp("a", 0), tp("b", 3)), nil)

		_, err := h.init("t", NoProducer)
		wantErr(t, "InitProducerID over an open transaction", err, ErrConcurrentTransactions)
		synctest.Wait() // the abort's markers and its completion
		calls := h.markers.callList()
		if len(calls) != 1 || calls[0].commit || calls[0].producer != (Producer{1000, 1}) || calls[0].epoch != testEpoch ||
			!slices.Equal(calls[0].partitions, []TopicPartition{tp("a", 0), tp("b", 3)}) {
			t.Fatalf("fence markers: %+v, want one abort by {1000 1} at coordinator epoch %d to a/0 b/3", calls, testEpoch)
		}
		if got := h.store.states("t"); !slices.Equal(got, []State{Empty, Ongoing, PrepareAbort, CompleteAbort}) {
			t.Fatalf("records: %v", got)
		}
		fresh, err := h.init("t", NoProducer)
		if err != nil || fresh != (Producer{1000, 2}) {
			t.Fatalf("the retry: %+v %v, want {1000 2}", fresh, err)
		}

		ctx := context.Background()
		wantErr(t, "the zombie's AddPartitions", h.add("t", zombie, tp("c", 0)), ErrProducerFenced)
		wantErr(t, "the zombie's AddOffsets", h.c.AddOffsets(ctx, "t", zombie, "g"), ErrProducerFenced)
		wantErr(t, "the zombie's EndTxn", h.end("t", zombie, true), ErrProducerFenced)
		_, err = h.c.VerifyPartitions("t", zombie, []TopicPartition{tp("a", 0)})
		wantErr(t, "verifying the zombie's partition", err, ErrProducerFenced)
		_, err = h.init("t", zombie)
		wantErr(t, "the zombie's KIP-360 InitProducerID", err, ErrProducerFenced)

		// The new producer works.
		wantErr(t, "the new producer's AddPartitions", h.add("t", fresh, tp("a", 0)), nil)
		wantErr(t, "the new producer's commit", h.end("t", fresh, true), nil)
		synctest.Wait()
		if d := h.describe("t"); d.State != CompleteCommit || d.ProducerEpoch != 2 {
			t.Fatalf("after the new producer's commit: %+v", d)
		}
	})
}

// TestFenceFailedKeepsEpoch: a fence whose PrepareAbort the store refuses leaves the
// producer fenced in memory at the bumped epoch, and the next attempt fences at that same
// epoch rather than bumping again (Kafka's hasFailedEpochFence).
func TestFenceFailedKeepsEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		wantErr(t, "AddPartitions", h.add("t", p, tp("a", 0)), nil)
		h.store.setErr(errors.New("disk on fire"))
		_, err := h.init("t", NoProducer)
		wantErr(t, "a fence the store refuses", err, ErrNotCoordinator)
		if d := h.describe("t"); d.State != Ongoing || d.ProducerEpoch != 1 {
			t.Fatalf("after the failed fence: %v epoch %d, want Ongoing at epoch 1", d.State, d.ProducerEpoch)
		}
		wantErr(t, "the fenced producer's EndTxn", h.end("t", p, true), ErrProducerFenced)
		h.store.setErr(nil)
		_, err = h.init("t", NoProducer)
		wantErr(t, "the fence again", err, ErrConcurrentTransactions)
		// The abort goes on by itself and may already have completed (its markers wait on
		// nothing in the bubble): PrepareAbort last, or just before CompleteAbort, both at
		// epoch 1 (a CompleteAbort keeps its PrepareAbort's epoch).
		st := h.store.states("t")
		m := h.store.last(t, "t")
		prepared := m.State == PrepareAbort || m.State == CompleteAbort && len(st) >= 2 && st[len(st)-2] == PrepareAbort
		if !prepared || m.ProducerEpoch != 1 {
			t.Fatalf("the fence's records: %v, the last at epoch %d; want PrepareAbort at epoch 1", st, m.ProducerEpoch)
		}
		synctest.Wait()
		if p, err := h.init("t", NoProducer); err != nil || p.Epoch != 2 {
			t.Fatalf("InitProducerID after the abort: %+v %v, want epoch 2", p, err)
		}
	})
}

// TestKIP360: a producer naming its current ID and epoch bumps its own epoch; a retry of
// that (naming the epoch before) gets the same answer; any other producer or epoch is
// fenced; an ID this coordinator does not know (it expired) gets a new producer ID.
func TestKIP360(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p0 := h.mustInit("t")
		p1, err := h.init("t", p0)
		if err != nil || p1 != (Producer{1000, 1}) {
			t.Fatalf("bump by the producer: %+v %v, want {1000 1}", p1, err)
		}
		if m := h.store.last(t, "t"); m.LastProducerEpoch != 0 {
			t.Fatalf("the bump's record keeps epoch %d as the last, want 0", m.LastProducerEpoch)
		}
		if again, err := h.init("t", p0); err != nil || again != p1 {
			t.Fatalf("retry of the bump: %+v %v, want %+v", again, err, p1)
		}
		p2, err := h.init("t", p1)
		if err != nil || p2 != (Producer{1000, 2}) {
			t.Fatalf("second bump: %+v %v", p2, err)
		}
		// Another producer takes the ID over: the last epoch is forgotten, so the old
		// producer's retries are fenced.
		other := h.mustInit("t")
		if other != (Producer{1000, 3}) {
			t.Fatalf("takeover: %+v", other)
		}
		for _, stale := range []Producer{p1, p2, {1000, 7}, {4242, 3}} {
			_, err := h.init("t", stale)
			wantErr(t, "KIP-360 InitProducerID naming a fenced producer", err, ErrProducerFenced)
		}
		if d := h.describe("t"); d.ProducerEpoch != 3 {
			t.Fatalf("refusals changed the epoch to %d", d.ProducerEpoch)
		}
		// Unknown ID with a producer named: a fresh producer ID.
		if p, err := h.init("expired", Producer{77, 3}); err != nil || p != (Producer{1001, 0}) {
			t.Fatalf("KIP-360 InitProducerID of an unknown id: %+v %v, want {1001 0}", p, err)
		}
	})
}

// TestEpochExhaustion: at the last epoch a producer may have, InitProducerId gives a new
// producer ID at epoch 0 (a KIP-360 retry naming the old ID and epoch gets it again); a
// fence of a transaction open at that epoch takes MaxInt16, and the retry gets a new ID.
func TestEpochExhaustion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		now := time.Now()
		m := metaIn(CompleteCommit, now)
		m.ProducerEpoch = exhaustedEpoch - 1
		h.loadState("t", m)
		if p := h.mustInit("t"); p != (Producer{500, exhaustedEpoch}) {
			t.Fatalf("bump to the last epoch: %+v", p)
		}
		p := h.mustInit("t")
		if p != (Producer{1000, 0}) {
			t.Fatalf("at the exhausted epoch: %+v, want a new producer id at epoch 0", p)
		}
		if m := h.store.last(t, "t"); m.PrevProducerID != 500 || m.ProducerID != 1000 {
			t.Fatalf("rotation record: %+v", m)
		}

		// KIP-360 rotation and its retry.
		m = metaIn(CompleteAbort, now)
		m.ProducerEpoch = exhaustedEpoch
		h.loadState("k", m)
		old := Producer{500, exhaustedEpoch}
		got, err := h.init("k", old)
		if err != nil || got != (Producer{1001, 0}) {
			t.Fatalf("KIP-360 at the exhausted epoch: %+v %v, want {1001 0}", got, err)
		}
		if again, err := h.init("k", old); err != nil || again != got {
			t.Fatalf("its retry: %+v %v, want %+v", again, err, got)
		}
		if again, err := h.init("k", got); err != nil || again != (Producer{1001, 1}) {
			t.Fatalf("a bump by the new producer id: %+v %v", again, err)
		}

		// A fence at the exhausted epoch.
		m = metaIn(Ongoing, now)
		m.ProducerEpoch = exhaustedEpoch
		h.loadState("f", m)
		_, err = h.init("f", NoProducer)
		wantErr(t, "fence at the exhausted epoch", err, ErrConcurrentTransactions)
		synctest.Wait()
		calls := h.markers.callList()
		if last := calls[len(calls)-1]; last.producer != (Producer{500, math.MaxInt16}) || last.commit {
			t.Fatalf("fence markers: %+v, want an abort at epoch %d", last, math.MaxInt16)
		}
		if got, err := h.init("f", NoProducer); err != nil || got != (Producer{1002, 0}) {
			t.Fatalf("after the fence: %+v %v, want {1002 0}", got, err)
		}
	})
}
