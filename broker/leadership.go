package broker

import (
	"context"
	"errors"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// A broker serves the partitions the metadata says it leads. A partition's data may span
// several brokers' WALs (its log chain, partlog.ChainOf): after a leadership move the new
// leader reads the older offsets from the previous leaders' WALs on the shared file
// system and appends new ones to its own. Nothing is copied.
//
// Lifecycle on this broker: loading (collecting its batches from the chain's WALs) →
// ready (appends and reads) → closing (a graceful move: no new appends; once every
// prepared batch is synced the broker tells the controller where its range ends) → gone.

// leaseOK reports whether the broker may ack writes: with a controller, only while its
// lease is valid on its own clock, so it stops acking before the controller can fence it.
func (b *Broker) leaseOK() bool {
	if l, ok := b.meta.(metadata.Leaser); ok {
		return l.LeaseValid(time.Now())
	}
	return true
}

// leaseWait is how long an ack (or a produce's arrival) waits for a lapsed lease to be
// renewed before it answers NOT_LEADER_OR_FOLLOWER: a heartbeat that came late (a busy
// machine, a controller that died between two heartbeats) costs a delay, not a retry
// that non-idempotent producers turn into a duplicate. A renewed lease is as good as
// one that never lapsed: while it is valid no fence can have been committed
// (controller/leases.go), so a record synced before is in whatever a taker reads.
const leaseWait = time.Second

// awaitLease reports whether the lease is valid, waiting up to leaseWait (or until
// ctx ends or the broker is fenced) for a renewal.
func (b *Broker) awaitLease(ctx context.Context) bool {
	if b.leaseOK() {
		return true
	}
	if _, ok := b.meta.(metadata.Leaser); !ok {
		return true
	}
	t := time.NewTimer(leaseWait)
	defer t.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-b.fenced:
			return false
		case <-t.C:
			return b.leaseOK()
		case <-tick.C:
			if b.leaseOK() {
				return true
			}
		}
	}
}

// viewSync is what syncPartitions applied last: it diffs the next view against it, so
// applying a view costs O(changed partitions), not O(all): topics are shared between
// views when unchanged (the controller client's deltas keep their pointers), and
// partitions are compared field by field (metadata.Partition.Equal).
type viewSync struct {
	view *metadata.View
	// waiting are partitions to apply again although their metadata did not change: a
	// move that found them still loading (Apply starts the hand-off once they are ready),
	// or one whose target has not answered yet whether it preloaded them (moveprep.go).
	waiting map[partKey]bool
	// asked and ready: per partition moving away, the move (MoveGen) whose target was
	// asked whether it preloaded the partition, and the move it answered for (or the
	// question gave up): the hand-off of that move may start (holdForTarget).
	asked, ready map[partKey]uint64
}

type partKey struct {
	id    metadata.TopicID
	index int32
}

