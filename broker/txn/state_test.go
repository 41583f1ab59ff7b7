package txn

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// loadState makes id's state m by loading a record of it (partition 0 of 1).
func (h *harness) loadState(id string, m Meta) {
	h.t.Helper()
	if err := h.store.Write(context.Background(), 0, testEpoch, Record{TransactionalID: id, Meta: m}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.c.Load(0, testEpoch, h.store.replay(0)); err != nil {
		h.t.Fatal(err)
	}
}

// metaIn is a state of producer 500 at epoch 5, with partition a/0 when a transaction
// is open.
func metaIn(s State, now time.Time) Meta {
	m := Meta{State: s, ProducerID: 500, ProducerEpoch: 5, PrevProducerID: 500, LastProducerEpoch: NoEpoch,
		Timeout: testTimeout, Updated: now}
	if s.ongoing() {
		m.Partitions, m.Start = []TopicPartition{tp("a", 0)}, now
	}
	return m
}

// TestStateMachine: every operation in every state, as Kafka's TransactionCoordinator
// answers it (but a retried EndTxn in Prepare*, answered OK), the state and epoch it
// leaves and whether it wrote a record; and a producer that is not the ID's current one
// is refused in every state, writing nothing.
func TestStateMachine(t *testing.T) {
	type op struct {
		name string
		run  func(h *harness, p Producer) error
	}
	ops := map[string]op{
		"init": {"InitProducerID", func(h *harness, _ Producer) error { _, err := h.init("t", NoProducer); return err }},
		"add":  {"AddPartitions", func(h *harness, p Producer) error { return h.add("t", p, tp("b", 1)) }},
		"offs": {"AddOffsets", func(h *harness, p Producer) error {
			return h.c.AddOffsets(context.Background(), "t", p, "g")
		}},
		"commit": {"EndTxn(commit)", func(h *harness, p Producer) error { return h.end("t", p, true) }},
		"abort":  {"EndTxn(abort)", func(h *harness, p Producer) error { return h.end("t", p, false) }},
	}
	type want struct {
		err   error
		state State
		epoch int16
		wrote bool
	}
	table := map[State]map[string]want{
		Empty: {
			"init":   {nil, Empty, 6, true},
			"add":    {nil, Ongoing, 5, true},
			"offs":   {nil, Ongoing, 5, true},
			"commit": {ErrInvalidTxnState, Empty, 5, false},
			"abort":  {ErrInvalidTxnState, Empty, 5, false},
		},
		Ongoing: {
			"init":   {ErrConcurrentTransactions, PrepareAbort, 6, true}, // the fence
			"add":    {nil, Ongoing, 5, true},
			"offs":   {nil, Ongoing, 5, true},
			"commit": {nil, PrepareCommit, 5, true},
			"abort":  {nil, PrepareAbort, 5, true},
		},
		PrepareCommit: {
			"init":   {ErrConcurrentTransactions, PrepareCommit, 5, false},
			"add":    {ErrConcurrentTransactions, PrepareCommit, 5, false},
			"offs":   {ErrConcurrentTransactions, PrepareCommit, 5, false},
			"commit": {nil, PrepareCommit, 5, false},
			"abort":  {ErrInvalidTxnState, PrepareCommit, 5, false},
		},
		PrepareAbort: {
			"init":   {ErrConcurrentTransactions, PrepareAbort, 5, false},
			"add":    {ErrConcurrentTransactions, PrepareAbort, 5, false},
			"offs":   {ErrConcurrentTransactions, PrepareAbort, 5, false},
			"commit": {ErrInvalidTxnState, PrepareAbort, 5, false},
			"abort":  {nil, PrepareAbort, 5, false},
		},
		CompleteCommit: {
			"init":   {nil, Empty, 6, true},
			"add":    {nil, Ongoing, 5, true},
			"offs":   {nil, Ongoing, 5, true},
			"commit": {nil, CompleteCommit, 5, false},
			"abort":  {ErrInvalidTxnState, CompleteCommit, 5, false},
		},
		CompleteAbort: {
			"init":   {nil, Empty, 6, true},
			"add":    {nil, Ongoing, 5, true},
			"offs":   {nil, Ongoing, 5, true},
			"commit": {ErrInvalidTxnState, CompleteAbort, 5, false},
			"abort":  {nil, CompleteAbort, 5, false},
		},
	}
	for _, s := range []State{Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort} {
		for _, name := range []string{"init", "add", "offs", "commit", "abort"} {
			o, w := ops[name], table[s][name]
			t.Run(fmt.Sprintf("%v/%s", s, name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					h.markers.setAnswer(block) // Prepare* stays until the test ends
					h.loadState("t", metaIn(s, time.Now()))
					before := len(h.store.states("t"))
					err := o.run(h, Producer{500, 5})
					wantErr(t, o.name, err, w.err)
					synctest.Wait()
					d := h.describe("t")
					if d.State != w.state || d.ProducerEpoch != w.epoch || d.ProducerID != 500 {
						t.Errorf("after %s in %v: %v producer %d epoch %d, want %v producer 500 epoch %d",
							o.name, s, d.State, d.ProducerID, d.ProducerEpoch, w.state, w.epoch)
					}
					if wrote := len(h.store.states("t")) > before; wrote != w.wrote {
						t.Errorf("after %s in %v: wrote a record %v, want %v", o.name, s, wrote, w.wrote)
					}
					if w.wrote && h.store.last(t, "t").State != w.state {
						t.Errorf("the record written is %v, want %v", h.store.last(t, "t").State, w.state)
					}
				})
			})
		}
		t.Run(fmt.Sprintf("%v/not-the-producer", s), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				h.markers.setAnswer(block)
				h.loadState("t", metaIn(s, time.Now()))
				before := len(h.store.states("t"))
				for _, name := range []string{"add", "offs", "commit", "abort"} {
					o := ops[name]
					wantErr(t, o.name+" with an older epoch", o.run(h, Producer{500, 4}), ErrProducerFenced)
					wantErr(t, o.name+" with a newer epoch", o.run(h, Producer{500, 6}), ErrProducerFenced)
					wantErr(t, o.name+" with another producer id", o.run(h, Producer{501, 5}), ErrInvalidProducerIDMapping)
				}
				_, err := h.init("t", Producer{501, 5})
				wantErr(t, "InitProducerID naming another producer id", err, ErrProducerFenced)
				if d := h.describe("t"); d.State != s || d.ProducerEpoch != 5 {
					t.Errorf("refusals changed the state: %v epoch %d", d.State, d.ProducerEpoch)
				}
				if n := len(h.store.states("t")); n != before {
					t.Errorf("refusals wrote %d records", n-before)
				}
			})
		})
	}
}

