package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/localfs"
)

func newStore(t *testing.T, seed uint64) *faulty.Store {
	t.Helper()
	s, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return faulty.New(s, seed)
}

func TestRules(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 1)
	put := func(key string) error { return s.Put(ctx, key, bytes.NewReader([]byte("data")), 4) }

	// Throttle and Unavailable fail before the inner store: nothing is written.
	s.FailNext(faulty.Put, 1, faulty.Throttle)
	s.FailNext(faulty.Put, 1, faulty.Unavailable)
	if err := put("a"); !errors.Is(err, objectstore.ErrThrottled) {
		t.Fatal(err)
	}
	if err := put("a"); !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "a"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("failed put wrote: %v", err)
	}
	if err := put("a"); err != nil {
		t.Fatal(err)
	}

	// LostResponse performs the call and reports a failure.
	s.FailNext(faulty.Put|faulty.Delete, 2, faulty.LostResponse)
	if err := put("b"); !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "b"); err != nil {
		t.Fatalf("lost-response put did not write: %v", err)
	}
	if err := s.Delete(ctx, "b"); !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "b"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("lost-response delete did not delete: %v", err)
	}

	// KeyPrefix limits a rule to some keys.
	s.Inject(faulty.Rule{KeyPrefix: "bad/", Fault: faulty.Unavailable})
	if err := put("bad/x"); !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if err := put("good/x"); err != nil {
		t.Fatal(err)
	}
	s.Clear()

	// BreakBody delivers After bytes, then fails.
	s.Inject(faulty.Rule{Ops: faulty.Get, Times: 1, Fault: faulty.BreakBody, After: 2})
	rc, err := s.GetRange(ctx, "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if string(got) != "da" || !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatalf("broken body: %q %v", got, err)
	}

	// Stall waits for the caller's context.
	s.FailNext(faulty.List, 1, faulty.Stall)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := s.List(sctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}

	if s.Calls(faulty.Put) != 6 || s.Faults(faulty.LostResponse) != 2 || s.Faults(faulty.Stall) != 1 {
		t.Fatalf("counters: puts %d lost %d stalls %d", s.Calls(faulty.Put), s.Faults(faulty.LostResponse), s.Faults(faulty.Stall))
	}
	if faulty.AnyOp.String() != "put|get|head|delete|list" {
		t.Fatal(faulty.AnyOp.String())
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []bool {
		s := newStore(t, seed)
		s.Inject(faulty.Rule{Probability: 0.5, Fault: faulty.Unavailable})
		var out []bool
		for i := 0; i < 64; i++ {
			_, err := s.Head(context.Background(), "k")
			out = append(out, errors.Is(err, objectstore.ErrUnavailable))
		}
		return out
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	faults := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different faults")
		}
		if a[i] {
			faults++
		}
	}
	if faults == 0 || faults == len(a) {
		t.Fatalf("%d of %d calls faulted at p=0.5", faults, len(a))
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds, same 64 faults")
	}
}

// LatePut fails the call as a timed-out request (not retried by Retrying) and writes
// nothing until DeliverLate, which then lands the old body over whatever is there.
func TestLatePut(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 1)
	s.FailNext(faulty.Put, 1, faulty.LatePut)
	r := objectstore.NewRetrying(s, objectstore.DefaultRetryPolicy())
	if err := r.Put(ctx, "k", bytes.NewReader([]byte("first")), 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("late put: %v", err)
	}
	if s.Calls(faulty.Put) != 1 {
		t.Fatalf("%d put calls: a late put was retried", s.Calls(faulty.Put))
	}
	if _, err := s.Head(ctx, "k"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("late put landed early: %v", err)
	}
	if err := s.Put(ctx, "k", bytes.NewReader([]byte("second!")), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliverLate(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := objectstore.ReadRange(ctx, s, "k", 0, -1)
	if err != nil || string(got) != "first" {
		t.Fatalf("after the late delivery: %q, %v", got, err)
	}
	if err := s.DeliverLate(ctx); err != nil {
		t.Fatal(err) // nothing left to deliver
	}
}
