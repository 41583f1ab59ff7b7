package objread

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/objfmt"
)

func TestSecondReadNoGETs(t *testing.T) {
	p := newPart(1, 0, 0, 100, 4, 80)
	f, r, objs := onePart(t, "o/x.obj", 2048, p)
	first := read(t, r, p, 40, 8000, objs)
	if got := f.cs.count(); got != 2 {
		t.Fatalf("cold read: %d GETs, want 2 (tail, one run of blocks)", got)
	}
	for range 3 {
		if again := read(t, r, p, 40, 8000, objs); string(again) != string(first) {
			t.Fatal("second read differs")
		}
	}
	if got := f.cs.count(); got != 2 {
		t.Fatalf("repeated reads issued %d more GETs", got-2)
	}
	// The result is the caller's: changing it does not change the cache.
	first[0] ^= 0xff
	checkRead(t, p, 40, read(t, r, p, 40, 8000, objs))
	if hits := promtest.ToFloat64(r.m.hits.WithLabelValues(kindBlock)); hits == 0 {
		t.Fatal("no block cache hits counted")
	}
}

// TestRunsAroundCachedBlocks: missing blocks on both sides of a cached one are two
// runs, one GET each, and the read is whole.
func TestRunsAroundCachedBlocks(t *testing.T) {
	p := newPart(1, 0, 0, 100, 4, 80)
	f, r, objs := onePart(t, "o/x.obj", 2048, p)
	blks := f.blocks("o/x.obj", p)
	read(t, r, p, blks[1].FirstOffset, 1, objs)
	before := f.cs.count()
	_, n := objfmt.Span(blks[:4])
	got := read(t, r, p, 0, int(n), objs)
	if want := blks[0].Batches + blks[1].Batches + blks[2].Batches + blks[3].Batches; checkRead(t, p, 0, got) != want {
		t.Fatalf("read of 4 blocks: %d batches, want %d", countBatches(got), want)
	}
	if got := f.cs.count() - before; got != 2 {
		t.Fatalf("%d GETs around a cached block, want 2", got)
	}
}

// hold makes every GET wait until release is closed (or its context ends) and counts
// the GETs waiting.
func hold(s *countingStore) (release func(), waiting *atomic.Int32) {
	ch := make(chan struct{})
	waiting = new(atomic.Int32)
	s.setHook(func(ctx context.Context, key string, off, n int64) error {
		waiting.Add(1)
		defer waiting.Add(-1)
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("held: %w", ctx.Err())
		}
	})
	return func() { close(ch) }, waiting
}

// TestConcurrentReadersCoalesce: 16 readers of the same data at once cost one index
// GET and one block GET.
func TestConcurrentReadersCoalesce(t *testing.T) {
	p := newPart(1, 0, 0, 100, 4, 80)
	f, r, objs := onePart(t, "o/x.obj", 2048, p)
	release, waiting := hold(f.cs)

	var wg sync.WaitGroup
	results := make([][]byte, 16)
	for i := range results {
		wg.Go(func() { results[i] = read(t, r, p, 50, 6000, objs) })
	}
	testutil.Eventually(t, waitTimeout, "15 readers waiting for the index", func() bool {
		return waiting.Load() == 1 && promtest.ToFloat64(r.m.coalesced.WithLabelValues(kindIndex)) == 15
	})
	release()
	wg.Wait()
	for _, b := range results {
		checkRead(t, p, 50, b)
	}
	if got := f.cs.count(); got != 2 {
		t.Fatalf("16 concurrent readers: %d GETs, want 2 (index, blocks)", got)
	}
}

// TestWaiterLoadsWhenOwnerCancelled: a reader waiting for a fetch whose owner's client
// went away fetches itself instead of failing.
func TestWaiterLoadsWhenOwnerCancelled(t *testing.T) {
	p := newPart(1, 0, 0, 30, 4, 80)
	f, r, objs := onePart(t, "o/x.obj", 2048, p)
	read(t, r, p, 0, 1, objs) // index and block 0 cached
	off := f.blocks("o/x.obj", p)[1].FirstOffset

	release, waiting := hold(f.cs)
	ctx, cancel := context.WithCancel(context.Background())
	ownerErr := make(chan error, 1)
	go func() {
		_, err := r.Read(ctx, p.topic, p.part, off, 1, objs)
		ownerErr <- err
	}()
	testutil.Eventually(t, waitTimeout, "the owner's GET", func() bool { return waiting.Load() == 1 })
	got := make(chan []byte, 1)
	go func() { got <- read(t, r, p, off, 1, objs) }()
	testutil.Eventually(t, waitTimeout, "the second reader to wait", func() bool {
		return promtest.ToFloat64(r.m.coalesced.WithLabelValues(kindBlock)) == 1
	})
	cancel()
	if err := <-ownerErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("owner: %v, want context.Canceled", err)
	}
	testutil.Eventually(t, waitTimeout, "the waiter's own GET", func() bool { return waiting.Load() == 1 })
	release()
	checkRead(t, p, off, <-got)
}

