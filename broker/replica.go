package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
)

// Read replicas (zone routing, KIP-392). A consumer in this broker's zone reads a
// partition led in another zone here: the partition's replica follows the leader's index
// (peer.OpFollow: entries and the high watermark cross zones, never record bytes) and
// reads the bytes from the shared file system and object storage itself (partlog's
// replica.go). A replica is created by the first read of its partition here and dropped
// after replicaIdle without reads, when this broker becomes the leader, or when the topic
// goes. One follower per leader keeps one long poll in flight for all of that leader's
// partitions followed here.

const (
	replicaIdle       = 5 * time.Minute
	replicaReadyWait  = 2 * time.Second
	followMaxWait     = 500 * time.Millisecond
	followMaxEntries  = 4096  // per partition per answer
	followMaxTotal    = 32768 // per answer
	followRetryPause  = 200 * time.Millisecond
	replicaJanitorGap = time.Second
)

type replicaSet struct {
	b *Broker

	mu        sync.Mutex
	parts     map[partlog.Key]*replica
	followers map[int32]*follower
}

type replica struct {
	p        *partlog.Partition
	leader   int32
	lastUsed atomic.Int64 // unix ns
	retryAt  atomic.Int64 // unix ns: not polled before (the leader refused it)
	epoch    atomic.Int32 // the leader epoch of the last answer
}

type follower struct {
	leader int32
	wake   chan struct{} // a partition was added: ask again now
	// legacy: the leader answered OpFollowTxn with an empty body (a build without
	// transactions): it is followed with OpFollow until a poll fails (it may have
	// restarted with a newer build).
	legacy bool
}

func newReplicaSet(b *Broker) *replicaSet {
	return &replicaSet{b: b, parts: map[partlog.Key]*replica{}, followers: map[int32]*follower{}}
}

// replicaFor returns the read replica of partition index of t, creating it, and waits
// a little for it to catch up; ok is false when this broker does not serve it as a
// replica (zone routing off, no serving leader elsewhere, an internal topic).
func (b *Broker) replicaFor(t *metadata.Topic, index int32) (*partlog.Partition, bool) {
	if !b.cfg.ZoneRouting || b.replicas == nil || t == nil || index < 0 || int(index) >= len(t.Partitions) || strings.HasPrefix(t.Name, "__") {
		return nil, false
	}
	mp := t.Partitions[index]
	if mp.Leader == b.cfg.NodeID || mp.Leader < 0 || mp.Recovering {
		return nil, false
	}
	v := b.meta.View()
	if br, ok := v.Broker(mp.Leader); !ok || !br.Active() {
		return nil, false
	}
	rs := b.replicas
	k := partlog.Key{ID: t.ID, Index: index}
	rs.mu.Lock()
	r := rs.parts[k]
	if r == nil {
		p := partlog.New(t.Name, t.ID, index, mp.LeaderEpoch, mp.LogStartOffset)
		p.Apply(mp, v, b.tier != nil)
		r = &replica{p: p, leader: mp.Leader}
		r.epoch.Store(-1)
		rs.parts[k] = r
		rs.followLocked(mp.Leader)
	}
	r.lastUsed.Store(time.Now().UnixNano())
	rs.mu.Unlock()
	if r.p.State() == partlog.Following {
		return r.p, true
	}
	c := make(chan struct{}, 1)
	deadline := time.NewTimer(replicaReadyWait)
	defer deadline.Stop()
	for {
		r.p.Wait(c) // before the check: a change between the two is not missed
		if r.p.State() == partlog.Following {
			r.p.Unwait(c)
			break
		}
		select {
		case <-c:
		case <-deadline.C:
			r.p.Unwait(c)
			return nil, false
		case <-b.ctx.Done():
			r.p.Unwait(c)
			return nil, false
		}
	}
	return r.p, true
}

