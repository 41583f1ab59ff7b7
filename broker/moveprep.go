package broker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
)

// Graceful moves without a visible pause: the target reads the partition's log chain
// before the switch, while the leader still serves it.
//
//  1. The controller marks the partition Moving (MoveGen G, MovingTo T).
//  2. T, seeing that, preloads it: a partition object of its own, not served, that
//     collects the batches of every range of the chain but the leader's (those ranges are
//     closed: their ends never change). A drain's hundreds of moves are preloaded
//     together, one scan per WAL directory (preloadRunner).
//  3. The leader L keeps serving meanwhile and asks T (peer.OpMoveReady, a long poll)
//     whether its preload for G is done. On T's answer — ready, not ready (a failed
//     preload, a move T does not know), or no answer within moveReadyWait, or an error
//     (T unreachable, or a broker without the op; T knowing the move without a preload
//     of it, as after a restart, answers not ready within 200 ms) — L closes the partition for the
//     hand-off as before (Closing, the prepared batches synced, CompleteMoveGen).
//  4. At the switch T takes the preloaded partition if the new chain is the preloaded
//     ranges plus L's range plus T's own, and reads only L's range (loadJob.from); any
//     other chain, or a preload not done, is loaded whole, as before.
//
// Nothing of the safety argument changes: L alone decides the end of its range, after
// it stopped appending; T serves only after it read every offset up to that end
// (FinishLoad); the preload only moves the reading of the ranges before L's to before
// the switch. A load that comes up short forgets what it collected (FinishLoad) and is
// retried whole.

// moveReadyWait bounds how long a leader keeps serving a moving partition while its target
// preloads it. Past it the hand-off starts anyway (the target reads the rest at the switch).
const moveReadyWait = 10 * time.Second

// preloadGather is how long the preload runner waits for more moves before a scan.
const preloadGather = 25 * time.Millisecond

// preload is a target's partition read ahead of a move's switch.
type preload struct {
	p         *partlog.Partition
	gen       uint64             // the move it was started for (updated when another move to here starts over the same ranges)
	ranges    []partlog.LogRange // the ranges read: the chain but its last (the leader's) range
	done      chan struct{}      // closed once the read finished
	ok        bool               // set before done closes: every range read
	cancelled bool               // the move ended otherwise; the read is forgotten
}

// movePrep holds a target's preloads (guarded by mu: the view sync, the peer server and
// the runner use them).
type movePrep struct {
	mu      sync.Mutex
	pre     map[partKey]*preload
	changed chan struct{} // closed and replaced whenever a preload starts or changes move
	queue   []*preload
	running bool
}

// notePreload is called, inside the partition set's Update, for a partition of view v
// this broker does not lead: it starts a preload when the partition is moving here, and
// forgets one that no longer fits.
func (b *Broker) notePreload(t *metadata.Topic, mp metadata.Partition, v *metadata.View) {
	k := partKey{t.ID, mp.Index}
	m := &b.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.pre[k]
	if !mp.Moving || mp.MovingTo != b.cfg.NodeID || mp.MoveGen == 0 || mp.Recovering {
		if cur != nil {
			cur.cancelled = true
			delete(m.pre, k)
		}
		return
	}
	chain := partlog.ChainOf(mp)
	closed := chain[:len(chain)-1]
	if cur != nil && slices.Equal(cur.ranges, closed) {
		if cur.gen != mp.MoveGen {
			cur.gen = mp.MoveGen
			m.signalLocked()
		}
		return
	}
	if cur != nil {
		cur.cancelled = true
	}
	p := partlog.New(t.Name, t.ID, mp.Index, mp.LeaderEpoch, mp.LogStartOffset)
	p.UseOwn(b.wal, partlog.SourceID{Broker: b.cfg.NodeID, Epoch: b.epoch})
	p.Apply(mp, v, b.tier != nil) // chain, epoch, log start, manifest; a Loading partition does not close
	pre := &preload{p: p, gen: mp.MoveGen, ranges: append([]partlog.LogRange(nil), closed...), done: make(chan struct{})}
	if m.pre == nil {
		m.pre = map[partKey]*preload{}
	}
	m.pre[k] = pre
	m.signalLocked()
	if len(closed) == 0 { // a chain of one range: nothing but the leader's to read
		pre.ok = true
		close(pre.done)
		return
	}
	m.queue = append(m.queue, pre)
	if !m.running {
		m.running = true
		b.wg.Add(1)
		go b.preloadRunner()
	}
}

