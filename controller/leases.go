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
// Timing argument: a broker's own lease ends LeaseTimeout after it *sent* its last
// acknowledged heartbeat; the leader fences LeaseTimeout+LeaseGrace after it *received*
// the last one (always later). So the broker stops acking before it can be fenced, given
// clocks that run at about the same rate. A deposed leader may still ack heartbeats for
// up to LeaderLeaseTimeout: LeaseGrace should exceed it (defaults 500 ms vs 250 ms).
type leaseTable struct {
	mu sync.Mutex
	m  map[int32]*lease
}

type lease struct {
	epoch     int64
	last      time.Time // last heartbeat (or registration, or leadership gain)
	suspectAt time.Time // last gossip suspicion report, zero if none
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

// renew records a heartbeat or registration of id in epoch.
func (l *leaseTable) renew(id int32, epoch int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[id]
	if e == nil || e.epoch != epoch {
		l.m[id] = &lease{epoch: epoch, last: now}
		return
	}
	e.last = now
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
			out = append(out, fenceBrokerCmd{ID: b.ID, Epoch: b.Epoch})
		}
	}
	for id := range l.m {
		if !active[id] {
			delete(l.m, id)
		}
	}
	return out
}
