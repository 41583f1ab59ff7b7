package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// RetryPolicy configures Retrying. The zero value is not useful: start from
// DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one operation, the first one included
	// (1 = no retries). 0 or less: no bound other than the context.
	MaxAttempts int
	// BaseDelay is the backoff before the first retry after ErrUnavailable; it doubles
	// with each retry up to MaxDelay.
	BaseDelay time.Duration
	// ThrottleBaseDelay replaces BaseDelay after ErrThrottled (503 SlowDown): a store
	// that asks to slow down gets a longer pause.
	ThrottleBaseDelay time.Duration
	// MaxDelay caps one backoff.
	MaxDelay time.Duration

	// OnRetry, if set, is called before each backoff (for logs): the operation ("put",
	// "get", "head", "delete", "list"), the key or prefix, the attempt that failed
	// (1-based), its error and the coming delay.
	OnRetry func(op, key string, attempt int, err error, delay time.Duration)
	// Sleep waits d or until ctx ends (then it returns ctx.Err()). Nil: a timer. Tests
	// replace it to run without real waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultRetryPolicy: 8 attempts, 50 ms doubling to 5 s (200 ms after a SlowDown); the
// worst case waits about 15 s in all before giving up.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:       8,
		BaseDelay:         50 * time.Millisecond,
		ThrottleBaseDelay: 200 * time.Millisecond,
		MaxDelay:          5 * time.Second,
	}
}

// Retrying wraps a Store and retries operations that fail with ErrThrottled or
// ErrUnavailable, with exponential backoff and jitter, until an attempt succeeds,
// MaxAttempts is reached or the context ends (it does not start a backoff that would
// outlast the context's deadline). Any other error (ErrNotFound, ErrInvalidRange,
// ErrInvalidKey, the context's, configuration errors) is returned at once.
//
// Put is retried only if its body implements io.Seeker: it is rewound to where it was
// when Put was called. The reader GetRange returns resumes a transfer that broke with a
// transient error (a reset in the middle of a body) from the first byte not yet
// delivered, within the same attempt budget.
//
// The error after the last attempt wraps the last attempt's error; when the context
// ends during a backoff, the error wraps both the context's error and the last one.
type Retrying struct {
	inner  Store
	policy RetryPolicy
}

var _ Store = (*Retrying)(nil)

// NewRetrying wraps inner with policy.
func NewRetrying(inner Store, policy RetryPolicy) *Retrying {
	if policy.BaseDelay <= 0 {
		policy.BaseDelay = time.Millisecond
	}
	if policy.ThrottleBaseDelay <= 0 {
		policy.ThrottleBaseDelay = policy.BaseDelay
	}
	if policy.MaxDelay < policy.BaseDelay {
		policy.MaxDelay = policy.BaseDelay
	}
	if policy.MaxDelay < policy.ThrottleBaseDelay {
		policy.MaxDelay = policy.ThrottleBaseDelay
	}
	if policy.Sleep == nil {
		policy.Sleep = sleep
	}
	return &Retrying{inner: inner, policy: policy}
}

// Unwrap returns the wrapped store.
func (r *Retrying) Unwrap() Store { return r.inner }

func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Backoff returns the delay before retry number retry (1 = the first retry) after err:
// exponential from BaseDelay (ThrottleBaseDelay after ErrThrottled) capped at MaxDelay,
// with "equal jitter": uniformly random in [d/2, d].
func (p RetryPolicy) Backoff(retry int, err error) time.Duration {
	base := p.BaseDelay
	if errors.Is(err, ErrThrottled) && p.ThrottleBaseDelay > 0 {
		base = p.ThrottleBaseDelay
	}
	d := base
	for i := 1; i < retry && d < p.MaxDelay; i++ {
		d *= 2
	}
	if d > p.MaxDelay {
		d = p.MaxDelay
	}
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// wait decides whether attempt (1-based) may be followed by another after err, and
// waits the backoff. It returns nil to retry, or the error to give up with.
func (r *Retrying) wait(ctx context.Context, op, key string, attempt int, err error) error {
	if !IsTransient(err) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (after %d attempts: %w)", cerr, attempt, err)
	}
	if r.policy.MaxAttempts > 0 && attempt >= r.policy.MaxAttempts {
		return fmt.Errorf("objectstore: %s %q: giving up after %d attempts: %w", op, key, attempt, err)
	}
	d := r.policy.Backoff(attempt, err)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Errorf("%w (no time left for retry %d: %w)", context.DeadlineExceeded, attempt, err)
	}
	if r.policy.OnRetry != nil {
		r.policy.OnRetry(op, key, attempt, err, d)
	}
	if serr := r.policy.Sleep(ctx, d); serr != nil {
		return fmt.Errorf("%w (after %d attempts: %w)", serr, attempt, err)
	}
	return nil
}

