package controller

import (
	"sync"
	"time"

	"github.com/weir-io/weir/metadata"
)

// leaseTable is one controller's part of the brokers' quorum leases. Every controller,
// leader or not, keeps one: a broker heartbeats every controller, and its lease is valid
// only while a majority of them acknowledged a heartbeat sent less than GrantedLease ago
// (the client counts, ctlclient/client_store.go). A fence (and a registration that
// replaces a live one) needs a majority of controllers to vote for it (vote), and a
// controller votes only for a broker it has not heard from for SuspectTimeout, and from
// then on refuses that registration's heartbeats for good (refused, kept on disk:
// votelog.go).
//
// Why that is safe: say the broker holds a valid lease at time t: a majority M1 of
// controllers each acknowledged a heartbeat sent at s_c with s_c + GrantedLease > t. A
// fence needs votes of a majority M2; some controller c is in both. c acknowledged s_c,
// so it received it (at r_c >= s_c) before it voted (after voting it acknowledges
// nothing of that registration), and it voted only after SuspectTimeout of silence:
// vote time > r_c + SuspectTimeout >= s_c + GrantedLease + LeaseSafetyMargin > t. So
// every fence is committed after the broker's lease ended, whoever the Raft leader is
// and however many leaders there were meanwhile. No Raft leader is needed to keep a
// lease: while the controllers elect one, brokers go on acking.
//
// The table also gives the leader its reasons to propose a fence (expired): silence for
// LeaseTimeout+LeaseGrace; silence for SuspectTimeout after the connection its
// heartbeats came on closed (its process died: its kernel closed it); silence for
// ReportedTimeout after gossip reported it dead (weaker: a starved process fails its
// probes too); each hint counting only if it came after the last heartbeat. Each lease remembers the incarnation (a random ID per
// broker process) that registered or last heartbeated, so that a second live process
// with the same broker ID is refused.
type leaseTable struct {
	mu sync.Mutex
	m  map[int32]*lease
	// refused[id] is the highest registration epoch of broker id this controller voted
	// to fence: heartbeats of that epoch or an older one are refused.
	refused map[int32]int64
	// start is when this controller began acknowledging heartbeats: a broker it has not
	// heard from since has been silent at least that long here (what an earlier run of
	// this controller acknowledged was acknowledged before start).
	start time.Time
	log   *voteLog // the refusals on disk; nil: kept in memory only (tests)
}

type lease struct {
	epoch       int64
	incarnation string    // "" until the registration or a heartbeat told it
	last        time.Time // last heartbeat (or registration)
	closedAt    time.Time // last close of a connection its heartbeats came on, zero if none
	reportedAt  time.Time // last gossip report that it is dead, zero if none
}

func newLeaseTable(now time.Time, log *voteLog) *leaseTable {
	t := &leaseTable{m: map[int32]*lease{}, refused: map[int32]int64{}, start: now, log: log}
	if log != nil {
		for id, e := range log.refused() {
			t.refused[id] = e
		}
	}
	return t
}

// renew records a heartbeat or registration of id in epoch by incarnation ("": not
// told) and reports whether it may be acknowledged: false for a registration this
// controller voted to fence, or one older than a registration it heard from.
func (l *leaseTable) renew(id int32, epoch int64, incarnation string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch <= l.refused[id] {
		return false
	}
	e := l.m[id]
	switch {
	case e == nil || e.epoch < epoch:
		l.m[id] = &lease{epoch: epoch, incarnation: incarnation, last: now}
		return true
	case e.epoch > epoch:
		// The broker registered again since: that process left this registration
		// (and a zombie of it must not keep a lease; votes for it count it gone).
		return false
	}
	e.last = now
	if incarnation != "" {
		e.incarnation = incarnation
	}
	return true
}

// holder reports, for broker id's registration in epoch, the incarnation that last
// heartbeated here and whether it did within fresh of now. A registration the table has
// no entry for (the View is ahead of the table) counts as fresh, of an unknown
// incarnation; an entry of a later epoch than asked is judged as it is.
func (l *leaseTable) holder(id int32, epoch int64, now time.Time, fresh time.Duration) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[id]
	if e == nil || e.epoch < epoch {
		return "", true
	}
	return e.incarnation, now.Sub(e.last) < fresh
}

// connClosed records that a connection broker id heartbeated on closed: its process
// died (the kernel closed it) or the network between them broke.
func (l *leaseTable) connClosed(id int32, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[id]; e != nil {
		e.closedAt = now
	}
}

// suspect records a gossip report that broker id is dead: weaker evidence than a
// closed connection (a starved process fails its probes too), so it is acted on later.
func (l *leaseTable) suspect(id int32, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[id]; e != nil {
		e.reportedAt = now
	}
}

// vote decides this controller's vote on fencing broker id's registration epoch: yes
// if it has not acknowledged a heartbeat of it for more than silence (SuspectTimeout),
// or already voted so. A yes is final: the registration's heartbeats are refused from
// now on (and, with a vote log, after a restart: the caller must persist before it
// answers, see Controller.voteLocal). It returns the silence it saw.
func (l *leaseTable) vote(id int32, epoch int64, now time.Time, silence time.Duration) (yes, fresh bool, silent time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch <= l.refused[id] {
		return true, false, 0
	}
	since := l.start
	if e := l.m[id]; e != nil {
		if e.epoch > epoch {
			l.refused[id] = epoch
			return true, true, 0 // re-registered: this one is over for the broker too
		}
		if e.epoch == epoch {
			since = e.last
		}
	}
	silent = now.Sub(since)
	if silent <= silence {
		return false, false, silent
	}
	l.refused[id] = epoch
	return true, true, silent
}

// fenceAfter is how long a broker must have been silent before the leader proposes to
// fence it, by the evidence that it is gone: a closed heartbeat connection (Closed),
// a gossip report (Reported), nothing (Silent). Each is at least the suspect timeout
// the votes need.
type fenceAfter struct {
	Closed, Reported, Silent time.Duration
}

// expired returns the fences the leader should propose (each still needs its votes):
// active brokers silent for longer than the evidence since their last heartbeat asks.
func (l *leaseTable) expired(v *metadata.View, now time.Time, after fenceAfter) []fenceBrokerCmd {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fenceBrokerCmd
	for _, b := range v.Brokers {
		if !b.Active() {
			continue
		}
		e := l.m[b.ID]
		if e == nil || e.epoch < b.Epoch {
			// Not heard from in this registration yet (it registered through another
			// leader, or this controller just started): count from now.
			l.m[b.ID] = &lease{epoch: b.Epoch, last: now}
			continue
		}
		if e.epoch > b.Epoch {
			continue // our View lags the registration we saw; wait for it
		}
		silent := now.Sub(e.last)
		wait := after.Silent
		if e.reportedAt.After(e.last) {
			wait = min(wait, after.Reported)
		}
		if e.closedAt.After(e.last) {
			wait = min(wait, after.Closed)
		}
		if silent > wait {
			out = append(out, fenceBrokerCmd{ID: b.ID, Epoch: b.Epoch, Plan: true})
		}
	}
	return out
}

// forget drops the leases of registrations v shows over (fenced or replaced), so the
// table does not grow; refusals stay. A broker v does not know yet (a View that lags
// its registration) keeps its lease: a vote must see its heartbeats.
func (l *leaseTable) forget(v *metadata.View) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, e := range l.m {
		if b, ok := v.Broker(id); ok && b.Epoch >= e.epoch && (b.Epoch > e.epoch || !b.Active()) {
			delete(l.m, id)
		}
	}
}
