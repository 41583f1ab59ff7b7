package objread

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// slowGets makes every GET of f's store take a while and records the most in flight at
// once and the largest range asked for.
type slowGets struct {
	inFlight, peak atomic.Int32
	largest        atomic.Int64
}

func (s *slowGets) install(f *fixture, delay time.Duration) {
	f.cs.setHook(func(ctx context.Context, key string, off, n int64) error {
		cur := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for old := s.peak.Load(); cur > old && !s.peak.CompareAndSwap(old, cur); old = s.peak.Load() {
		}
		for old := s.largest.Load(); n > old && !s.largest.CompareAndSwap(old, n); old = s.largest.Load() {
		}
		select {
		case <-time.After(delay):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// TestLargeReadParallelGets: a read of many missing blocks is split into GETs of about
// MaxGetBytes, in flight together, and still returns the right batches.
func TestLargeReadParallelGets(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 700, 4, 1000) // about 1.7 MB
	size := f.put("o/big.obj", 32<<10, p)
	objs := []ObjectRef{ref("o/big.obj", size, p)}
	cfg := noReadahead()
	cfg.MaxGetBytes = 128 << 10
	r := f.reader(cfg)
	read(t, r, p, p.first(), 1, objs) // the index, and the first block
	var sg slowGets
	sg.install(f, 20*time.Millisecond)
	before := f.cs.count()
	off := p.batches[p.holding(t, p.first())+checkRead(t, p, p.first(), read(t, r, p, p.first(), 1, objs))].base
	got := read(t, r, p, off, 1<<20, objs)
	n := checkRead(t, p, off, got)
	gets := f.cs.count() - before
	t.Logf("1 MiB read: %d batches, %d bytes in %d GETs, at most %d in flight, largest %d bytes", n, len(got), gets, sg.peak.Load(), sg.largest.Load())
	if gets < 6 {
		t.Errorf("%d GETs for about 1 MiB of 32 KiB blocks with 128 KiB GETs: not split", gets)
	}
	if l := sg.largest.Load(); l > cfg.MaxGetBytes+32<<10 {
		t.Errorf("a GET of %d bytes, MaxGetBytes %d (blocks of 32 KiB)", l, cfg.MaxGetBytes)
	}
	if sg.peak.Load() < 2 {
		t.Errorf("at most %d GET in flight: the split GETs run one after another", sg.peak.Load())
	}
}

// TestMaxGetsBoundsConcurrentReads: many partitions read at once never have more than
// MaxGets GETs in flight, and every read is right.
func TestMaxGetsBoundsConcurrentReads(t *testing.T) {
	f := newFixture(t)
	var parts []*tpart
	var objs [][]ObjectRef
	for i := range 6 {
		p := newPart(2, int32(i), 0, 120, 4, 1000)
		key := fmt.Sprintf("o/%d.obj", i)
		objs = append(objs, []ObjectRef{ref(key, f.put(key, 32<<10, p), p)})
		parts = append(parts, p)
	}
	cfg := noReadahead()
	cfg.MaxGetBytes = 64 << 10
	cfg.MaxGets = 2
	r := f.reader(cfg)
	var sg slowGets
	sg.install(f, 10*time.Millisecond)
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			b, err := r.Read(context.Background(), p.topic, p.part, p.first(), 256<<10, objs[i])
			if err != nil {
				t.Errorf("partition %d: %v", i, err)
				return
			}
			checkRead(t, p, p.first(), b)
		})
	}
	wg.Wait()
	if peak := sg.peak.Load(); peak > int32(cfg.MaxGets) || peak < 2 {
		t.Fatalf("%d GETs in flight at most, want MaxGets = %d", peak, cfg.MaxGets)
	}
}

// TestMaxGetsWaitEndsWithContext: a read waiting for a GET slot gives up when its
// context ends.
func TestMaxGetsWaitEndsWithContext(t *testing.T) {
	f := newFixture(t)
	p := newPart(3, 0, 0, 50, 4, 1000)
	size := f.put("o/w.obj", 32<<10, p)
	cfg := noReadahead()
	cfg.MaxGets = 1
	r := f.reader(cfg)
	r.gets <- struct{}{} // the only slot is taken
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Read(ctx, p.topic, p.part, 0, 1, []ObjectRef{ref("o/w.obj", size, p)}); err == nil {
		t.Fatal("a read without a GET slot succeeded")
	}
	<-r.gets
	read(t, r, p, 0, 1, []ObjectRef{ref("o/w.obj", size, p)})
}

// TestReadaheadKeepsSeveralGetsInFlight: a sequential reader's readahead fetches its
// window in GETs of about MaxGetBytes that are in flight together, starts again once a
// GET's worth of the window is missing, and the reader's later reads come from the cache.
func TestReadaheadKeepsSeveralGetsInFlight(t *testing.T) {
	f := newFixture(t)
	p := newPart(4, 0, 0, 1200, 4, 1000) // about 3 MB
	size := f.put("o/ra.obj", 32<<10, p)
	objs := []ObjectRef{ref("o/ra.obj", size, p)}
	cfg := DefaultConfig()
	cfg.BlockCacheBytes = 8 << 20
	cfg.ReadaheadBytes = 512 << 10
	cfg.MaxGetBytes = 128 << 10
	r := f.reader(cfg)
	var sg slowGets
	sg.install(f, 15*time.Millisecond)
	reads := 0
	for off := p.first(); off <= p.last(); reads++ {
		b := read(t, r, p, off, 64<<10, objs)
		off = p.batches[p.holding(t, off)+checkRead(t, p, off, b)-1].last + 1
		if reads == 1 { // the first readahead: a whole window
			testutil.Eventually(t, waitTimeout, "the first readahead to finish", func() bool { return r.ra.running.Load() == 0 })
		}
	}
	testutil.Eventually(t, waitTimeout, "readahead to finish", func() bool { return r.ra.running.Load() == 0 })
	ra := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeReadahead))
	fg := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeBlock))
	t.Logf("%d reads of %d bytes: %v foreground and %v readahead GETs, at most %d in flight, largest %d bytes", reads, p.bytes(), fg, ra, sg.peak.Load(), sg.largest.Load())
	if sg.peak.Load() < 3 {
		t.Errorf("at most %d GETs in flight: readahead of a 512 KiB window in 128 KiB GETs should have 4", sg.peak.Load())
	}
	if l := sg.largest.Load(); l > cfg.MaxGetBytes+32<<10 && l != objfmtTail(size) {
		t.Errorf("a GET of %d bytes, MaxGetBytes %d", l, cfg.MaxGetBytes)
	}
	// About one GET per 128 KiB read through, plus the tail of windows and the first reads.
	if max := float64(p.bytes())/float64(cfg.MaxGetBytes)*1.5 + 4; ra+fg > max {
		t.Errorf("%v block GETs for %d bytes, want at most %v", ra+fg, p.bytes(), max)
	}
	if fg > float64(reads)/4 {
		t.Errorf("%v of %d reads went to the store themselves: readahead fell behind", fg, reads)
	}
}

// objfmtTail is the size of the index GET of an object of size bytes (its tail).
func objfmtTail(size int64) int64 { return min(size, objfmt.DefaultTailSize) }