// syncPartitions applies a metadata view: creates partitions this broker now leads (and
// starts loading them), starts hand-offs for partitions moving away, and drops partitions
// it no longer leads. Only what changed since the last view applied is looked at.
func (b *Broker) syncPartitions(v *metadata.View) {
	self := b.cfg.NodeID
	var toLoad []*partlog.Partition
	preloaded := map[*partlog.Partition]int{} // partitions taken from a preload: ranges read already
	var toHandoff []handoffJob
	b.parts.Update(func(tx partlog.SetTx) {
		prev := b.synced.view
		if prev != nil && v.Version < prev.Version {
			return // a newer view was applied already (Refresh racing the watch)
		}
		if b.synced.waiting == nil {
			b.synced.waiting = map[partKey]bool{}
		}
		apply := func(t *metadata.Topic, mp metadata.Partition) {
			p := tx.Get(t.ID, mp.Index)
			if mp.Leader != self {
				if p != nil {
					b.drop(tx, p)
				}
				if !b.starting {
					b.notePreload(t, mp, v) // a move to here: read its chain ahead of the switch
				}
				return
			}
			if p == nil {
				if pre, n := b.takePreload(t.ID, mp); pre != nil && !b.starting {
					p = pre
					preloaded[p] = n
				} else {
					p = partlog.New(t.Name, t.ID, mp.Index, mp.LeaderEpoch, mp.LogStartOffset)
					p.UseOwn(b.wal, partlog.SourceID{Broker: b.cfg.NodeID, Epoch: b.epoch})
				}
				tx.Put(p)
				if !b.starting {
					toLoad = append(toLoad, p)
				}
			}
			if b.applyLed(p, mp, v) {
				toHandoff = append(toHandoff, handoffJob{p, mp.MoveGen})
			}
		}
		waiting := b.synced.waiting
		b.synced.waiting = map[partKey]bool{}
		for name, t := range v.Topics {
			var o *metadata.Topic
			if prev != nil {
				o = prev.Topics[name]
			}
			if o == t {
				continue
			}
			for i, mp := range t.Partitions {
				if o != nil && o.ID == t.ID && i < len(o.Partitions) && mp.Equal(&o.Partitions[i]) && !waiting[partKey{t.ID, mp.Index}] {
					continue
				}
				apply(t, mp)
			}
		}
		for k := range waiting { // those of unchanged topics: the loop above skipped them
			t := v.TopicByID(k.id)
			if t != nil && prev != nil && prev.Topics[t.Name] == t && int(k.index) < len(t.Partitions) {
				apply(t, t.Partitions[k.index])
			}
		}
		// Topics gone (or replaced by one of the same name and another ID): drop what
		// this broker still has of them. Without a previous view: anything the set holds
		// of a topic not in v.
		if prev == nil {
			tx.Topics(func(id metadata.TopicID, ps map[int32]*partlog.Partition) {
				if v.TopicByID(id) == nil {
					for _, p := range ps {
						b.drop(tx, p)
					}
				}
			})
			b.moves.mu.Lock()
			var gone []metadata.TopicID
			for k := range b.moves.pre {
				if v.TopicByID(k.id) == nil {
					gone = append(gone, k.id)
				}
			}
			b.moves.mu.Unlock()
			for _, id := range gone {
				b.cancelPreloads(id)
			}
		} else {
			for _, o := range prev.Topics {
				if v.TopicByID(o.ID) != nil {
					continue
				}
				b.cancelPreloads(o.ID)
				for i := range o.Partitions {
					if p := tx.Get(o.ID, o.Partitions[i].Index); p != nil {
						b.drop(tx, p)
					}
				}
			}
		}
		b.synced.view = v
	})
	var toRecover []*partlog.Partition
	for _, p := range toLoad {
		if mp, ok := partMeta(v, p); ok && mp.Recovering {
			toRecover = append(toRecover, p)
			continue
		}
		if len(p.Chain()) == 1 {
			b.finishLoad(p, p.Chain()[0].Start) // a new partition: nothing to read
			continue
		}
		b.queueLoadFrom(p, preloaded[p])
	}
	b.startRecovery(toRecover)
	for _, h := range toHandoff {
		b.wg.Add(1)
		go b.handoff(h)
	}
	b.syncGroupLoads(v) // groups of offsets partitions gained, moving away or dropped
	b.wakeTxnLoads()    // likewise transactions of __transaction_state partitions
	b.wakeShareLoads()  // and share-partition states of __share_group_state partitions
	// The zone proxy answers the links this view leaves waiting in vain (abandon.go).
	if b.proxy != nil { // nil in unit tests of the leadership alone
		b.proxy.startWatch()
		b.proxy.viewChanged()
	}
}

// applyLed applies mp to p, a partition led here, and reports whether a hand-off starts.
// A move that finds p still loading cannot start one: p then waits in viewSync.waiting
// until it is ready (resumeMove, or the next view). Inside the partition set's Update.
func (b *Broker) applyLed(p *partlog.Partition, mp metadata.Partition, v *metadata.View) bool {
	k := partKey{p.ID(), p.Index()}
	if !mp.Moving {
		b.forgetMove(k)
	} else if p.State() == partlog.Ready && b.holdForTarget(p, mp, v) {
		// Keep serving until the target has preloaded the partition (moveprep.go).
		serving := mp
		serving.Moving = false
		p.Apply(serving, v, b.tier != nil)
		b.synced.waiting[k] = true
		return false
	}
	handoff := p.Apply(mp, v, b.tier != nil)
	if mp.Moving && p.State() != partlog.Closing {
		b.synced.waiting[k] = true
	} else {
		delete(b.synced.waiting, k)
	}
	return handoff
}

// resumeMove applies the last view again to a partition whose load just finished, if a
// move found it loading (viewSync.waiting): its hand-off starts now. Waiting for the next
// metadata change instead left the move hanging in a quiet cluster (a drain timed out
// and failed the partitions over instead).
func (b *Broker) resumeMove(p *partlog.Partition) {
	var job *handoffJob
	var v *metadata.View
	b.parts.Update(func(tx partlog.SetTx) {
		v = b.synced.view
		if v == nil || !b.synced.waiting[partKey{p.ID(), p.Index()}] || tx.Get(p.ID(), p.Index()) != p {
			return
		}
		mp, ok := partMeta(v, p)
		if !ok || mp.Leader != b.cfg.NodeID {
			return // the next view drops it
		}
		if b.applyLed(p, mp, v) {
			job = &handoffJob{p, mp.MoveGen}
		}
	})
	if job != nil {
		b.wg.Add(1)
		go b.handoff(*job)
		b.syncGroupLoads(v)
		b.wakeTxnLoads()
		b.wakeShareLoads()
	}
}

