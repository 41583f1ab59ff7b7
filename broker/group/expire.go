package group

// expire.go removes offsets nobody will read again, as Kafka's offset expiration does
// (offsets.retention.minutes, KIP-211), and offsets of deleted topics:
//   - an Empty group's offsets expire OffsetsRetention after the group became Empty
//     (after their commit, for a group that never had members: a "simple" consumer);
//   - a Stable consumer group's offsets of topics no member subscribes to expire
//     OffsetsRetention after their commit;
//   - an offset of a topic that was deleted, or deleted and created again under the
//     same name, goes at once (OffsetFetch already hides it);
//   - an offset with a pending transactional offset of its partition does not expire
//     until the transaction ends, and a group with pending offsets is not deleted (Kafka's
//     cleanupExpiredOffsets); the tombstone of a deleted topic's offset drops them.
// Expired offsets are tombstoned through the group's write queue; an Empty group left
// without offsets is deleted (Record.Deleted), so its name starts afresh.

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Expire runs one expiry round over the groups this coordinator owns and returns how
// many offsets it removed. The broker calls it every few minutes; writes go through each
// group's queue and Expire waits for them.
func (c *Coordinator) Expire(ctx context.Context) int {
	now := c.cfg.Clock.Now()
	var (
		wg sync.WaitGroup
		n  atomic.Int64
	)
	done := func(k int) {
		n.Add(int64(k))
		wg.Done()
	}
	for _, g := range c.allGroups() {
		if c.status(g.name) != Owned {
			continue
		}
		g.lock()
		if w := g.expiry(ctx, now, done); w != nil {
			wg.Add(1)
			g.enqueueWrite(w)
		}
		g.unlock()
	}
	wg.Wait()
	return int(n.Load())
}

// expiry is the write that removes g's expired offsets, or nil. Called with g locked.
func (g *group) expiry(ctx context.Context, now time.Time, done func(int)) *write {
	if g.removed || g.state == stateDead {
		return nil
	}
	retention := g.c.cfg.OffsetsRetention
	expired := func(o Offset) bool {
		if !g.c.current(o) {
			return true
		}
		if retention <= 0 || g.txn.unstable(o.Topic, o.Partition) {
			return false
		}
		switch {
		case g.state == stateEmpty:
			base := o.CommitTime
			if !g.emptySince.IsZero() {
				base = g.emptySince
			}
			return now.Sub(base) >= retention
		case g.state == stateStable && g.protocolType == "consumer":
			subscribed := g.subscribedTopics()
			return subscribed != nil && !subscribed[o.Topic] && now.Sub(o.CommitTime) >= retention
		}
		return false
	}
	var gone []Offset
	total := 0
	for _, ps := range g.offsets {
		for _, o := range ps {
			total++
			if expired(o) {
				gone = append(gone, Offset{Topic: o.Topic, Partition: o.Partition, CommitTime: now, Delete: true})
			}
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Slice(gone, func(i, j int) bool {
		if gone[i].Topic != gone[j].Topic {
			return gone[i].Topic < gone[j].Topic
		}
		return gone[i].Partition < gone[j].Partition
	})
	if len(gone) == total && g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && g.txn.empty() {
		return &write{ctx: ctx, deleted: true, apply: func(err error) {
			n := 0
			if err == nil {
				n = len(gone)
				clear(g.offsets)
				g.txn = txnOffsets{}
				g.meta = nil
				if !g.removed && g.state == stateEmpty && len(g.members) == 0 {
					g.removeFromCoordinator()
				}
			}
			done(n)
		}}
	}
	return &write{ctx: ctx, offsets: gone, apply: func(err error) {
		n := 0
		if err == nil {
			n = len(gone)
			for _, o := range gone {
				g.deleteOffset(o.Topic, o.Partition)
			}
		}
		done(n)
	}}
}
