package txn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestLoadKeepsLatest: records of several IDs interleaved in the log; each ID's latest
// record is its state, a tombstone removes the ID, and a record after a tombstone starts
// it afresh. Records of IDs another partition holds are skipped.
func TestLoadKeepsLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Partitions = 2 })
		now := time.Now().UTC().Truncate(time.Millisecond)
		at := func(s State, pid int64, epoch int16, tps ...TopicPartition) Meta {
			m := Meta{State: s, ProducerID: pid, ProducerEpoch: epoch, PrevProducerID: pid, LastProducerEpoch: NoEpoch,
				Timeout: testTimeout, Updated: now, Partitions: tps}
			if s.ongoing() {
				m.Start = now
			}
			return m
		}
		// IDs of partition 0 (and one of partition 1), found by their hash.
		var ids, foreign []string
		for i := 0; len(ids) < 3 || len(foreign) < 1; i++ {
			id := string(rune('a'+i%26)) + string(rune('0'+i/26))
			if PartitionFor(id, 2) == 0 {
				ids = append(ids, id)
			} else {
				foreign = append(foreign, id)
			}
		}
		a, b, c := ids[0], ids[1], ids[2]
		log := []Record{
			{a, at(Empty, 1, 0)},
			{b, at(Empty, 2, 0)},
			{a, at(Ongoing, 1, 0, tp("x", 0))},
			{foreign[0], at(Empty, 9, 9)},
			{b, at(Dead, 2, 0)},
			{c, at(Empty, 3, 0)},
			{a, at(Ongoing, 1, 0, tp("x", 0), tp("x", 1))},
			{c, at(Dead, 3, 0)},
			{c, at(Empty, 4, 5)},
		}
		replay := func(apply func(Record)) error {
			for _, r := range log {
				k, v := EncodeRecord(r)
				rec, err := DecodeRecord(k, v)
				if err != nil {
					return err
				}
				apply(rec)
			}
			return nil
		}
		st, err := h.c.Load(0, 3, replay)
		if err != nil {
			t.Fatal(err)
		}
		if st != (LoadStats{Records: 8, IDs: 2, Resumed: 0, Foreign: 1}) {
			t.Fatalf("stats %+v", st)
		}
		if d := h.describe(a); d.State != Ongoing || !slices.Equal(d.Partitions, []TopicPartition{tp("x", 0), tp("x", 1)}) || !d.Start.Equal(now) {
			t.Fatalf("%s: %+v, want its last record", a, d)
		}
		if _, err := h.c.Describe(b); !errors.Is(err, ErrTransactionalIDNotFound) {
			t.Fatalf("%s after its tombstone: %v", b, err)
		}
		if d := h.describe(c); d.ProducerID != 4 || d.ProducerEpoch != 5 || d.State != Empty {
			t.Fatalf("%s recreated after its tombstone: %+v", c, d)
		}
		// The loaded state is the one operations go on from.
		wantErr(t, "EndTxn of the loaded transaction", h.end(a, Producer{1, 0}, false), nil)
		synctest.Wait()
		if calls := h.markers.callList(); len(calls) != 1 || calls[0].epoch != 3 || len(calls[0].partitions) != 2 {
			t.Fatalf("markers: %+v, want x/0 and x/1 at coordinator epoch 3", calls)
		}
		if m := h.store.last(t, a); m.State != CompleteAbort || m.ProducerID != 1 {
			t.Fatalf("record after the abort: %+v", m)
		}
	})
}