func (m *movePrep) signalLocked() {
	if m.changed != nil {
		close(m.changed)
	}
	m.changed = make(chan struct{})
}

// cancelPreloads forgets the preloads of a topic that is gone.
func (b *Broker) cancelPreloads(id metadata.TopicID) {
	m := &b.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, pre := range m.pre {
		if k.id == id {
			pre.cancelled = true
			delete(m.pre, k)
		}
	}
}

// takePreload returns the preloaded partition for mp, now led here, and how many ranges of
// its chain are read already; nil when there is none that fits (the caller loads the
// partition whole). The preload is forgotten either way.
func (b *Broker) takePreload(id metadata.TopicID, mp metadata.Partition) (*partlog.Partition, int) {
	m := &b.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	k := partKey{id, mp.Index}
	pre := m.pre[k]
	if pre == nil {
		return nil, 0
	}
	delete(m.pre, k)
	pre.cancelled = true // taken or not, nobody else may use it
	select {
	case <-pre.done:
	default:
		return nil, 0 // still reading: the switch came first (the leader gave up waiting)
	}
	chain := partlog.ChainOf(mp)
	n := len(pre.ranges)
	if !pre.ok || mp.Recovering || len(chain) != n+2 || chain[n+1].Broker != b.cfg.NodeID || !slices.Equal(chain[:n], pre.ranges) {
		return nil, 0
	}
	return pre.p, n
}

// preloadRunner reads the queued preloads, everything queued at once (one scan per WAL
// directory), until the queue is empty.
func (b *Broker) preloadRunner() {
	defer b.wg.Done()
	m := &b.moves
	for {
		// Moves begun together (a drain, a reassignment of many partitions) reach this
		// broker in several views, one Raft entry each: gather them for one scan.
		select {
		case <-time.After(preloadGather):
		case <-b.ctx.Done():
		}
		m.mu.Lock()
		batch := m.queue
		m.queue = nil
		if len(batch) == 0 || b.ctx.Err() != nil {
			m.running = false
			for _, pre := range batch {
				close(pre.done)
			}
			m.mu.Unlock()
			return
		}
		parts := make([]*partlog.Partition, 0, len(batch))
		ranges := make(map[*partlog.Partition][]partlog.LogRange, len(batch))
		for _, pre := range batch {
			if !pre.cancelled {
				parts = append(parts, pre.p)
				ranges[pre.p] = pre.ranges
			}
		}
		m.mu.Unlock()
		start := time.Now()
		var err error
		if len(parts) > 0 {
			var st partlog.LoadStats
			st, err = b.loader.Load(parts, ranges, partlog.LoadOptions{AcceptCorruption: b.cfg.AcceptWALLoss})
			if err != nil {
				b.log.Warn("preloading moving partitions failed; they are read whole at the switch", "partitions", len(parts), "err", err)
			} else {
				b.log.Info("moving partitions preloaded", "partitions", len(parts), "wal_dirs", st.Dirs, "bytes_scanned", st.Bytes, "took", time.Since(start))
			}
		}
		m.mu.Lock()
		for _, pre := range batch {
			pre.ok = err == nil
			close(pre.done)
		}
		m.mu.Unlock()
	}
}