// TestUnknownIDAndBadRequests: operations on an ID the coordinator does not know, and
// requests malformed whatever the state.
func TestUnknownIDAndBadRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx := context.Background()
		wantErr(t, "AddPartitions of an unknown id", h.add("nobody", Producer{1, 0}, tp("a", 0)), ErrInvalidProducerIDMapping)
		wantErr(t, "AddOffsets of an unknown id", h.c.AddOffsets(ctx, "nobody", Producer{1, 0}, "g"), ErrInvalidProducerIDMapping)
		wantErr(t, "EndTxn of an unknown id", h.end("nobody", Producer{1, 0}, true), ErrInvalidProducerIDMapping)
		_, err := h.c.VerifyPartitions("nobody", Producer{1, 0}, []TopicPartition{tp("a", 0)})
		wantErr(t, "VerifyPartitions of an unknown id", err, ErrInvalidProducerIDMapping)
		_, err = h.c.Describe("nobody")
		wantErr(t, "Describe of an unknown id", err, ErrTransactionalIDNotFound)

		_, err = h.init("", NoProducer)
		wantErr(t, "InitProducerID without an id", err, ErrInvalidRequest)
		wantErr(t, "AddPartitions without an id", h.add("", Producer{1, 0}), ErrInvalidRequest)
		wantErr(t, "EndTxn without an id", h.end("", Producer{1, 0}, true), ErrInvalidRequest)
		_, err = h.init("t", Producer{ID: 5, Epoch: NoEpoch})
		wantErr(t, "InitProducerID with a producer id and no epoch", err, ErrInvalidRequest)
		_, err = h.init("t", Producer{ID: NoProducerID, Epoch: 3})
		wantErr(t, "InitProducerID with an epoch and no producer id", err, ErrInvalidRequest)
		for _, d := range []time.Duration{0, -time.Second, h.cfg.MaxTimeout + time.Millisecond} {
			_, err = h.c.InitProducerID(ctx, "t", d, NoProducer)
			wantErr(t, fmt.Sprintf("InitProducerID with timeout %v", d), err, ErrInvalidTimeout)
		}
		if _, err := h.c.InitProducerID(ctx, "t", h.cfg.MaxTimeout, NoProducer); err != nil {
			t.Fatalf("InitProducerID at the maximum timeout: %v", err)
		}
		if n := len(h.store.states("nobody")); n != 0 {
			t.Fatalf("refused requests wrote %d records", n)
		}
	})
}

// TestConcurrentChangeRefused: while a change of an ID is being made durable, every
// other change of it but an addition is answered CONCURRENT_TRANSACTIONS; an addition
// waits for it and is written next (a client adds partitions from each broker
// connection at once), and an addition pending refuses an outcome likewise.
func TestConcurrentChangeRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := h.mustInit("t")
		release, done := h.addInFlight("t", p, tp("a", 0))
		_, err := h.init("t", NoProducer)
		wantErr(t, "InitProducerID", err, ErrConcurrentTransactions)
		wantErr(t, "EndTxn", h.end("t", p, true), ErrConcurrentTransactions)
		second := make(chan error, 1)
		go func() { second <- h.add("t", p, tp("b", 0)) }()
		synctest.Wait() // the second addition waits for the first
		select {
		case err := <-second:
			t.Fatalf("the second AddPartitions answered %v while the first was being written", err)
		default:
		}
		release()
		wantErr(t, "the first AddPartitions", <-done, nil)
		wantErr(t, "the second AddPartitions", <-second, nil)
		if d := h.describe("t"); d.State != Ongoing || len(d.Partitions) != 2 {
			t.Fatalf("after the adds: %+v", d)
		}
		// An addition waiting gives up with its context, answered retriable.
		release, done = h.addInFlight("t", p, tp("c", 0))
		ctx, cancel := context.WithCancel(context.Background())
		go func() { second <- h.c.AddPartitions(ctx, "t", p, []TopicPartition{tp("d", 0)}) }()
		synctest.Wait()
		cancel()
		wantErr(t, "an addition whose context ended", <-second, ErrConcurrentTransactions)
		release()
		wantErr(t, "the third AddPartitions", <-done, nil)
		// An addition behind a commit's prepare being written is refused at once.
		held := make(chan struct{})
		h.store.setHook(func(Record) { <-held })
		go func() { second <- h.end("t", p, true) }()
		synctest.Wait() // the prepare waits in the store
		h.store.setHook(nil)
		wantErr(t, "AddPartitions behind a prepare", h.add("t", p, tp("e", 0)), ErrConcurrentTransactions)
		close(held)
		wantErr(t, "the commit", <-second, nil)
	})
}
