package objectstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/objectstore/storetest"
)

func newFaulty(t *testing.T, seed uint64) *faulty.Store {
	t.Helper()
	s, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return faulty.New(s, seed)
}

// recorder is a RetryPolicy.Sleep that does not wait and records the delays.
type recorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.delays = append(r.delays, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delays)
}

func policy(rec *recorder) objectstore.RetryPolicy {
	p := objectstore.DefaultRetryPolicy()
	p.Sleep = rec.sleep
	return p
}

func TestRetryTransientThenSuccess(t *testing.T) {
	ctx := context.Background()
	f := newFaulty(t, 1)
	rec := &recorder{}
	r := objectstore.NewRetrying(f, policy(rec))
	data := storetest.Data(1, 10000)

	f.FailNext(faulty.Put, 2, faulty.Throttle)
	f.FailNext(faulty.Put, 1, faulty.Unavailable)
	if err := r.Put(ctx, "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if c := f.Calls(faulty.Put); c != 4 {
		t.Fatalf("put: %d calls, want 4", c)
	}
	// Throttling backs off from ThrottleBaseDelay, unavailability from BaseDelay.
	p := objectstore.DefaultRetryPolicy()
	if len(rec.delays) != 3 || rec.delays[0] < p.ThrottleBaseDelay/2 || rec.delays[0] > p.ThrottleBaseDelay ||
		rec.delays[2] < 2*p.BaseDelay || rec.delays[2] > 4*p.BaseDelay {
		t.Fatalf("delays %v", rec.delays)
	}

	// A Put whose response was lost is retried and lands once more: same object.
	f.FailNext(faulty.Put, 1, faulty.LostResponse)
	if err := r.Put(ctx, "k2", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	f.FailNext(faulty.Head|faulty.Delete|faulty.List, 2, faulty.Unavailable)
	if _, err := r.Head(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	f.FailNext(faulty.List, 3, faulty.Throttle)
	list, err := r.List(ctx, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	f.FailNext(faulty.Get, 3, faulty.Unavailable)
	got, err := objectstore.ReadRange(ctx, r, "k", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
}

func TestRetryRewindsBodyFromItsStart(t *testing.T) {
	ctx := context.Background()
	f := newFaulty(t, 1)
	r := objectstore.NewRetrying(f, policy(&recorder{}))
	data := storetest.Data(2, 5000)
	body := bytes.NewReader(data)
	body.Seek(1000, io.SeekStart)
	// The inner store consumes part of the body and then fails.
	f.Inject(faulty.Rule{Ops: faulty.Put, Times: 1, Fault: faulty.LostResponse})
	if err := r.Put(ctx, "k", body, 4000); err != nil {
		t.Fatal(err)
	}
	got, err := objectstore.ReadRange(ctx, r, "k", 0, -1)
	if err != nil || !bytes.Equal(got, data[1000:]) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
}

func TestRetryNotForPermanentErrors(t *testing.T) {
	ctx := context.Background()
	f := newFaulty(t, 1)
	rec := &recorder{}
	r := objectstore.NewRetrying(f, policy(rec))
	if _, err := r.Head(ctx, "missing"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := r.GetRange(ctx, "missing", 0, -1); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatal(err)
	}
	if err := r.Put(ctx, "k", bytes.NewReader([]byte("abc")), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetRange(ctx, "k", 10, -1); !errors.Is(err, objectstore.ErrInvalidRange) {
		t.Fatal(err)
	}
	if err := r.Put(ctx, "../k", bytes.NewReader(nil), 0); !errors.Is(err, objectstore.ErrInvalidKey) {
		t.Fatal(err)
	}
	if f.Calls(faulty.Head) != 1 || f.Calls(faulty.Get) != 2 || rec.count() != 0 {
		t.Fatalf("permanent errors retried: head %d get %d sleeps %d", f.Calls(faulty.Head), f.Calls(faulty.Get), rec.count())
	}
	// A body that cannot be rewound is not retried.
	f.FailNext(faulty.Put, 1, faulty.Unavailable)
	err := r.Put(ctx, "k2", io.MultiReader(bytes.NewReader([]byte("abc"))), 3)
	if !errors.Is(err, objectstore.ErrUnavailable) || rec.count() != 0 {
		t.Fatalf("non-seekable put: %v, %d sleeps", err, rec.count())
	}
}

func TestRetryGivesUp(t *testing.T) {
	ctx := context.Background()
	f := newFaulty(t, 1)
	rec := &recorder{}
	p := policy(rec)
	p.MaxAttempts = 5
	var retries []int
	p.OnRetry = func(op, key string, attempt int, err error, d time.Duration) {
		if op != "head" || key != "k" || !objectstore.IsTransient(err) {
			t.Errorf("OnRetry(%s, %s, %d, %v)", op, key, attempt, err)
		}
		retries = append(retries, attempt)
	}
	r := objectstore.NewRetrying(f, p)
	f.Inject(faulty.Rule{Ops: faulty.Head, Fault: faulty.Unavailable})
	_, err := r.Head(ctx, "k")
	if !errors.Is(err, objectstore.ErrUnavailable) || f.Calls(faulty.Head) != 5 {
		t.Fatalf("%v after %d calls", err, f.Calls(faulty.Head))
	}
	if len(retries) != 4 || retries[3] != 4 {
		t.Fatalf("OnRetry attempts %v", retries)
	}
	// The backoff doubles up to MaxDelay.
	for i, d := range rec.delays {
		hi := min(p.BaseDelay<<i, p.MaxDelay)
		if d < hi/2 || d > hi {
			t.Fatalf("delay %d = %s, want within [%s, %s]", i, d, hi/2, hi)
		}
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	f := newFaulty(t, 1)
	f.Inject(faulty.Rule{Fault: faulty.Throttle})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := objectstore.DefaultRetryPolicy()
	p.MaxAttempts = 0 // only the context bounds it
	p.BaseDelay, p.ThrottleBaseDelay, p.MaxDelay = time.Microsecond, time.Microsecond, time.Microsecond
	p.OnRetry = func(op, key string, attempt int, err error, d time.Duration) {
		if attempt == 20 {
			cancel()
		}
	}
	r := objectstore.NewRetrying(f, p)
	_, err := r.List(ctx, "")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, objectstore.ErrThrottled) {
		t.Fatalf("%v", err)
	}
	if c := f.Calls(faulty.List); c != 20 {
		t.Fatalf("%d calls, want 20", c)
	}

	// No backoff is started that would outlast the deadline.
	rec := &recorder{}
	p = policy(rec)
	p.BaseDelay = time.Hour
	p.ThrottleBaseDelay = time.Hour
	p.MaxDelay = time.Hour
	r = objectstore.NewRetrying(f, p)
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	defer dcancel()
	_, err = r.Head(dctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, objectstore.ErrThrottled) || rec.count() != 0 {
		t.Fatalf("%v, %d sleeps", err, rec.count())
	}

	// A stalled call ends with the caller's deadline and is not retried.
	f.Clear()
	f.Inject(faulty.Rule{Ops: faulty.Get, Fault: faulty.Stall})
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer scancel()
	calls := f.Calls(faulty.Get)
	_, err = objectstore.NewRetrying(f, policy(&recorder{})).GetRange(sctx, "k", 0, -1)
	if !errors.Is(err, context.DeadlineExceeded) || f.Calls(faulty.Get) != calls+1 {
		t.Fatalf("stalled get: %v", err)
	}
}

func TestRetryResumesBrokenBodies(t *testing.T) {
	ctx := context.Background()
	f := newFaulty(t, 1)
	r := objectstore.NewRetrying(f, policy(&recorder{}))
	data := storetest.Data(3, 100000)
	if err := f.Put(ctx, "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n int64 }{{0, -1}, {500, 50000}, {90000, -1}, {99999, 1}} {
		f.Inject(faulty.Rule{Ops: faulty.Get, Times: 3, Fault: faulty.BreakBody, After: 3000})
		// An open that fails on the way is retried too.
		f.FailNext(faulty.Get, 1, faulty.Unavailable)
		got, err := objectstore.ReadRange(ctx, r, "k", c.off, c.n)
		end := int64(len(data))
		if c.n >= 0 {
			end = c.off + c.n
		}
		if err != nil || !bytes.Equal(got, data[c.off:end]) {
			t.Fatalf("range [%d,+%d): %d bytes, %v", c.off, c.n, len(got), err)
		}
		f.Clear()
	}
	// A body that keeps breaking uses up the attempts.
	p := policy(&recorder{})
	p.MaxAttempts = 4
	f.Inject(faulty.Rule{Ops: faulty.Get, Fault: faulty.BreakBody, After: 1000})
	got, err := objectstore.ReadRange(ctx, objectstore.NewRetrying(f, p), "k", 0, -1)
	if !errors.Is(err, objectstore.ErrUnavailable) {
		t.Fatalf("always-broken body: %d bytes, %v", len(got), err)
	}
}

func TestRetryWithRandomFaults(t *testing.T) {
	// Random throttling and unavailability on every operation, reproducible by seed:
	// everything still succeeds, and the same seed gives the same faults.
	run := func(seed uint64) (int, int) {
		ctx := context.Background()
		f := newFaulty(t, seed)
		f.Inject(faulty.Rule{Probability: 0.2, Fault: faulty.Throttle})
		f.Inject(faulty.Rule{Probability: 0.2, Fault: faulty.Unavailable})
		f.Inject(faulty.Rule{Ops: faulty.Get, Probability: 0.2, Fault: faulty.BreakBody, After: 700})
		p := policy(&recorder{})
		p.MaxAttempts = 30
		r := objectstore.NewRetrying(f, p)
		for i := 0; i < 50; i++ {
			data := storetest.Data(uint64(i), 2000+i)
			key := "k/" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			if err := r.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			got, err := objectstore.ReadRange(ctx, r, key, 0, -1)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %d bytes, %v", key, len(got), err)
			}
		}
		list, err := r.List(ctx, "k/")
		if err != nil || len(list) != 50 {
			t.Fatalf("list: %d, %v", len(list), err)
		}
		return f.Faults(faulty.Throttle) + f.Faults(faulty.Unavailable), f.Faults(faulty.BreakBody)
	}
	a1, b1 := run(42)
	a2, b2 := run(42)
	if a1 == 0 || b1 == 0 || a1 != a2 || b1 != b2 {
		t.Fatalf("faults: seed 42 gave (%d, %d) then (%d, %d)", a1, b1, a2, b2)
	}
}

func TestBackoffBounds(t *testing.T) {
	p := objectstore.DefaultRetryPolicy()
	for retry := 1; retry <= 20; retry++ {
		for i := 0; i < 50; i++ {
			for _, err := range []error{objectstore.ErrUnavailable, objectstore.ErrThrottled} {
				base := p.BaseDelay
				if err == objectstore.ErrThrottled {
					base = p.ThrottleBaseDelay
				}
				hi := p.MaxDelay
				if retry < 12 {
					hi = min(base<<(retry-1), p.MaxDelay)
				}
				d := p.Backoff(retry, err)
				if d < hi/2 || d > hi {
					t.Fatalf("Backoff(%d, %v) = %s, want in [%s, %s]", retry, err, d, hi/2, hi)
				}
			}
		}
	}
}