// drop forgets a partition no longer led here; with the object tier, the part of its
// range in this broker's WAL that objects do not hold yet is pinned for the new leader.
func (b *Broker) drop(tx partlog.SetTx, p *partlog.Partition) {
	tx.Delete(p)
	b.forgetMove(partKey{p.ID(), p.Index()})
	if b.tier == nil {
		p.Drop(nil)
		return
	}
	if pos, end, ok := p.Drop(b.wal); ok {
		b.tier.Pin(p.Key(), pos, end)
	}
}

// lookup finds the partition of topic t a request addresses. It returns the error for a
// missing topic/partition or one this broker does not lead (or, with write, is not ready
// to append to).
func (b *Broker) lookup(t *metadata.Topic, index int32, write bool) (*partlog.Partition, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
	}
	p := b.parts.Get(t.ID, index)
	if p == nil {
		return nil, partlog.ErrNotLeader
	}
	if write && p.State() != partlog.Ready {
		return nil, partlog.ErrNotLeader
	}
	return p, nil
}

// finishLoad indexes what was collected (it must reach wantEnd, or -1: whatever the WALs
// hold) and restores group offsets when the partition is one of __consumer_offsets. It
// reports false when the load came up short: the partition stays Loading.
func (b *Broker) finishLoad(p *partlog.Partition, wantEnd int64) bool {
	gaps, err := p.FinishLoad(wantEnd, b.cfg.AcceptWALLoss, true)
	if err != nil {
		b.log.Error("partition load incomplete; it stays unavailable and is loaded again", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return false
	}
	if len(gaps) > 0 {
		b.log.Error("partition serves with offsets no WAL holds (--accept-wal-loss)", "topic", p.Topic(), "partition", p.Index(), "gaps", gaps)
	}
	b.coordinatorsServe(p)
	b.resumeMove(p)
	return true
}

// coordinatorsServe tells the coordinator whose state p holds that p just became Ready
// here (loaded after a move or a start, or recovered after a failover): the groups of a
// __consumer_offsets partition are restored, the transactions of a __transaction_state
// one loaded. A view applied earlier found p still loading, and the next view may be far
// off (nothing else changes in a quiet cluster): without this, the coordinator answered
// COORDINATOR_LOAD_IN_PROGRESS until then.
func (b *Broker) coordinatorsServe(p *partlog.Partition) {
	switch p.Topic() {
	case offsetsTopic:
		b.restoreGroups(p)
	case txnStateTopic:
		b.wakeTxnLoads()
	case shareStateTopic:
		b.wakeShareLoads()
	}
}

// handoffJob is a graceful move away from this broker: the partition, and the move's
// generation, so that a completion can only ever finish the move it was started for.
type handoffJob struct {
	p   *partlog.Partition
	gen uint64
}

// handoff finishes a graceful move away from this broker: appends are already refused;
// once every prepared batch is synced (or rolled back), the end of this broker's range is
// known and is reported to the controller with the move's generation, which makes the
// target the leader. A completion retried after the move was cancelled and started
// again (with more records appended meanwhile) is refused by its old generation, so a
// stale end can never cut acked records off.
func (b *Broker) handoff(h handoffJob) {
	defer b.wg.Done()
	p := h.p
	wake := make(chan struct{}, 1)
	var end int64
	for {
		p.Wait(wake)
		st, next, hw := p.Progress()
		if st != partlog.Closing {
			return
		}
		if next == hw {
			end = next
			break
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Millisecond):
		case <-b.ctx.Done():
			return
		}
	}
	if _, ok := b.meta.(metadata.MoveCompleter); !ok {
		return
	}
	delay := 20 * time.Millisecond
	for b.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := b.completeMove(ctx, p, end, h.gen) // batched with others finishing now
		cancel()
		if err == nil {
			b.log.Info("partition handed off", "topic", p.Topic(), "partition", p.Index(), "end_offset", end)
			return
		}
		if p.State() != partlog.Closing || errors.Is(err, metadata.ErrMoveRefused) || errors.Is(err, metadata.ErrFenced) {
			b.log.Info("hand-off not completed", "topic", p.Topic(), "partition", p.Index(), "err", err)
			return
		}
		b.log.Warn("completing move failed; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		time.Sleep(delay)
		delay = min(delay*2, time.Second)
	}
}
