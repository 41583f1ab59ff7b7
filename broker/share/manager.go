package share

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Key names one share partition: a share group's view of one topic partition.
type Key struct {
	Group     string
	Topic     [16]byte
	Partition int32
}

// Persister keeps share-partition snapshots durable (Kafka's persister and share
// coordinator): the broker's stores them in __share_group_state.
type Persister interface {
	// Read returns the snapshot of k (ok false: none yet). A read with a leader epoch
	// fences writes of older epochs.
	Read(ctx context.Context, k Key, leaderEpoch int32) (s Snapshot, ok bool, err error)
	// Write makes s durable; it is refused when a newer leader epoch wrote or read k.
	Write(ctx context.Context, k Key, s Snapshot) error
}

// ErrStaleLeader: the share partition was loaded by a newer leader of its partition.
var ErrStaleLeader = errors.New("share: share-partition state has a newer leader epoch")

// Entry is one share partition on its partition's leader, with what persists it.
type Entry struct {
	mu          sync.Mutex
	p           *Partition
	leaderEpoch int32
	stateEpoch  int32      // the state epoch loaded (Snapshot.StateEpoch)
	wmu         sync.Mutex // one write at a time; waiting writers find theirs done
	durable     uint64     // version of the last durable snapshot
	broken      bool       // a write failed: reload before serving again
}

// Manager holds the share partitions this broker serves as leader.
type Manager struct {
	lim     Limits
	persist Persister
	mu      sync.Mutex
	parts   map[Key]*Entry
	loading map[Key]chan struct{}
}

// NewManager returns a manager persisting through persist.
func NewManager(lim Limits, persist Persister) *Manager {
	return &Manager{lim: lim, persist: persist, parts: map[Key]*Entry{}, loading: map[Key]chan struct{}{}}
}

// Limits returns the limits share partitions apply.
func (m *Manager) Limits() Limits { return m.lim }

// Get returns k's share partition for the leader of epoch leaderEpoch, loading it from
// the persister (or starting it at initStart's offset, written at once) when it is not
// here or was loaded under another leader epoch.
func (m *Manager) Get(ctx context.Context, k Key, leaderEpoch int32, initStart func() (int64, error)) (*Entry, error) {
	for {
		m.mu.Lock()
		e := m.parts[k]
		if e != nil {
			e.mu.Lock()
			ok := e.leaderEpoch == leaderEpoch && !e.broken
			e.mu.Unlock()
			if ok {
				m.mu.Unlock()
				return e, nil
			}
		}
		if ch := m.loading[k]; ch != nil {
			m.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		m.loading[k] = ch
		m.mu.Unlock()
		e, err := m.load(ctx, k, leaderEpoch, initStart)
		m.mu.Lock()
		delete(m.loading, k)
		if err == nil {
			m.parts[k] = e
		}
		m.mu.Unlock()
		close(ch)
		return e, err
	}
}

func (m *Manager) load(ctx context.Context, k Key, leaderEpoch int32, initStart func() (int64, error)) (*Entry, error) {
	s, ok, err := m.persist.Read(ctx, k, leaderEpoch)
	if err != nil {
		return nil, err
	}
	var p *Partition
	if ok && s.LeaderEpoch > leaderEpoch {
		return nil, fmt.Errorf("%w: %d > %d", ErrStaleLeader, s.LeaderEpoch, leaderEpoch)
	}
	if ok && s.Start >= 0 {
		p = Restore(s, m.lim)
	} else { // never written, or deleted by an admin request
		start, err := initStart()
		if err != nil {
			return nil, err
		}
		p = NewPartition(start, m.lim)
	}
	// Written at once: the snapshot with this leader epoch fences the earlier leader's
	// late writes even after the store moves.
	snap := p.Snapshot(leaderEpoch)
	snap.StateEpoch = s.StateEpoch
	if err := m.persist.Write(ctx, k, snap); err != nil {
		return nil, err
	}
	return &Entry{p: p, leaderEpoch: leaderEpoch, stateEpoch: s.StateEpoch, durable: p.Version()}, nil
}

// With runs f on the share partition under its lock, after releasing expired locks.
func (e *Entry) With(now time.Time, f func(p *Partition)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.p.Expire(now)
	f(e.p)
}

// Flush makes every change so far durable (one write covers the changes of every
// caller waiting behind it: writes are batched).
func (e *Entry) Flush(ctx context.Context, persist Persister, k Key) error {
	e.mu.Lock()
	want := e.p.Version()
	e.mu.Unlock()
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	if e.durable >= want {
		e.mu.Unlock()
		return nil
	}
	v, snap := e.p.Version(), e.p.Snapshot(e.leaderEpoch)
	snap.StateEpoch = e.stateEpoch
	e.mu.Unlock()
	if err := persist.Write(ctx, k, snap); err != nil {
		e.mu.Lock()
		e.broken = true // the state here may be ahead of the store: reload it
		e.mu.Unlock()
		return err
	}
	e.mu.Lock()
	e.durable = max(e.durable, v)
	e.mu.Unlock()
	return nil
}

// Flush makes k's changes durable.
func (m *Manager) Flush(ctx context.Context, k Key, e *Entry) error {
	return e.Flush(ctx, m.persist, k)
}

// Expire releases expired locks everywhere and persists what changed (a background
// loop calls it, so records come back even when nobody fetches the partition).
func (m *Manager) Expire(ctx context.Context, now time.Time) {
	m.mu.Lock()
	es := make(map[Key]*Entry, len(m.parts))
	for k, e := range m.parts {
		es[k] = e
	}
	m.mu.Unlock()
	for k, e := range es {
		e.mu.Lock()
		changed := e.p.Expire(now)
		e.mu.Unlock()
		if changed {
			_ = e.Flush(ctx, m.persist, k)
		}
	}
}

// ReleaseMember releases what member holds in the listed share partitions (its share
// session closed) and persists it.
func (m *Manager) ReleaseMember(ctx context.Context, member string, keys []Key) {
	for _, k := range keys {
		m.mu.Lock()
		e := m.parts[k]
		m.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		changed := e.p.ReleaseMember(member)
		e.mu.Unlock()
		if changed {
			_ = e.Flush(ctx, m.persist, k)
		}
	}
}

// Check makes k's share partition load again at its next Get when its persisted state
// epoch moved (an admin reset since it loaded) or it cannot be read at its leader epoch.
// A share session's opening checks its partitions, so a reset (done while the group has
// no members) is seen by the next member before it is served the old state.
func (m *Manager) Check(ctx context.Context, k Key) {
	m.mu.Lock()
	e := m.parts[k]
	m.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	epoch, state := e.leaderEpoch, e.stateEpoch
	e.mu.Unlock()
	s, ok, err := m.persist.Read(ctx, k, epoch)
	if err != nil || (ok && s.StateEpoch != state) {
		e.mu.Lock()
		e.broken = true
		e.mu.Unlock()
	}
}

// Drop forgets k (its partition is no longer led here).
func (m *Manager) Drop(k Key) {
	m.mu.Lock()
	delete(m.parts, k)
	m.mu.Unlock()
}

// Keys lists the share partitions held.
func (m *Manager) Keys() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	ks := make([]Key, 0, len(m.parts))
	for k := range m.parts {
		ks = append(ks, k)
	}
	return ks
}
