package partlog

import "sync"

// Cache bounds the bytes of recent batches kept in memory for fetchers at the tail.
// Batches are evicted oldest first; an evicted batch is read back from the WAL. One Cache
// serves every partition of a broker.
//
// Lock order: the cache's mu is never held while taking a partition's mu; eviction
// collects its victims first and clears them after releasing mu.
type Cache struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	queue []cached // FIFO ring as a slice with a moving head
	head  int
	// flights are the replica batches being read (Load): later readers of the same
	// batch wait for the first one's bytes instead of reading the WAL again.
	flights map[*batchLoc]*flight
}

// flight is one read of a replica's batch in progress.
type flight struct {
	done chan struct{}
	data []byte
	err  error
}

type cached struct {
	p   *Partition
	loc *batchLoc
}

// NewCache returns a cache of at most limit bytes (0 or less: nothing is cached).
func NewCache(limit int64) *Cache { return &Cache{limit: limit} }

// Add keeps a just-committed batch's bytes (Prepared by p) for tail fetchers.
func (c *Cache) Add(p *Partition, pr Prepared) {
	loc := pr.loc
	if loc == nil {
		return
	}
	if c.limit <= 0 {
		p.mu.Lock()
		loc.data = nil
		p.mu.Unlock()
		return
	}
	c.track(p, loc)
}

// Fill keeps the bytes a fetch read from a WAL for a read replica's batch (pc, located
// by Read), so the next consumers of the batch in the replica's zone read memory, not
// the shared file system: a replica's file-system reads stay near one per produced byte
// however many consumers it serves. Only a replica's batches: a leader's are kept when
// written (Add) and read back only once evicted, by catch-up readers whose old batches
// would push the tail out. data must be the batch's bytes, not shared with the caller.
func (c *Cache) Fill(p *Partition, pc Piece, data []byte) {
	loc := pc.loc
	if c.limit <= 0 || loc == nil || len(data) != int(loc.size) {
		return
	}
	p.mu.Lock()
	if p.state != Following || loc.data != nil {
		p.mu.Unlock()
		return
	}
	loc.data = data
	p.mu.Unlock()
	c.track(p, loc)
}

// Load returns the bytes of a read replica's batch (pc, located by Read with no bytes in
// memory): read once with read, kept (Fill), and handed to every fetch that wanted them
// meanwhile: consumers of a zone tailing a partition ask for its newest batch together,
// and without this each of them read it from the file system. A failed read is not
// shared: a waiter then reads for itself. The bytes returned are the cache's: do not
// change them.
func (c *Cache) Load(p *Partition, pc Piece, read func([]byte) error) ([]byte, error) {
	loc := pc.loc
	if loc == nil || !c.Fills(p) {
		data := make([]byte, pc.Size)
		return data, read(data)
	}
	c.mu.Lock()
	if f := c.flights[loc]; f != nil {
		c.mu.Unlock()
		<-f.done
		if f.err == nil {
			return f.data, nil
		}
		data := make([]byte, pc.Size)
		return data, read(data)
	}
	f := &flight{done: make(chan struct{})}
	if c.flights == nil {
		c.flights = map[*batchLoc]*flight{}
	}
	c.flights[loc] = f
	c.mu.Unlock()
	data := make([]byte, pc.Size)
	if f.err = read(data); f.err == nil {
		f.data = data
		c.Fill(p, pc, data)
	}
	c.mu.Lock()
	delete(c.flights, loc)
	c.mu.Unlock()
	close(f.done)
	return data, f.err
}

// Fills reports whether Fill would keep bytes of p: a replica's, with a cache.
func (c *Cache) Fills(p *Partition) bool { return c.limit > 0 && p.State() == Following }

// track queues loc (its data set) and evicts the oldest past the limit.
func (c *Cache) track(p *Partition, loc *batchLoc) {
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
