package objread

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// maxTracked bounds the partitions whose last read end is remembered. Past it an
// arbitrary entry goes: at worst a sequential reader misses one readahead.
const maxTracked = 100_000

type partKey struct {
	topicID   [16]byte
	partition int32
}

// readahead is the state of background prefetching. It is disabled (slots nil) without
// a block cache, readahead bytes or readahead slots.
type readahead struct {
	window  int64
	chunk   int64         // what must be missing of the window before a prefetch starts
	slots   chan struct{} // a token per running prefetch
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running atomic.Int32 // prefetch goroutines alive (tests)

	mu   sync.Mutex
	ends map[partKey]int64 // where the partition's last Read ended
}

func (ra *readahead) init(cfg Config) {
	ra.ctx, ra.cancel = context.WithCancel(context.Background())
	ra.ends = map[partKey]int64{}
	if cfg.ReadaheadBytes > 0 && cfg.MaxReadaheads > 0 && cfg.BlockCacheBytes > 0 {
		ra.window = cfg.ReadaheadBytes
		ra.chunk = ra.window / 2
		if cfg.MaxGetBytes > 0 && cfg.MaxGetBytes < ra.chunk {
			ra.chunk = cfg.MaxGetBytes
		}
		ra.slots = make(chan struct{}, cfg.MaxReadaheads)
	}
}

// sequential reports whether a read at offset starts where the partition's last read
// ended: a consumer reading on.
func (ra *readahead) sequential(k partKey, offset int64) bool {
	if ra.slots == nil {
		return false
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	end, ok := ra.ends[k]
	return ok && end == offset
}

// track records where a read of the partition ended.
func (ra *readahead) track(k partKey, end int64) {
	if ra.slots == nil {
		return
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if _, ok := ra.ends[k]; !ok && len(ra.ends) >= maxTracked {
		for old := range ra.ends {
			delete(ra.ends, old)
			break
		}
	}
	ra.ends[k] = end
}

func (ra *readahead) stop() {
	ra.cancel()
	ra.wg.Wait()
}

type ownerKey struct{}

// ReadaheadContext returns ctx carrying owner: readahead that a Read with the returned
// context (or one derived from it) starts stops when owner ends, as well as at Close. A
// broker passes its client connection's context, so the prefetches of a consumer that
// went away are cancelled instead of filling the cache for nobody. (A reader waiting for
// a cancelled prefetch's block fetches it itself.)
func ReadaheadContext(ctx, owner context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// startReadahead prefetches, in the background, the blocks of up to ReadaheadBytes from
// offset `from` on (possibly into later objects). To issue few, large GETs it does
// nothing while less than a GET's worth (MaxGetBytes, at most half the window) of the
// window is missing, and then fetches all of the window that is missing, in GETs of
// about MaxGetBytes that run in parallel: a sequential reader keeps window/MaxGetBytes
// GETs in flight ahead of it. It never blocks the read: without a free slot it skips.
// The prefetch ends with the Reader, or with the owner of readCtx (ReadaheadContext).
func (r *Reader) startReadahead(readCtx context.Context, topicID [16]byte, partition int32, from int64, objs []ObjectRef) {
	for len(objs) > 0 && objs[0].LastOffset < from {
		objs = objs[1:]
	}
	if r.ra.slots == nil || len(objs) == 0 {
		return
	}
	spans, err := r.walk(r.ra.ctx, topicID, partition, from, r.ra.window, objs, true)
	complete := !errors.Is(err, errNotCached)
	if err != nil && complete {
		return // the manifest or the index does not go on: nothing to prefetch
	}
	covered, total := r.covered(spans)
	if r.ra.window-covered < r.ra.chunk || complete && covered == total {
		return
	}
	select {
	case r.ra.slots <- struct{}{}:
	default:
		r.m.readahead.WithLabelValues("skipped").Inc()
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.ra.slots
		return
	}
	r.ra.wg.Add(1)
	r.ra.running.Add(1)
	r.mu.Unlock()
	objs = slices.Clone(objs) // the caller may reuse its slice
	go func() {
		defer func() {
			<-r.ra.slots
			r.ra.running.Add(-1)
			r.ra.wg.Done()
		}()
		ctx := r.ra.ctx
		if owner, ok := readCtx.Value(ownerKey{}).(context.Context); ok {
			c, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(owner, cancel)
			defer func() {
				stop()
				cancel()
			}()
			ctx = c
		}
		if !complete { // some index was not cached: load it here, off the read's path
			if spans, err = r.walk(ctx, topicID, partition, from, r.ra.window, objs, false); len(spans) == 0 {
				r.log.Debug("objread: readahead", "key", objs[0].Key, "err", err)
				return
			}
		}
		for _, sp := range spans {
			out := make([]*block, len(sp.blocks))
			if _, err := r.claimAndFetch(ctx, sp.ref.Key, sp.blocks, out, purposeReadahead); err != nil {
				r.log.Debug("objread: readahead", "key", sp.ref.Key, "err", err)
				return
			}
		}
	}()
}

// covered returns the bytes of the leading blocks of spans that are cached or being
// fetched, and the bytes of all of them.
func (r *Reader) covered(spans []span) (covered, total int64) {
	gap := false
	for _, sp := range spans {
		for _, b := range sp.blocks {
			k := blockKey{sp.ref.Key, b.Position}
			if !gap && (r.blocks.contains(k) || r.blockFlight.inFlight(k)) {
				covered += b.Length
			} else {
				gap = true
			}
			total += b.Length
		}
	}
	return covered, total
}
