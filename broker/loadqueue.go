package broker

import (
	"time"

	"github.com/weir-io/weir/broker/partlog"
)

// Partitions this broker gains at runtime (graceful moves, a partition found short at
// start-up) are loaded by one goroutine in batches: everything waiting is loaded in one
// Loader.Load, which scans each WAL directory once for all of them. Draining a broker
// hands hundreds of partitions to each target at once; one scan per partition would read
// the previous leader's WAL hundreds of times.
//
// A partition whose load comes up short (a WAL not yet visible on the shared file
// system, a stale read) stays Loading and waits for a later batch, with a backoff.

type loadJob struct {
	p     *partlog.Partition
	whole bool      // read its whole chain (start-up) rather than up to its own range
	from  int       // ranges of the chain read already (a move's preload); 0 after a failed load
	after time.Time // not before (backoff)
	delay time.Duration
}

// queueLoad asks the load runner to load p.
func (b *Broker) queueLoad(p *partlog.Partition, whole bool) {
	b.queueLoadJob(loadJob{p: p, whole: whole})
}

// queueLoadFrom asks the load runner to load p, led here from the start of its last range,
// from range from of its chain on: the ranges before it were read already (a preload).
func (b *Broker) queueLoadFrom(p *partlog.Partition, from int) {
	b.queueLoadJob(loadJob{p: p, from: from})
}

func (b *Broker) queueLoadJob(j loadJob) {
	p := j.p
	j.delay = 50 * time.Millisecond
	b.loadMu.Lock()
	if b.loadQ == nil {
		b.loadQ = map[*partlog.Partition]loadJob{}
	}
	b.loadQ[p] = j
	start := !b.loadRunning
	b.loadRunning = true
	b.loadMu.Unlock()
	if start {
		b.wg.Add(1)
		go b.loadRunner()
	}
	select {
	case b.loadWake <- struct{}{}:
	default:
	}
}

// loadRunner loads queued partitions in batches until the queue is empty.
func (b *Broker) loadRunner() {
	defer b.wg.Done()
	for {
		b.loadMu.Lock()
		now := time.Now()
		var batch []loadJob
		next := time.Time{}
		for p, j := range b.loadQ {
			if p.State() != partlog.Loading || b.parts.Get(p.ID(), p.Index()) != p {
				delete(b.loadQ, p) // loaded meanwhile, or no longer led here
				continue
			}
			if j.after.After(now) {
				if next.IsZero() || j.after.Before(next) {
					next = j.after
				}
				continue
			}
			batch = append(batch, j)
		}
		if len(batch) == 0 && len(b.loadQ) == 0 {
			b.loadRunning = false
			b.loadMu.Unlock()
			return
		}
		b.loadMu.Unlock()
		if len(batch) == 0 {
			select {
			case <-time.After(time.Until(next)):
			case <-b.loadWake:
			case <-b.ctx.Done():
				return
			}
			continue
		}
		b.loadBatch(batch)
		if b.ctx.Err() != nil {
			return
		}
	}
}

// loadBatch loads the jobs together; the loaded ones leave the queue, the others wait a
// while (doubling up to 2 s).
func (b *Broker) loadBatch(jobs []loadJob) {
	start := time.Now()
	parts := make([]*partlog.Partition, 0, len(jobs))
	ranges := make(map[*partlog.Partition][]partlog.LogRange, len(jobs))
	wantEnd := make(map[*partlog.Partition]int64, len(jobs))
	for _, j := range jobs {
		chain := j.p.Chain()
		r, end := chain, int64(-1)
		if last := chain[len(chain)-1]; last.Broker == b.cfg.NodeID && !j.whole {
			r, end = chain[min(j.from, len(chain)-1):len(chain)-1], last.Start
		}
		parts = append(parts, j.p)
		ranges[j.p], wantEnd[j.p] = r, end
	}
	st, err := b.loader.Load(parts, ranges, partlog.LoadOptions{AcceptCorruption: b.cfg.AcceptWALLoss})
	if err != nil {
		b.log.Warn("loading partitions failed; retrying", "partitions", len(parts), "err", err)
	}
	loaded := 0
	b.loadMu.Lock()
	defer b.loadMu.Unlock()
	for _, j := range jobs {
		if err == nil && b.finishLoad(j.p, wantEnd[j.p]) {
			delete(b.loadQ, j.p)
			loaded++
			continue
		}
		if cur, ok := b.loadQ[j.p]; ok && cur.p == j.p {
			cur.from = 0 // FinishLoad forgot what was collected, the preload's too: read it all again
			cur.after = time.Now().Add(cur.delay)
			cur.delay = min(2*cur.delay, 2*time.Second)
			b.loadQ[j.p] = cur
		}
	}
	if loaded > 0 {
		b.log.Info("partitions loaded", "partitions", loaded, "of", len(jobs), "wal_dirs", st.Dirs, "bytes_scanned", st.Bytes, "took", time.Since(start))
	}
}