// TestBlockCacheBound: the cache never holds more than its limit, the gauge says so,
// and a block larger than the whole cache is read but not cached.
func TestBlockCacheBound(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 400, 4, 80)
	huge := newPart(2, 0, 0, 2, 1, 40_000)
	size := f.put("o/x.obj", 2048, p, huge)
	reg := prometheus.NewRegistry()
	cfg := noReadahead()
	cfg.BlockCacheBytes = 16 << 10
	cfg.Registerer = reg
	r := f.reader(cfg)
	objs := []ObjectRef{ref("o/x.obj", size, p)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		off := p.first() + rng.Int64N(p.last()-p.first()+1)
		checkRead(t, p, off, read(t, r, p, off, 1+rng.IntN(6000), objs))
		if n := r.blocks.bytes(); n > cfg.BlockCacheBytes {
			t.Fatalf("block cache holds %d bytes, limit %d", n, cfg.BlockCacheBytes)
		}
	}
	if g := gauge(t, reg, "block"); g != float64(r.blocks.bytes()) || g < float64(cfg.BlockCacheBytes)/2 {
		t.Fatalf("gauge %v, cache %d bytes", g, r.blocks.bytes())
	}
	before := f.cs.count()
	hobjs := []ObjectRef{ref("o/x.obj", size, huge)}
	for range 2 {
		checkRead(t, huge, 0, read(t, r, huge, 0, 1, hobjs))
	}
	if got := f.cs.count() - before; got != 2 {
		t.Fatalf("block larger than the cache: %d GETs for two reads, want 2", got)
	}
}

// gauge returns the value of the weir_objread_cache_bytes gauge of kind in reg.
func gauge(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "weir_objread_cache_bytes" && m.GetLabel()[0].GetValue() == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no cache_bytes gauge of kind %s", kind)
	return 0
}

func TestForget(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 50, 4, 80)
	q := newPart(1, 1, 0, 50, 4, 80)
	size := f.put("o/x.obj", 2048, p)
	sizeQ := f.put("o/y.obj", 2048, q)
	r := f.reader(noReadahead())
	objs, qobjs := []ObjectRef{ref("o/x.obj", size, p)}, []ObjectRef{ref("o/y.obj", sizeQ, q)}
	read(t, r, p, 0, 1<<20, objs)
	read(t, r, q, 0, 1<<20, qobjs)
	before := f.cs.count()
	r.Forget("o/x.obj")
	if _, ok := r.indexes.get("o/x.obj"); ok || r.blocks.len() != len(f.blocks("o/y.obj", q)) {
		t.Fatalf("after Forget: %d blocks cached, want only y's %d", r.blocks.len(), len(f.blocks("o/y.obj", q)))
	}
	read(t, r, q, 0, 1<<20, qobjs) // still cached
	if f.cs.count() != before {
		t.Fatal("Forget dropped another object's entries")
	}
	checkRead(t, p, 0, read(t, r, p, 0, 1<<20, objs))
	if got := f.cs.count() - before; got != 2 {
		t.Fatalf("read after Forget: %d GETs, want 2 (index, blocks)", got)
	}
}

// TestConcurrentRandomReads races readers of several partitions and objects on a small
// cache, with readahead, and checks every result.
func TestConcurrentRandomReads(t *testing.T) {
	f := newFixture(t)
	var objs [][]ObjectRef
	var parts []*tpart
	for i := range 4 {
		p := newPart(byte(i), int32(i), 0, 120, 4, 90)
		var refs []ObjectRef
		for k := range 3 {
			key := fmt.Sprintf("o/%d-%d.obj", i, k)
			s := p.sub(40*k, 40*k+40)
			refs = append(refs, ref(key, f.put(key, 1024, s), s))
		}
		parts, objs = append(parts, p), append(objs, refs)
	}
	cfg := DefaultConfig()
	cfg.BlockCacheBytes, cfg.ReadaheadBytes, cfg.IndexCacheBytes = 24<<10, 8<<10, 2<<10
	r := f.reader(cfg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			i := g % 4
			p, off := parts[i], int64(0)
			for range 300 {
				if rng.IntN(10) == 0 || off > p.last() {
					off = rng.Int64N(p.last() + 1)
				}
				k := 0
				for objs[i][k].LastOffset < off {
					k++
				}
				b := read(t, r, p, off, 1+rng.IntN(4000), objs[i][k:])
				checkRead(t, p, off, b)
				off = p.batches[p.holding(t, off)+countBatches(b)-1].last + 1
				if g%3 == 0 {
					r.Forget(objs[i][rng.IntN(3)].Key)
				}
			}
		})
	}
	wg.Wait()
}

// countBatches counts the batches in b (valid batches back to back).
func countBatches(b []byte) int {
	n := 0
	for len(b) >= 12 {
		l := int(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])) + 12
		b, n = b[l:], n+1
	}
	return n
}