// TestLoadingAndOwnership: while a partition's records are replayed its IDs get
// COORDINATOR_LOAD_IN_PROGRESS (ListTransactions too); a failed replay leaves it so until
// a Load succeeds; a partition never loaded, or unloaded, gets NOT_COORDINATOR; a Load of
// a loaded partition replaces what was there.
func TestLoadingAndOwnership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Partitions = 2 })
		var id0, id1 string
		for i := 0; id0 == "" || id1 == ""; i++ {
			id := "id-" + string(rune('a'+i))
			if PartitionFor(id, 2) == 0 {
				id0 = id
			} else {
				id1 = id
			}
		}
		h.c.Unload(1)
		_, err := h.init(id1, NoProducer)
		wantErr(t, "InitProducerID of an unloaded partition", err, ErrNotCoordinator)
		h.mustInit(id0)

		proceed := make(chan struct{})
		loaded := make(chan error, 1)
		go func() {
			_, err := h.c.Load(0, 8, func(apply func(Record)) error {
				<-proceed
				return h.store.replay(0)(apply)
			})
			loaded <- err
		}()
		synctest.Wait()
		_, err = h.init(id0, NoProducer)
		wantErr(t, "InitProducerID while loading", err, ErrLoadInProgress)
		_, err = h.c.Describe(id0)
		wantErr(t, "Describe while loading", err, ErrLoadInProgress)
		_, _, err = h.c.List(ListFilter{})
		wantErr(t, "List while loading", err, ErrLoadInProgress)
		close(proceed)
		if err := <-loaded; err != nil {
			t.Fatal(err)
		}
		if p := h.mustInit(id0); p.Epoch != 1 {
			t.Fatalf("after the reload: %+v, want epoch 1 (the record before it was replayed)", p)
		}

		boom := errors.New("read failed")
		if _, err := h.c.Load(0, 9, func(func(Record)) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("a failed load: %v", err)
		}
		_, err = h.init(id0, NoProducer)
		wantErr(t, "InitProducerID after a failed load", err, ErrLoadInProgress)
		if _, err := h.c.Load(0, 9, h.store.replay(0)); err != nil {
			t.Fatal(err)
		}
		if p := h.mustInit(id0); p.Epoch != 2 {
			t.Fatalf("after the retried load: %+v", p)
		}
		if _, err := h.c.Load(2, 1, h.store.replay(2)); err == nil {
			t.Fatal("Load of a partition out of range succeeded")
		}
		h.c.Close()
		_, err = h.init(id0, NoProducer)
		wantErr(t, "InitProducerID after Close", err, ErrCoordinatorNotAvailable)
		if _, err := h.c.Load(0, 9, h.store.replay(0)); !errors.Is(err, ErrCoordinatorNotAvailable) {
			t.Fatalf("Load after Close: %v", err)
		}
	})
}

// TestWriteAcrossUnload: a change whose record is being written when its partition is
// unloaded (and loaded again) is answered NOT_COORDINATOR and not applied: the reload's
// state stands.
func TestWriteAcrossUnload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		release, done := h.addInFlight("t", p, tp("a", 0))
		if _, err := h.c.Load(0, testEpoch+1, h.store.replay(0)); err != nil {
			t.Fatal(err)
		}
		release()
		wantErr(t, "AddPartitions across a reload", <-done, ErrNotCoordinator)
		if d := h.describe("t"); d.State != Empty {
			t.Fatalf("the reloaded state changed: %v", d.State)
		}
	})
}

// TestStoreErrorsMapped: the store's errors reach the client as Kafka's coordinator
// maps log-append errors, and the state is unchanged.
func TestStoreErrorsMapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		for _, c := range []struct {
			err  error
			want error
		}{
			{errors.New("plain I/O error"), ErrNotCoordinator},
			{codedErr(6), ErrNotCoordinator},  // NOT_LEADER_OR_FOLLOWER
			{codedErr(56), ErrNotCoordinator}, // KAFKA_STORAGE_ERROR
			{codedErr(7), ErrCoordinatorNotAvailable},
			{codedErr(19), ErrCoordinatorNotAvailable},
			{codedErr(3), ErrCoordinatorNotAvailable},
			{codedErr(10), ErrRecordTooLarge},
			{codedErr(14), ErrLoadInProgress},
			{context.DeadlineExceeded, ErrCoordinatorNotAvailable},
			{kerr.NotEnoughReplicasAfterAppend, ErrCoordinatorNotAvailable}, // another broker's answer
			{kerr.InvalidRequest, kerr.InvalidRequest},                      // passed through
		} {
			h.store.setErr(c.err)
			wantErr(t, "AddPartitions with store error "+c.err.Error(), h.add("t", p, tp("a", 0)), c.want)
			if d := h.describe("t"); d.State != Empty {
				t.Fatalf("state changed by a failed write: %v", d.State)
			}
		}
		h.store.setErr(nil)
		wantErr(t, "AddPartitions", h.add("t", p, tp("a", 0)), nil)
	})
}
