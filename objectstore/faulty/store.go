// Package faulty injects faults for tests: Store wraps any objectstore.Store and fails
// chosen calls (throttling, unavailability, stalls, lost responses, bodies that break
// off, PUTs that land late); Proxy sits in front of an S3 server (MinIO) and answers chosen HTTP requests
// with 503 SlowDown, 500 InternalError, a hang or a reset connection, so the s3
// store's error mapping is tested against real HTTP.
package faulty

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/weir-io/weir/objectstore"
)

// Op is a set of Store operations.
type Op uint8

const (
	Put Op = 1 << iota
	Get
	Head
	Delete
	List
	AnyOp = Put | Get | Head | Delete | List
)

func (o Op) String() string {
	var parts []string
	for i, n := range []string{"put", "get", "head", "delete", "list"} {
		if o&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// Fault is what happens to a call a Rule picks.
type Fault int

const (
	// Throttle fails the call with objectstore.ErrThrottled without calling the inner
	// store: a Put writes nothing.
	Throttle Fault = iota
	// Unavailable fails the call with objectstore.ErrUnavailable without calling the
	// inner store: a Put writes nothing.
	Unavailable
	// Stall blocks the call until its context ends, then returns the context's error
	// (what a caller sees when its own timeout fires on a hung request).
	Stall
	// LostResponse performs the call on the inner store, then reports
	// objectstore.ErrUnavailable: a Put or Delete that happened although the caller
	// saw an error (the response was lost).
	LostResponse
	// BreakBody lets a Get open, then fails its reader with objectstore.ErrUnavailable
	// after Rule.After bytes (a connection reset in the middle of a body).
	BreakBody
	// LatePut reads a Put's whole body and fails the call as a request that timed out
	// after its body was sent (an error wrapping context.DeadlineExceeded, which
	// Retrying does not retry); the PUT reaches the inner store late, when the test
	// says: at DeliverLate (for instance after the next Put, or after a commit).
	LatePut
)

func (f Fault) String() string {
	switch f {
	case Throttle:
		return "throttle"
	case Unavailable:
		return "unavailable"
	case Stall:
		return "stall"
	case LostResponse:
		return "lost-response"
	case BreakBody:
		return "break-body"
	case LatePut:
		return "late-put"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Rule picks calls and says what fault they get.
type Rule struct {
	// Ops the rule applies to (0 = AnyOp).
	Ops Op
	// KeyPrefix restricts the rule to keys (list prefixes) starting with it.
	KeyPrefix string
	// Times is how many calls the rule faults before it is used up; 0 = unlimited.
	Times int
	// Probability, if > 0, faults each matching call with this probability (from the
	// Store's seeded RNG); 0 faults every matching call.
	Probability float64
	Fault       Fault
	// After is the bytes a BreakBody reader delivers before failing.
	After int64
}

type rule struct {
	Rule
	hits int
}

// Store is a fault-injecting objectstore.Store. Rules are checked in the order they
// were added; the first that picks a call decides its fault. Safe for concurrent use.
type Store struct {
	inner objectstore.Store

	mu     sync.Mutex
	rng    *rand.Rand
	rules  []*rule
	calls  map[Op]int
	faults map[Fault]int
	late   []latePut // LatePut bodies not delivered yet
}

type latePut struct {
	key  string
	data []byte
}

var _ objectstore.Store = (*Store)(nil)

// New wraps inner; seed makes probabilistic rules reproducible.
func New(inner objectstore.Store, seed uint64) *Store {
	return &Store{
		inner:  inner,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		calls:  map[Op]int{},
		faults: map[Fault]int{},
	}
}

// Inject adds a rule.
func (s *Store) Inject(r Rule) {
	if r.Ops == 0 {
		r.Ops = AnyOp
	}
	s.mu.Lock()
	s.rules = append(s.rules, &rule{Rule: r})
	s.mu.Unlock()
}

// FailNext makes the next n calls of ops fail with fault.
func (s *Store) FailNext(ops Op, n int, fault Fault) {
	s.Inject(Rule{Ops: ops, Times: n, Fault: fault})
}

// Clear removes every rule.
func (s *Store) Clear() {
	s.mu.Lock()
	s.rules = nil
	s.mu.Unlock()
}

// Calls returns how many calls of op (a single Op) the store has seen, faulted or not.
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Faults returns how many calls got fault f.
func (s *Store) Faults(f Fault) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults[f]
}

// pick counts the call and returns the rule that faults it, if any.
func (s *Store) pick(op Op, key string) *Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	for _, r := range s.rules {
		if r.Ops&op == 0 || !strings.HasPrefix(key, r.KeyPrefix) || r.Times > 0 && r.hits >= r.Times {
			continue
		}
		if r.Probability > 0 && s.rng.Float64() >= r.Probability {
			continue
		}
		r.hits++
		s.faults[r.Fault]++
		rr := r.Rule
		return &rr
	}
	return nil
}

// before applies a fault that happens instead of the call: done is false when the
// call should go ahead.
func before(ctx context.Context, r *Rule, op Op, key string) (done bool, err error) {
	if r == nil {
		return false, nil
	}
	switch r.Fault {
	case Throttle:
		return true, fmt.Errorf("faulty: %s %q: %w (injected)", op, key, objectstore.ErrThrottled)
	case Unavailable:
		return true, fmt.Errorf("faulty: %s %q: %w (injected)", op, key, objectstore.ErrUnavailable)
	case Stall:
		<-ctx.Done()
		return true, fmt.Errorf("faulty: %s %q: stalled: %w", op, key, ctx.Err())
	}
	return false, nil
}

func lost(r *Rule, op Op, key string, err error) error {
	if err == nil && r != nil && r.Fault == LostResponse {
		return fmt.Errorf("faulty: %s %q: response lost: %w (injected)", op, key, objectstore.ErrUnavailable)
	}
	return err
}

// Put implements objectstore.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	r := s.pick(Put, key)
	if done, err := before(ctx, r, Put, key); done {
		return err
	}
	if r != nil && r.Fault == LatePut {
		data, err := io.ReadAll(io.LimitReader(body, size+1))
		if err != nil || int64(len(data)) != size {
			return fmt.Errorf("faulty: put %q: reading the body: %d bytes, %v", key, len(data), err)
		}
		s.mu.Lock()
		s.late = append(s.late, latePut{key: key, data: data})
		s.mu.Unlock()
		return fmt.Errorf("faulty: put %q: timed out after the body was sent: %w (injected)", key, context.DeadlineExceeded)
	}
	return lost(r, Put, key, s.inner.Put(ctx, key, body, size))
}

// DeliverLate performs the PUTs that LatePut held back, in the order they were made.
func (s *Store) DeliverLate(ctx context.Context) error {
	s.mu.Lock()
	late := s.late
	s.late = nil
	s.mu.Unlock()
	for _, l := range late {
		if err := s.inner.Put(ctx, l.key, bytes.NewReader(l.data), int64(len(l.data))); err != nil {
			return fmt.Errorf("faulty: delivering the late put of %q: %w", l.key, err)
		}
	}
	return nil
}

// GetRange implements objectstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r := s.pick(Get, key)
	if done, err := before(ctx, r, Get, key); done {
		return nil, err
	}
	rc, err := s.inner.GetRange(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	if r != nil && r.Fault == LostResponse {
		rc.Close()
		return nil, lost(r, Get, key, nil)
	}
	if r != nil && r.Fault == BreakBody {
		return &brokenReader{rc: rc, left: r.After, key: key}, nil
	}
	return rc, nil
}

type brokenReader struct {
	rc   io.ReadCloser
	left int64
	key  string
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("faulty: get %q: body broken off: %w (injected)", b.key, objectstore.ErrUnavailable)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *brokenReader) Close() error { return b.rc.Close() }

// Head implements objectstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	r := s.pick(Head, key)
	if done, err := before(ctx, r, Head, key); done {
		return objectstore.ObjectInfo{}, err
	}
	info, err := s.inner.Head(ctx, key)
	return info, lost(r, Head, key, err)
}

// Delete implements objectstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	r := s.pick(Delete, key)
	if done, err := before(ctx, r, Delete, key); done {
		return err
	}
	return lost(r, Delete, key, s.inner.Delete(ctx, key))
}

// List implements objectstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objectstore.ObjectInfo, error) {
	r := s.pick(List, prefix)
	if done, err := before(ctx, r, List, prefix); done {
		return nil, err
	}
	out, err := s.inner.List(ctx, prefix)
	if err = lost(r, List, prefix, err); err != nil {
		return nil, err
	}
	return out, nil
}
