package txn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestDescribeAndList: Describe shows an ID's producer, state, timeout, start and
// partitions; List filters by state, producer ID and duration, and names the states it
// does not know.
func TestDescribeAndList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		start := time.Now()
		busy := h.openTxn("busy", tp("b", 1), tp("a", 2), tp("a", 0))
		idle := h.mustInit("idle")
		d := h.describe("busy")
		want := Description{TransactionalID: "busy", State: Ongoing, ProducerID: busy.ID, ProducerEpoch: busy.Epoch,
			Timeout: testTimeout, Start: start, Partitions: []TopicPartition{tp("a", 0), tp("a", 2), tp("b", 1)}}
		if !d.Start.Equal(want.Start) || d.State != want.State || d.ProducerID != want.ProducerID ||
			d.Timeout != want.Timeout || !slices.Equal(d.Partitions, want.Partitions) {
			t.Fatalf("Describe: %+v, want %+v", d, want)
		}
		if d := h.describe("idle"); !d.Start.IsZero() || len(d.Partitions) != 0 || d.State != Empty {
			t.Fatalf("Describe of an idle id: %+v", d)
		}

		time.Sleep(time.Minute) // on purpose (fake time): the transaction's age for the duration filter
		names := func(l []Listing) []string {
			var out []string
			for _, x := range l {
				out = append(out, x.TransactionalID)
			}
			return out
		}
		for _, c := range []struct {
			f       ListFilter
			want    []string
			unknown []string
		}{
			{ListFilter{}, []string{"busy", "idle"}, nil},
			{ListFilter{States: []string{"Ongoing"}}, []string{"busy"}, nil},
			{ListFilter{States: []string{"Empty", "Bogus"}}, []string{"idle"}, []string{"Bogus"}},
			{ListFilter{States: []string{"PrepareEpochFence"}}, nil, nil},
			{ListFilter{ProducerIDs: []int64{idle.ID}}, []string{"idle"}, nil},
			{ListFilter{ProducerIDs: []int64{424242}}, nil, nil},
			{ListFilter{MinDuration: 30 * time.Second}, []string{"busy", "idle"}, nil},
			{ListFilter{MinDuration: 2 * time.Minute, States: []string{"Ongoing"}}, nil, nil},
		} {
			got, unknown, err := h.c.List(c.f)
			if err != nil || !slices.Equal(names(got), c.want) || !slices.Equal(unknown, c.unknown) {
				t.Errorf("List(%+v): %v unknown %v err %v, want %v unknown %v", c.f, names(got), unknown, err, c.want, c.unknown)
			}
		}
	})
}

// TestVerifyPartitions: KIP-890's verification answers per partition whether it is in
// the producer's open transaction, durable additions only.
func TestVerifyPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		ask := []TopicPartition{tp("a", 0), tp("b", 0)}
		errs, err := h.c.VerifyPartitions("t", p, ask)
		if err != nil || !errors.Is(errs[0], ErrNotInTransaction) || !errors.Is(errs[1], ErrNotInTransaction) {
			t.Fatalf("with no transaction: %v %v", errs, err)
		}
		wantErr(t, "AddPartitions", h.add("t", p, tp("a", 0)), nil)
		errs, err = h.c.VerifyPartitions("t", p, ask)
		if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrNotInTransaction) {
			t.Fatalf("with a/0 added: %v %v", errs, err)
		}
		_, err = h.c.VerifyPartitions("t", Producer{p.ID, p.Epoch + 1}, ask)
		wantErr(t, "verify with another epoch", err, ErrProducerFenced)
		_, err = h.c.VerifyPartitions("t", Producer{p.ID + 1, p.Epoch}, ask)
		wantErr(t, "verify with another producer id", err, ErrInvalidProducerIDMapping)

		h.markers.setAnswer(block)
		wantErr(t, "EndTxn", h.end("t", p, true), nil)
		_, err = h.c.VerifyPartitions("t", p, ask)
		wantErr(t, "verify while committing", err, ErrConcurrentTransactions)
		h.markers.setAnswer(nil)
		if _, err := h.c.Load(0, testEpoch, h.store.replay(0)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		errs, err = h.c.VerifyPartitions("t", p, ask)
		if err != nil || !errors.Is(errs[0], ErrNotInTransaction) {
			t.Fatalf("after the commit: %v %v", errs, err)
		}
	})
}

// TestAddOffsets: AddOffsetsToTxn adds the group's __consumer_offsets partition (so the
// markers reach it) and the group; adding it again writes nothing.
func TestAddOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.openTxn("t", tp("a", 0))
		ctx := context.Background()
		wantErr(t, "AddOffsets", h.c.AddOffsets(ctx, "t", p, "grp"), nil) // partition len("grp")
		n := len(h.store.states("t"))
		wantErr(t, "AddOffsets again", h.c.AddOffsets(ctx, "t", p, "grp"), nil)
		wantErr(t, "AddPartitions again", h.add("t", p, tp("a", 0)), nil)
		if len(h.store.states("t")) != n {
			t.Fatal("adding what is in the transaction wrote a record")
		}
		m := h.store.last(t, "t")
		if !slices.Equal(m.Partitions, []TopicPartition{tp("__consumer_offsets", 3), tp("a", 0)}) || !slices.Equal(m.Groups, []string{"grp"}) {
			t.Fatalf("record: partitions %v groups %v", m.Partitions, m.Groups)
		}
		wantErr(t, "EndTxn", h.end("t", p, true), nil)
		synctest.Wait()
		if calls := h.markers.callList(); len(calls) != 1 || !slices.Contains(calls[0].partitions, tp(OffsetsTopic, 3)) {
			t.Fatalf("markers: %+v, want the offsets partition among them", calls)
		}
		if m := h.store.last(t, "t"); len(m.Groups) != 0 || len(m.Partitions) != 0 {
			t.Fatalf("completed record keeps %v %v", m.Partitions, m.Groups)
		}
	})
}