// followLocked makes sure a follower of leader runs, and wakes it.
func (rs *replicaSet) followLocked(leader int32) {
	f := rs.followers[leader]
	if f == nil {
		f = &follower{leader: leader, wake: make(chan struct{}, 1)}
		rs.followers[leader] = f
		rs.b.wg.Add(1)
		go rs.follow(f)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
	// A long poll in flight would hold the new partition back: the leader answers it
	// early when told.
	if c, err := rs.b.proxy.followClient(rs.b.meta.View(), leader); err == nil {
		c.Do(peer.AppendWake(nil, rs.b.cfg.NodeID), func([]byte, error) {})
	}
}

// follow is the follower of one leader: long polls for every partition followed from it.
func (rs *replicaSet) follow(f *follower) {
	b := rs.b
	defer b.wg.Done()
	for b.ctx.Err() == nil {
		rs.mu.Lock()
		var reps []*replica
		for _, r := range rs.parts {
			if r.leader == f.leader {
				reps = append(reps, r)
			}
		}
		if len(reps) == 0 {
			delete(rs.followers, f.leader)
			rs.mu.Unlock()
			return
		}
		rs.mu.Unlock()
		req := peer.FollowRequest{Replica: b.cfg.NodeID, MaxWait: int32(followMaxWait / time.Millisecond), Txn: !f.legacy}
		now := time.Now().UnixNano()
		var polled []*replica
		for _, r := range reps {
			if r.retryAt.Load() > now {
				continue
			}
			polled = append(polled, r)
			if r.p.State() != partlog.Following {
				req.MaxWait = 0
			}
			req.Parts = append(req.Parts, peer.FollowPart{Topic: r.p.ID(), Partition: r.p.Index(), From: r.p.FollowFrom(), LeaderEpoch: r.epoch.Load()})
		}
		if len(req.Parts) == 0 { // every partition is backing off
			select {
			case <-time.After(followRetryPause):
			case <-f.wake:
			case <-b.ctx.Done():
				return
			}
			continue
		}
		res, err := rs.poll(f.leader, req.AppendTo(nil), len(req.Parts), req.Txn)
		switch {
		case err == nil:
			rs.apply(polled, res)
		case errors.Is(err, errLegacyLeader):
			f.legacy = true
			continue
		default:
			f.legacy = false
		}
		if err != nil {
			b.log.Debug("following a leader failed; retrying", "leader", f.leader, "err", err)
			select {
			case <-time.After(followRetryPause):
			case <-f.wake:
			case <-b.ctx.Done():
				return
			}
		}
	}
}

// errLegacyLeader: the leader does not know OpFollowTxn.
var errLegacyLeader = errors.New("broker: the leader does not know OpFollowTxn")

func (rs *replicaSet) poll(leader int32, body []byte, n int, txn bool) ([]peer.FollowResult, error) {
	b := rs.b
	c, err := b.proxy.followClient(b.meta.View(), leader)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(b.ctx, followMaxWait+10*time.Second)
	defer cancel()
	resp, err := c.Call(ctx, body)
	if err != nil {
		return nil, err
	}
	if txn && len(resp) == 0 {
		return nil, errLegacyLeader
	}
	return peer.DecodeFollowResults(resp, n, txn)
}

// apply takes a leader's answer into the replicas. A partition the leader refused backs
// off (NOT_LEADER: the view will name another leader; OFFSET_OUT_OF_RANGE: the leader
// uploaded what this replica asked for, and its manifest shows that soon).
func (rs *replicaSet) apply(reps []*replica, res []peer.FollowResult) {
	b := rs.b
	for i, r := range reps {
		fr := &res[i]
		if fr.Code != 0 {
			r.retryAt.Store(time.Now().Add(followRetryPause).UnixNano())
			b.log.Debug("following a partition refused; backing off", "topic", r.p.Topic(), "partition", r.p.Index(), "err", kerr.ErrorForCode(fr.Code))
			continue
		}
		r.epoch.Store(fr.State.LeaderEpoch)
		r.p.Follow(fr.Entries, fr.State, func(id partlog.SourceID) partlog.Reader { return b.loader.ProxyReader(id.Broker, id.Epoch) })
	}
}

// janitor drops replicas nobody reads, of partitions now led here or gone, and points
// the others at their current leaders.
func (rs *replicaSet) janitor() {
	b := rs.b
	defer b.wg.Done()
	t := time.NewTicker(replicaJanitorGap)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.ctx.Done():
			rs.mu.Lock()
			for k, r := range rs.parts {
				r.p.Unfollow()
				delete(rs.parts, k)
			}
			rs.mu.Unlock()
			return
		}
		v := b.meta.View()
		idle := time.Now().Add(-replicaIdle).UnixNano()
		rs.mu.Lock()
		for k, r := range rs.parts {
			t := v.TopicByID(k.ID)
			if t == nil || int(k.Index) >= len(t.Partitions) || t.Partitions[k.Index].Leader == b.cfg.NodeID || r.lastUsed.Load() < idle {
				r.p.Unfollow()
				delete(rs.parts, k)
				continue
			}
			mp := t.Partitions[k.Index]
			r.p.Apply(mp, v, b.tier != nil)
			if mp.Leader >= 0 && mp.Leader != r.leader {
				r.leader = mp.Leader
				rs.followLocked(mp.Leader)
			}
		}
		rs.mu.Unlock()
	}
}

