package broker

import (
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
)

// Abandoning links. A proxied produce waits for its link's answer, and a client's
// Produce request is answered only when every partition in it is; an idempotent
// producer keeps one request in flight per broker. A link to a leader cut off by a
// network partition would hold the whole request until the peer timeout (10 s), long
// after the controllers fenced that leader and moved its partitions. So the proxy stops
// waiting as soon as waiting cannot give the client a useful answer:
//   - the view no longer names the link's leader, at the leader epoch it was routed by,
//     for its partition, or no longer shows that broker active (fenced, gone);
//   - this broker's own lease lapsed (it may not ack anyway, and the client should go
//     to whichever broker the controllers now route it to).
//
// A link still queued (never sent) is failed as never sent: its pin is released, the
// client is told NOT_LEADER_OR_FOLLOWER. A link taken for sending may be at its leader
// and may even have been applied: its pin is kept as a lost one (tier.LostPin), to be
// resolved only by the session-fence proof (resolveLostLoop), and the client is told
// NOT_LEADER_OR_FOLLOWER. Its retry is safe: the new leader recovered the old leader's
// WAL before serving, so a link the old leader applied is in the new leader's producer
// state and the retry is answered with the original offset; a link the old leader
// applies after the fence fails (its WAL is fenced). DESIGN.md, Zone routing, Failures.

// watchTick is how often the proxy looks at its lease and its waiting links (view
// changes wake it at once).
const watchTick = 100 * time.Millisecond

// startWatch starts the watcher once, while the broker runs.
func (px *proxy) startWatch() {
	px.watchOnce.Do(func() {
		if px.b.ctx.Err() == nil {
			px.b.wg.Add(1)
			go px.watch()
		}
	})
}

// viewChanged wakes the watcher (syncPartitions, after each view applied).
func (px *proxy) viewChanged() {
	select {
	case px.viewWake <- struct{}{}:
	default:
	}
}

// watch abandons the links waiting in vain and logs this broker's lease lapsing and
// coming back.
func (px *proxy) watch() {
	b := px.b
	defer b.wg.Done()
	t := time.NewTicker(watchTick)
	defer t.Stop()
	lease, leased := b.meta.(metadata.Leaser)
	held := false // the lease was valid when last looked at
	var lapsed time.Time
	for {
		select {
		case <-t.C:
		case <-px.viewWake:
		case <-b.ctx.Done():
			return
		}
		if leased {
			ok := b.leaseOK()
			switch {
			case held && !ok:
				lapsed = time.Now()
				args := []any{"since_last_heartbeat_answer", "unknown"}
				if d, has := lease.SinceLeaseAck(lapsed); has {
					args = []any{"since_last_heartbeat_answer", d.Round(time.Millisecond)}
				}
				b.log.Warn("this broker's lease lapsed (no heartbeat answer from the controllers): it acks nothing and answers the proxied produces waiting on links NOT_LEADER_OR_FOLLOWER", args...)
			case !held && ok && !lapsed.IsZero():
				b.log.Info("this broker's lease is valid again", "lapsed_for", time.Since(lapsed).Round(time.Millisecond))
				lapsed = time.Time{}
			}
			held = ok
			if !ok {
				px.abandon(nil)
				continue
			}
		}
		// Every tick, not only after a view change: a produce that read the view just
		// before a change may enqueue its link after that change's sweep; without a
		// later view change it would wait out the link timeout. A sweep costs a map
		// lookup per link waiting.
		px.abandon(b.meta.View())
	}
}

// abandon finishes the links that wait in vain: all of them with v nil (this broker's
// lease lapsed), else those whose leader v no longer shows serving them (stale).
func (px *proxy) abandon(v *metadata.View) {
	px.mu.Lock()
	senders := make([]*linkSender, 0, len(px.senders))
	for _, s := range px.senders {
		senders = append(senders, s)
	}
	px.mu.Unlock()
	for _, s := range senders {
		if v != nil {
			br, ok := v.Broker(s.leader)
			if !ok || !br.Active() {
				s.abandon(nil) // its leader is fenced or gone: every link to it
				continue
			}
			s.abandon(func(pl *pendingLink) bool { return stale(v, s.leader, pl) })
			continue
		}
		s.abandon(nil)
	}
}

// stale reports whether v no longer has leader serving pl's partition at the leader
// epoch pl was routed by.
func stale(v *metadata.View, leader int32, pl *pendingLink) bool {
	t := v.TopicByID(pl.link.Topic)
	if t == nil || pl.link.Partition < 0 || int(pl.link.Partition) >= len(t.Partitions) {
		return true
	}
	mp := &t.Partitions[pl.link.Partition]
	return mp.Leader != leader || mp.LeaderEpoch != pl.leaderEpoch
}

// errNotSent fails a link abandoned before it left the queue.
var errNotSent = fmt.Errorf("%w: link abandoned before it was sent", peer.ErrUnavailable)

// abandon finishes s's links that match (all, with match nil): the queued ones as never
// sent (they leave the queue here, so they never will be), the ones taken for sending as
// abandoned (their pins wait for the session fence).
func (s *linkSender) abandon(match func(*pendingLink) bool) {
	var unsent, sent []*pendingLink
	s.mu.Lock()
	keep := s.queue[:0]
	for _, pl := range s.queue {
		if match == nil || match(pl) {
			unsent = append(unsent, pl)
		} else {
			keep = append(keep, pl)
		}
	}
	clear(s.queue[len(keep):])
	s.queue = keep
	for pl := range s.inflight {
		if !pl.finished.Load() && (match == nil || match(pl)) {
			sent = append(sent, pl)
		}
	}
	s.mu.Unlock()
	for _, pl := range unsent {
		pl.finish(peer.LinkResult{}, errNotSent)
	}
	for _, pl := range sent {
		pl.finish(peer.LinkResult{}, errLinkAbandoned)
	}
}

// SetPeerConfig adjusts the configuration of this broker's connections to other
// brokers (tests: a dialer that black-holes a connection, a longer answer timeout): they
// are closed (what they wait for fails as lost) and open again with it.
func (b *Broker) SetPeerConfig(f func(*peer.Config)) {
	px := b.proxy
	px.mu.Lock()
	defer px.mu.Unlock()
	px.peerCfg = f
	for id, c := range px.clients {
		c.Close()
		delete(px.clients, id)
	}
}
