package objread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-io/weir/objectstore/objfmt"
)

// blockKey names a block: its object and its position there.
type blockKey struct {
	obj string
	pos int64
}

func (k blockKey) group() string { return k.obj }

// block is a verified block: its bytes and its batches (aliasing the bytes), split once
// when fetched so that a cache hit costs no checksum.
type block struct {
	data       []byte
	batches    []objfmt.Batch
	prefetched bool        // fetched by readahead
	used       atomic.Bool // a Read used it (meaningful when prefetched)
}

// Memory of a cached block beyond its bytes: a Batch in the slice, the entry itself.
const (
	batchMem = 48
	entryMem = 128
)

func (b *block) size() int64 { return int64(len(b.data)) + batchMem*int64(len(b.batches)) + entryMem }

func (r *Reader) blockEvicted(b *block) {
	if b.prefetched && !b.used.Load() {
		r.m.readahead.WithLabelValues("wasted").Inc()
	}
}

// getBlocks returns the verified blocks bs of object key (adjacent blocks of one
// partition, as PartitionIndex.Blocks returns them): cached ones from the cache, missing
// ones with one GET for each run of adjacent missing blocks, and blocks another reader
// is fetching by waiting for that fetch.
func (r *Reader) getBlocks(ctx context.Context, key string, bs []objfmt.Block) ([]*block, error) {
	out := make([]*block, len(bs))
	for attempt := 0; ; attempt++ {
		waits, err := r.claimAndFetch(ctx, key, bs, out, purposeBlock)
		if err != nil {
			return nil, err
		}
		retry := false
		for _, w := range waits {
			b, err := w.c.wait(ctx)
			switch {
			case err == nil:
				out[w.i] = b
			case attempt == 0 && retryable(ctx, err):
				retry = true // fetch it ourselves on the next pass
			default:
				return nil, err
			}
		}
		if !retry {
			for _, b := range out {
				r.markUsed(b)
			}
			return out, nil
		}
	}
}

type waiter struct {
	i int
	c *call[*block]
}

// claimAndFetch fills out[i] for the blocks that are cached, fetches (under purpose) the
// ones nobody is fetching, and returns the calls to wait for. It returns the first error
// of its own fetches, after all of them finished.
func (r *Reader) claimAndFetch(ctx context.Context, key string, bs []objfmt.Block, out []*block, purpose string) ([]waiter, error) {
	fg := purpose != purposeReadahead // readahead neither counts lookups nor uses blocks
	count := func(c *prometheus.CounterVec) {
		if fg {
			c.WithLabelValues(kindBlock).Inc()
		}
	}
	var need []int
	var keys []blockKey
	for i, b := range bs {
		if out[i] != nil {
			continue
		}
		k := blockKey{key, b.Position}
		if c, ok := r.blocks.get(k); ok {
			count(r.m.hits)
			out[i] = c
			continue
		}
		need, keys = append(need, i), append(keys, k)
	}
	if len(need) == 0 {
		return nil, nil
	}
	calls, owner := r.blockFlight.claimMany(keys)
	callOf := make([]*call[*block], len(bs))
	var waits []waiter
	var runs [][2]int // [first, last] indexes into bs of runs of adjacent owned blocks
	for j, i := range need {
		if !owner[j] {
			count(r.m.coalesced)
			waits = append(waits, waiter{i, calls[j]})
			continue
		}
		if c, ok := r.blocks.get(keys[j]); ok { // finished between our miss and the claim
			count(r.m.hits)
			out[i] = c
			r.blockFlight.finish(keys[j], calls[j], c, nil)
			continue
		}
		count(r.m.misses)
		callOf[i] = calls[j]
		if n := len(runs); n > 0 && runs[n-1][1] == i-1 && !r.fullRun(bs[runs[n-1][0]:i+1]) {
			runs[n-1][1] = i
		} else {
			runs = append(runs, [2]int{i, i})
		}
	}
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for n, run := range runs {
		fetch := func() {
			a, b := run[0], run[1]+1
			errs[n] = r.fetchRun(ctx, key, bs[a:b], callOf[a:b], out[a:b], purpose)
		}
		if n == len(runs)-1 {
			fetch() // the last run on this goroutine, the others in parallel
		} else {
			wg.Go(fetch)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return waits, err
		}
	}
	return waits, nil
}

// fetchRun reads the adjacent blocks run with one ranged GET, verifies and caches each
// block, stores it in out and finishes its call. On an error the blocks before it are
// kept; it and the rest get the error.
func (r *Reader) fetchRun(ctx context.Context, key string, run []objfmt.Block, calls []*call[*block], out []*block, purpose string) (err error) {
	done := 0
	defer func() {
		for k := done; k < len(run); k++ {
			r.blockFlight.finish(blockKey{key, run[k].Position}, calls[k], nil, err)
		}
	}()
	off, n := objfmt.Span(run)
	if err := r.acquireGet(ctx); err != nil {
		return r.storeErr(key, off, n, err)
	}
	defer r.releaseGet()
	r.m.requests.WithLabelValues(purpose).Inc()
	rc, err := r.store.GetRange(ctx, key, off, n)
	if err != nil {
		return r.storeErr(key, off, n, err)
	}
	defer rc.Close()
	for k, blk := range run {
		buf := make([]byte, blk.Length)
		m, err := io.ReadFull(rc, buf)
		r.m.fetched.WithLabelValues(purpose).Add(float64(m))
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return r.corrupt(key, fmt.Errorf("block at %d: read %d of %d bytes: object too short", blk.Position, m, blk.Length))
		}
		if err != nil {
			return r.storeErr(key, off, n, err)
		}
		batches, err := objfmt.DecodeBlocks(run[k:k+1], buf)
		if err != nil {
			return r.corrupt(key, err)
		}
		b := &block{data: buf, batches: batches, prefetched: purpose == purposeReadahead}
		r.blocks.put(blockKey{key, blk.Position}, b, b.size())
		out[k] = b
		r.blockFlight.finish(blockKey{key, blk.Position}, calls[k], b, nil)
		done = k + 1
	}
	return nil
}

// fullRun reports whether run (adjacent blocks, the last one just added) is too long for
// one GET: more than one block and more than MaxGetBytes. A block is never split.
func (r *Reader) fullRun(run []objfmt.Block) bool {
	if r.cfg.MaxGetBytes <= 0 || len(run) < 2 {
		return false
	}
	_, n := objfmt.Span(run)
	return n > r.cfg.MaxGetBytes
}

// markUsed counts a prefetched block the first time a Read uses it.
func (r *Reader) markUsed(b *block) {
	if b.prefetched && b.used.CompareAndSwap(false, true) {
		r.m.readahead.WithLabelValues("used").Inc()
	}
}