// Replicas is the number of partitions this broker serves as a read replica (tests).
func (b *Broker) Replicas() int {
	b.replicas.mu.Lock()
	defer b.replicas.mu.Unlock()
	return len(b.replicas.parts)
}

// serveFollow answers a read replica's long poll: the entries of each partition from the
// offset the replica holds, at once when any partition has news, else when one does or
// after the poll's wait (or when the replica's next request asks to be answered early).
func (b *Broker) serveFollow(body []byte, respond func([]byte)) {
	req, err := peer.DecodeFollowRequest(body)
	if err != nil {
		b.log.Warn("malformed follow request", "err", err)
		respond(nil)
		return
	}
	wake := b.polls.register(req.Replica)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.polls.unregister(req.Replica, wake)
		wait := min(time.Duration(req.MaxWait)*time.Millisecond, 5*time.Second)
		deadline := time.NewTimer(wait)
		defer deadline.Stop()
		for {
			// Registered before the answer is built: an append committed between the two
			// would otherwise signal nobody, and the poll would sleep out its wait with
			// news for the replica (its consumers' records late by up to followMaxWait).
			var parts []*partlog.Partition
			if wait > 0 {
				for _, fp := range req.Parts {
					if p := b.parts.Get(fp.Topic, fp.Partition); p != nil {
						p.Wait(wake)
						parts = append(parts, p)
					}
				}
			}
			res, news := b.followAnswer(req)
			if news || wait == 0 {
				for _, p := range parts {
					p.Unwait(wake)
				}
				respond(peer.AppendFollowResults(nil, res, req.Txn))
				return
			}
			timedOut := false
			select {
			case <-wake:
			case <-deadline.C:
				timedOut = true
			case <-b.ctx.Done():
				timedOut = true
			}
			for _, p := range parts {
				p.Unwait(wake)
			}
			if timedOut {
				res, _ := b.followAnswer(req)
				respond(peer.AppendFollowResults(nil, res, req.Txn))
				return
			}
		}
	}()
}

// followAnswer builds the answer to a follow request; news reports whether any
// partition has entries, an error, or a leader epoch the replica did not have.
func (b *Broker) followAnswer(req peer.FollowRequest) (res []peer.FollowResult, news bool) {
	res = make([]peer.FollowResult, len(req.Parts))
	total := 0
	for i, fp := range req.Parts {
		p := b.parts.Get(fp.Topic, fp.Partition)
		if p == nil {
			res[i].Code = kafka.ErrorCode(partlog.ErrNotLeader)
			news = true
			continue
		}
		es, st, err := p.Entries(fp.From, min(followMaxEntries, followMaxTotal-total))
		res[i].State, res[i].Entries = st, es
		total += len(es)
		res[i].Code = kafka.ErrorCode(err) // partlog.ErrFollowGap: OFFSET_OUT_OF_RANGE
		if res[i].Code != 0 || len(es) > 0 || st.LeaderEpoch != fp.LeaderEpoch || st.HW > fp.From {
			news = true
		}
	}
	return res, news
}

// pollSet lets a replica's new request answer its previous long poll early.
type pollSet struct {
	mu    sync.Mutex
	polls map[int32]chan struct{}
}

func (ps *pollSet) register(replica int32) chan struct{} {
	c := make(chan struct{}, 1)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.polls == nil {
		ps.polls = map[int32]chan struct{}{}
	}
	if old := ps.polls[replica]; old != nil {
		select {
		case old <- struct{}{}:
		default:
		}
	}
	ps.polls[replica] = c
	return c
}

func (ps *pollSet) unregister(replica int32, c chan struct{}) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.polls[replica] == c {
		delete(ps.polls, replica)
	}
}

// wake answers the replica's long poll now.
func (ps *pollSet) wake(replica int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if c := ps.polls[replica]; c != nil {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
