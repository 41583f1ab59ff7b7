package txn

// expire.go is what the coordinator does on its own, every so often: abort the
// transactions open past their timeout (a fence: the epoch is bumped, so the producer
// that let it time out is a zombie from now on, as in Kafka), and forget the
// transactional IDs idle for IDExpiration (a tombstone is written first).

import (
	"maps"
	"slices"
	"time"
)

// due is one ID a round acts on.
type due struct {
	p *partition
	t *txn
}

// collect is every ID of the loaded partitions with no change pending that match
// selects. Called without c.mu.
func (c *Coordinator) collect(match func(m *Meta, now time.Time) bool) []due {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []due
	for _, p := range c.parts {
		if p.loading {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(p.txns)) {
			if t := p.txns[id]; t.pending == nil && match(&t.m, now) {
				out = append(out, due{p, t})
			}
		}
	}
	return out
}

// timedOut reports whether m is a transaction open past its timeout.
func timedOut(m *Meta, now time.Time) bool {
	return m.State == Ongoing && now.After(m.Start.Add(m.Timeout))
}

// AbortTimedOut aborts, with the producer's epoch bumped, every Ongoing transaction of
// the loaded partitions open for longer than its timeout, and returns how many it
// aborted (their markers follow). It runs every Config.AbortCheckInterval.
func (c *Coordinator) AbortTimedOut() int {
	n := 0
	for _, d := range c.collect(timedOut) {
		c.mu.Lock()
		if c.current(d.p, d.t) && d.t.pending == nil && timedOut(&d.t.m, c.now()) {
			m := d.t.m
			if err := c.fence(d.p.ctx, d.p, d.t); err != nil {
				c.log.Warn("aborting a timed-out transaction failed; retried at the next round",
					"transactional_id", d.t.id, "producer_id", m.ProducerID, "epoch", m.ProducerEpoch, "err", err)
			} else {
				n++
				c.log.Info("transaction timed out: aborted, producer fenced", "transactional_id", d.t.id,
					"producer_id", m.ProducerID, "epoch", m.ProducerEpoch, "timeout", m.Timeout, "started", m.Start)
			}
		}
		c.mu.Unlock()
	}
	return n
}

// ExpireIDs forgets the transactional IDs of the loaded partitions that have no
// transaction open and have not changed for Config.IDExpiration: a tombstone is made
// durable, then the ID is gone (its next InitProducerId gets a new producer ID). It
// returns how many it forgot, and runs every Config.ExpirationCheckInterval.
func (c *Coordinator) ExpireIDs() int {
	expired := func(m *Meta, now time.Time) bool {
		return m.State.expirable() && !m.Updated.After(now.Add(-c.cfg.IDExpiration))
	}
	n := 0
	for _, d := range c.collect(expired) {
		c.mu.Lock()
		if c.current(d.p, d.t) && d.t.pending == nil && expired(&d.t.m, c.now()) {
			if err := c.write(d.p.ctx, d.p, d.t, deadTransition(d.t.m, c.now())); err != nil {
				c.log.Warn("expiring a transactional id failed; retried at the next round", "transactional_id", d.t.id, "err", err)
			} else {
				delete(d.p.txns, d.t.id)
				n++
			}
		}
		c.mu.Unlock()
	}
	if n > 0 {
		c.log.Info("idle transactional ids expired", "ids", n)
	}
	return n
}