// serveMoveReady answers a leader's OpMoveReady once this broker's preload for the move
// is done (or failed), or after the request's wait. It never blocks the peer connection's
// reader.
func (b *Broker) serveMoveReady(req peer.MoveReadyRequest, respond func([]byte)) {
	k := partKey{req.Part.Topic, req.Part.Partition}
	// Not in b.wg: a peer request may arrive while Close waits for it; the goroutine
	// ends with b.ctx and touches nothing but movePrep.
	go func() {
		timer := time.NewTimer(min(req.Wait, moveReadyWait))
		defer timer.Stop()
		answer := peer.MoveNotReady
		defer func() { respond([]byte{answer}) }()
		m := &b.moves
		var grace <-chan time.Time
		for {
			m.mu.Lock()
			if m.changed == nil {
				m.changed = make(chan struct{})
			}
			pre, changed := m.pre[k], m.changed
			m.mu.Unlock()
			var done chan struct{}
			if pre != nil && pre.gen == req.Gen {
				done, grace = pre.done, nil // the preload is under way: wait for it
			} else if grace == nil && b.movingHere(k, req.Gen) {
				// This broker knows the move but has no preload of it (it started
				// while the move was pending): the view sync gets a moment, then the
				// leader hands off without waiting for a preload that will not come.
				grace = time.After(200 * time.Millisecond)
			}
			select {
			case <-grace:
				return
			case <-done: // nil (blocks) until there is a preload of this move
				m.mu.Lock()
				if pre.ok && !pre.cancelled {
					answer = peer.MoveReady
				}
				m.mu.Unlock()
				return
			case <-changed:
			case <-timer.C:
				return
			case <-b.ctx.Done():
				return
			}
		}
	}()
}

// movingHere reports whether the latest metadata has partition k moving here in move gen.
func (b *Broker) movingHere(k partKey, gen uint64) bool {
	t := b.meta.View().TopicByID(k.id)
	if t == nil || k.index < 0 || int(k.index) >= len(t.Partitions) {
		return false
	}
	mp := t.Partitions[k.index]
	return mp.Moving && mp.MovingTo == b.cfg.NodeID && mp.MoveGen == gen
}

// holdForTarget is called by applyLed for a Ready partition moving away (move gen): it
// reports whether the partition keeps serving for now because its target has not yet
// answered whether it preloaded it; the first call for a move starts the question.
// Inside the partition set's Update.
func (b *Broker) holdForTarget(p *partlog.Partition, mp metadata.Partition, v *metadata.View) bool {
	k := partKey{p.ID(), p.Index()}
	if mp.MoveGen == 0 || b.synced.ready[k] == mp.MoveGen {
		return false
	}
	if b.synced.asked == nil {
		b.synced.asked, b.synced.ready = map[partKey]uint64{}, map[partKey]uint64{}
	}
	if b.synced.asked[k] == mp.MoveGen {
		return true
	}
	var c *peer.Client
	if b.proxy != nil {
		c, _ = b.proxy.client(v, mp.MovingTo)
	}
	if c == nil { // no way to ask: hand off at once, as before
		b.synced.ready[k] = mp.MoveGen
		return false
	}
	b.synced.asked[k] = mp.MoveGen
	gen := mp.MoveGen
	req := peer.MoveReadyRequest{Part: peer.PartitionRef{Topic: p.ID(), Partition: p.Index()}, Gen: gen, Wait: moveReadyWait}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, moveReadyWait+2*time.Second)
		resp, err := c.Call(ctx, req.AppendTo(nil))
		cancel()
		if b.ctx.Err() != nil {
			return
		}
		if err != nil || len(resp) != 1 || resp[0] != peer.MoveReady {
			b.log.Info("move target not preloaded; handing off anyway", "topic", p.Topic(), "partition", p.Index(), "target", mp.MovingTo, "err", err)
		}
		b.parts.Update(func(partlog.SetTx) {
			if b.synced.asked[k] == gen {
				b.synced.ready[k] = gen
			}
		})
		b.resumeMove(p)
	}()
	return true
}

// forgetMove drops what holdForTarget kept of a partition's move. Inside Update.
func (b *Broker) forgetMove(k partKey) {
	delete(b.synced.asked, k)
	delete(b.synced.ready, k)
}
