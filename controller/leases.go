package controller

import (
	"sync"
	"time"

	"github.com/weir-io/weir/metadata"
)

// leaseTable holds broker leases. Only the Raft leader keeps it: leases live in memory,
// only their outcome (FenceBroker) enters the log. On gaining leadership every active
// broker starts with a fresh lease, so a new leader never fences a broker it has not
// heard from yet for lack of history.
//
// Timing argument (Config.GrantedLease): a broker's own lease ends GrantedLease after it
// *sent* its last acknowledged heartbeat; the leader fences LeaseTimeout+LeaseGrace, or
// SuspectTimeout after a gossip report, after it *received* the last one (or after it
// was elected). GrantedLease is the smaller of those minus LeaderLeaseTimeout (how long
// a deposed leader may still acknowledge heartbeats) minus a margin, so the broker stops
// acking before any controller can fence it.
//
// Each lease also remembers the incarnation (a random ID per broker process) that
// registered or last heartbeated, so that a second live process with the same broker ID
// is refused (fresh).
type leaseTable struct {
	mu sync.Mutex
	m  map[int32]*lease
}

type lease struct {
	epoch       int64
	incarnation string    // "" until the registration or a heartbeat told it
	last        time.Time // last heartbeat (or registration, or leadership gain)
	suspectAt   time.Time // last gossip suspicion report, zero if none
}

func newLeaseTable() *leaseTable { return &leaseTable{m: map[int32]*lease{}} }

// reset gives every active broker of v a fresh lease from now (leadership gained), or
// forgets everything (leadership lost: v nil).
func (l *leaseTable) reset(v *metadata.View, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = map[int32]*lease{}
	if v == nil {
		return
	}
	for _, b := range v.Brokers {
		if b.Active() {
			l.m[b.ID] = &lease{epoch: b.Epoch, last: now}
		}
	}
}

// renew records a heartbeat or registration of id in epoch by incarnation ("": not
// told).
func (l *leaseTable) renew(id int32, epoch int64, incarnation string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[id]
	if e == nil || e.epoch != epoch {
		l.m[id] = &lease{epoch: epoch, incarnation: incarnation, last: now}
		return
	}
	e.last = now
	if incarnation != "" {
		e.incarnation = incarnation
	}
}

// holder reports, for broker id's active registration in epoch, the incarnation that
// holds it and whether its lease is still fresh: heard from within fresh of now. A
// registration the table has no entry for (the View is ahead of the table) counts as
// fresh, of an unknown incarnation; an entry of a later epoch than the View's (a
// registration the View does not show yet) is judged as it is.
func (l *leaseTable) holder(id int32, epoch int64, now time.Time, fresh time.Duration) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[id]
	if e == nil || e.epoch < epoch {
		return "", true
	}
	return e.incarnation, now.Sub(e.last) < fresh
}

// suspect records a gossip suspicion of id.
func (l *leaseTable) suspect(id int32, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[id]; e != nil {
		e.suspectAt = now
	}
}

// expired returns the fences to propose: active brokers silent for longer than
// leaseTimeout+grace, or suspected and silent for longer than suspectTimeout.
func (l *leaseTable) expired(v *metadata.View, now time.Time, leaseTimeout, grace, suspectTimeout time.Duration) []fenceBrokerCmd {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fenceBrokerCmd
	active := make(map[int32]bool, len(v.Brokers))
	for _, b := range v.Brokers {
		if !b.Active() {
			continue
		}
		active[b.ID] = true
		e := l.m[b.ID]
		if e == nil || e.epoch < b.Epoch {
			// Registered since we last looked (or we just became leader): fresh lease.
			l.m[b.ID] = &lease{epoch: b.Epoch, last: now}
			continue
		}
		if e.epoch > b.Epoch {
			continue // our View lags the registration we saw; wait for it
		}
		silent := now.Sub(e.last)
		if !e.suspectAt.IsZero() && now.Sub(e.suspectAt) > leaseTimeout {
			e.suspectAt = time.Time{} // an old report; the broker kept heartbeating
		}
		if silent > leaseTimeout+grace || (!e.suspectAt.IsZero() && silent > suspectTimeout) {
			out = append(out, fenceBrokerCmd{ID: b.ID, Epoch: b.Epoch, Plan: true})
		}
	}
	for id := range l.m {
		if !active[id] {
			delete(l.m, id)
		}
	}
	return out
}