func (r *Retrying) do(ctx context.Context, op, key string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if werr := r.wait(ctx, op, key, attempt, err); werr != nil {
			return werr
		}
	}
}

// Put implements Store.
func (r *Retrying) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	seeker, ok := body.(io.Seeker)
	if !ok {
		return r.inner.Put(ctx, key, body, size)
	}
	start, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil {
		return r.inner.Put(ctx, key, body, size)
	}
	first := true
	return r.do(ctx, "put", key, func() error {
		if !first {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("objectstore: put %q: rewinding body: %w", key, err)
			}
		}
		first = false
		return r.inner.Put(ctx, key, body, size)
	})
}

// Head implements Store.
func (r *Retrying) Head(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := r.do(ctx, "head", key, func() (err error) {
		info, err = r.inner.Head(ctx, key)
		return err
	})
	return info, err
}

// Delete implements Store.
func (r *Retrying) Delete(ctx context.Context, key string) error {
	return r.do(ctx, "delete", key, func() error { return r.inner.Delete(ctx, key) })
}

// List implements Store.
func (r *Retrying) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := r.do(ctx, "list", prefix, func() (err error) {
		out, err = r.inner.List(ctx, prefix)
		return err
	})
	return out, err
}

// GetRange implements Store.
func (r *Retrying) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rr := &resumingReader{r: r, ctx: ctx, key: key, offset: offset, length: length}
	if err := rr.open(); err != nil {
		return nil, err
	}
	return rr, nil
}

// resumingReader reopens a range after a transient read error, from the first byte
// it has not delivered yet. All opens and resumes share one attempt budget.
type resumingReader struct {
	r      *Retrying
	ctx    context.Context
	key    string
	offset int64 // of the next byte to deliver
	length int64 // bytes left to deliver, -1 = to the end
	rc     io.ReadCloser

	attempts int
	done     bool
	err      error // sticky: a resume that failed
}

// open (re)opens the remaining range, retrying transient errors.
func (rr *resumingReader) open() error {
	for {
		rr.attempts++
		rc, err := rr.r.inner.GetRange(rr.ctx, rr.key, rr.offset, rr.length)
		if err == nil {
			rr.rc = rc
			return nil
		}
		if werr := rr.r.wait(rr.ctx, "get", rr.key, rr.attempts, err); werr != nil {
			return werr
		}
	}
}

func (rr *resumingReader) Read(p []byte) (int, error) {
	if rr.done {
		return 0, io.EOF
	}
	if rr.err != nil {
		return 0, rr.err
	}
	if rr.rc == nil {
		return 0, fmt.Errorf("objectstore: get %q: read after close", rr.key)
	}
	if rr.length >= 0 && int64(len(p)) > rr.length {
		p = p[:rr.length]
	}
	if len(p) == 0 {
		if rr.length == 0 {
			rr.done = true
			return 0, io.EOF
		}
		return 0, nil
	}
	n, err := rr.rc.Read(p)
	rr.offset += int64(n)
	if rr.length >= 0 {
		rr.length -= int64(n)
	}
	if err == nil || err == io.EOF {
		if err == io.EOF {
			rr.done = true
		}
		return n, err
	}
	if !IsTransient(err) {
		return n, err
	}
	// Broken transfer: give back what we have; the next Read resumes.
	rr.rc.Close()
	rr.rc = nil
	if werr := rr.r.wait(rr.ctx, "get", rr.key, rr.attempts, err); werr != nil {
		rr.err = werr
		return n, werr
	}
	if oerr := rr.open(); oerr != nil {
		rr.err = oerr
		return n, oerr
	}
	return n, nil
}

func (rr *resumingReader) Close() error {
	if rr.rc == nil {
		return nil
	}
	err := rr.rc.Close()
	rr.rc = nil
	return err
}
