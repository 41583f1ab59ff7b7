package txn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestTimeoutAbortsWithEpochBump: the abort round, every AbortCheckInterval, aborts a
// transaction open past its timeout with the producer's epoch bumped (the markers carry
// it), so the producer that let it time out is fenced; a transaction within its timeout,
// and one whose outcome is decided, are left alone.
func TestTimeoutAbortsWithEpochBump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.AbortCheckInterval = 5 * time.Second })
		ctx := context.Background()
		slow, err := h.c.InitProducerID(ctx, "slow", 30*time.Second, NoProducer)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "AddPartitions", h.add("slow", slow, tp("a", 0)), nil)
		patient, err := h.c.InitProducerID(ctx, "patient", 10*time.Minute, NoProducer)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "AddPartitions", h.add("patient", patient, tp("b", 0)), nil)

		time.Sleep(30 * time.Second) // on purpose (fake time): exactly the timeout, not past it yet
		synctest.Wait()
		if d := h.describe("slow"); d.State != Ongoing {
			t.Fatalf("at its timeout: %v, want Ongoing", d.State)
		}
		time.Sleep(5 * time.Second) // on purpose (fake time): the next abort round
		synctest.Wait()
		d := h.describe("slow")
		if d.State != CompleteAbort || d.ProducerEpoch != slow.Epoch+1 {
			t.Fatalf("past its timeout: %v epoch %d, want CompleteAbort at epoch %d", d.State, d.ProducerEpoch, slow.Epoch+1)
		}
		calls := h.markers.callList()
		if len(calls) != 1 || calls[0].commit || calls[0].producer != (Producer{slow.ID, slow.Epoch + 1}) ||
			!slices.Equal(calls[0].partitions, []TopicPartition{tp("a", 0)}) {
			t.Fatalf("markers: %+v, want one abort at the bumped epoch to a/0", calls)
		}
		wantErr(t, "the timed-out producer's commit", h.end("slow", slow, true), ErrProducerFenced)
		if d := h.describe("patient"); d.State != Ongoing || d.ProducerEpoch != patient.Epoch {
			t.Fatalf("a transaction within its timeout: %v epoch %d", d.State, d.ProducerEpoch)
		}
		if n := h.c.AbortTimedOut(); n != 0 {
			t.Fatalf("AbortTimedOut again aborted %d", n)
		}
		if got := h.store.states("slow"); !slices.Equal(got, []State{Empty, Ongoing, PrepareAbort, CompleteAbort}) {
			t.Fatalf("records: %v", got)
		}
	})
}

// TestExpiration: an ID with no transaction open that has not changed for IDExpiration
// is forgotten after a durable tombstone (its next InitProducerId gets a new producer
// ID, and a reload does not bring it back); an ID with a transaction open never expires;
// a refused tombstone keeps the ID.
func TestExpiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.IDExpiration = time.Hour
			c.ExpirationCheckInterval = 10 * time.Minute
			c.MaxTimeout = 24 * time.Hour
		})
		idle := h.mustInit("idle")
		open, err := h.c.InitProducerID(context.Background(), "open", 12*time.Hour, NoProducer)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "AddPartitions", h.add("open", open, tp("a", 0)), nil)
		time.Sleep(30 * time.Minute) // on purpose (fake time): "busy" changes later than "idle"
		h.mustInit("busy")           // changed half an hour later

		time.Sleep(40 * time.Minute) // on purpose (fake time): at 70 min "idle" is past an hour
		synctest.Wait()
		if _, err := h.c.Describe("idle"); !errors.Is(err, ErrTransactionalIDNotFound) {
			t.Fatalf("Describe of the expired id: %v", err)
		}
		if m := h.store.last(t, "idle"); m.State != Dead {
			t.Fatalf("last record of the expired id: %v, want its tombstone", m.State)
		}
		h.describe("busy")
		h.describe("open")

		if p := h.mustInit("idle"); p.ID == idle.ID || p.Epoch != 0 {
			t.Fatalf("InitProducerID of the expired id: %+v, want a new producer id at epoch 0", p)
		}
		// A reload agrees with memory.
		c2 := h.start()
		if _, err := c2.Load(0, testEpoch, h.store.replay(0)); err != nil {
			t.Fatal(err)
		}
		if d, err := c2.Describe("idle"); err != nil || d.ProducerID == idle.ID {
			t.Fatalf("reloaded: %+v %v", d, err)
		}

		// The store refusing tombstones: the ids stay, and go at a round after it heals.
		h.store.setErr(errors.New("disk full"))
		time.Sleep(2 * time.Hour) // on purpose (fake time): several expiration rounds, all refused
		synctest.Wait()
		h.describe("busy")
		h.describe("idle")
		h.store.setErr(nil)
		time.Sleep(10 * time.Minute) // on purpose (fake time): the next expiration round
		synctest.Wait()
		for _, id := range []string{"busy", "idle"} {
			if _, err := h.c.Describe(id); !errors.Is(err, ErrTransactionalIDNotFound) {
				t.Fatalf("Describe(%q) once the store took the tombstone: %v", id, err)
			}
		}
		if d := h.describe("open"); d.State != Ongoing {
			t.Fatalf("an open transaction expired: %v", d.State)
		}
	})
}
