package broker

import "sync"

// tailCache bounds the bytes of recent batches kept in memory for fetchers at the tail.
// Batches are evicted oldest first; an evicted batch is read back from the WAL.
//
// Lock order: the cache's mu is never held while taking a partition's mu; eviction
// collects its victims first and clears them after releasing mu.
type tailCache struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	queue []cached // FIFO ring as a slice with a moving head
	head  int
}

type cached struct {
	p   *partition
	loc *batchLoc
}

func newTailCache(limit int64) *tailCache { return &tailCache{limit: limit} }

func (c *tailCache) add(p *partition, loc *batchLoc) {
	if c.limit <= 0 {
		p.mu.Lock()
		loc.data = nil
		p.mu.Unlock()
		return
	}
	var victims []cached
	c.mu.Lock()
	c.queue = append(c.queue, cached{p, loc})
	c.bytes += int64(loc.size)
	for c.bytes > c.limit && c.head < len(c.queue) {
		v := c.queue[c.head]
		c.queue[c.head] = cached{}
		c.head++
		c.bytes -= int64(v.loc.size)
		victims = append(victims, v)
	}
	if c.head > 1024 && c.head*2 > len(c.queue) {
		c.queue = append([]cached(nil), c.queue[c.head:]...)
		c.head = 0
	}
	c.mu.Unlock()
	for _, v := range victims {
		v.p.mu.Lock()
		v.loc.data = nil
		v.p.mu.Unlock()
	}
}
