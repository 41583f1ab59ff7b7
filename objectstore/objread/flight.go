package objread

import (
	"context"
	"errors"
	"sync"
)

// flight coalesces concurrent loads of the same key (an index, a block) into one
// request: the first caller to claim a key owns the load and must finish it; the others
// wait for its result. Unlike a plain singleflight, claimMany claims several keys under
// one lock, so two readers of overlapping blocks never split a run between them.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]
}

// call is one load in flight. val and err are written once, before done is closed.
type call[V any] struct {
	done chan struct{}
	val  V
	err  error
}

func newFlight[K comparable, V any]() *flight[K, V] {
	return &flight[K, V]{calls: map[K]*call[V]{}}
}

// claim returns the call loading k; owner is true when the caller created it and must
// finish it.
func (f *flight[K, V]) claim(k K) (c *call[V], owner bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimLocked(k)
}

// claimMany is claim for several keys at once.
func (f *flight[K, V]) claimMany(ks []K) (cs []*call[V], owner []bool) {
	cs, owner = make([]*call[V], len(ks)), make([]bool, len(ks))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, k := range ks {
		cs[i], owner[i] = f.claimLocked(k)
	}
	return cs, owner
}

func (f *flight[K, V]) claimLocked(k K) (*call[V], bool) {
	if c, ok := f.calls[k]; ok {
		return c, false
	}
	c := &call[V]{done: make(chan struct{})}
	f.calls[k] = c
	return c, true
}

// inFlight reports whether k is being loaded.
func (f *flight[K, V]) inFlight(k K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.calls[k]
	return ok
}

// finish publishes the result of an owned call and forgets it, so that the next claim
// starts a new load. The owner caches a good result before finishing: a caller that
// claims after finish finds it in the cache (owners check the cache again after claim).
func (f *flight[K, V]) finish(k K, c *call[V], v V, err error) {
	c.val, c.err = v, err
	f.mu.Lock()
	delete(f.calls, k)
	f.mu.Unlock()
	close(c.done)
}

// wait returns the call's result, or the context's error if ctx ends first.
func (c *call[V]) wait(ctx context.Context) (V, error) {
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// retryable reports whether a waiter should load again itself after the owner failed:
// the owner's context ended (its client went away, or readahead was stopped) while the
// waiter's own context is still alive.
func retryable(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
