package objread

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/internal/testutil"
)

func raConfig() Config {
	cfg := DefaultConfig()
	cfg.BlockCacheBytes = 1 << 20
	cfg.ReadaheadBytes = 256 << 10
	return cfg
}

// TestSequentialReadahead reads a 2 MiB partition in 32 KiB reads, from one object and
// from three: after the first two reads, readahead has every block in the cache before
// the read needs it, in few GETs.
func TestSequentialReadahead(t *testing.T) {
	for _, nobj := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d objects", nobj), func(t *testing.T) {
			f := newFixture(t)
			p := newPart(1, 0, 0, 780, 4, 1000)
			var objs []ObjectRef
			per := len(p.batches) / nobj
			for k := range nobj {
				key := fmt.Sprintf("o/%d.obj", k)
				s := p.sub(k*per, min(len(p.batches), (k+1)*per))
				objs = append(objs, ref(key, f.put(key, 32<<10, s), s))
			}
			cfg := raConfig()
			r := f.reader(cfg)
			reads, k := 0, 0
			for off := p.first(); off <= p.last(); reads++ {
				for objs[k].LastOffset < off {
					k++
				}
				b := read(t, r, p, off, 32<<10, objs[k:])
				off = p.batches[p.holding(t, off)+checkRead(t, p, off, b)-1].last + 1
				testutil.Eventually(t, waitTimeout, "readahead to finish", func() bool { return r.ra.running.Load() == 0 })
			}
			fg := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeBlock))
			ra := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeReadahead))
			used := promtest.ToFloat64(r.m.readahead.WithLabelValues("used"))
			wasted := promtest.ToFloat64(r.m.readahead.WithLabelValues("wasted"))
			misses := promtest.ToFloat64(r.m.misses.WithLabelValues(kindBlock))
			t.Logf("%d reads, %d bytes: foreground GETs %v, readahead GETs %v, used %v wasted %v", reads, p.bytes(), fg, ra, used, wasted)
			if fg > 2 || misses > 2 {
				t.Errorf("foreground block GETs %v, misses %v: want at most 2 (the reads before readahead starts)", fg, misses)
			}
			if max := float64(p.bytes())/float64(cfg.ReadaheadBytes/2) + float64(nobj) + 1; ra > max || ra < 2 {
				t.Errorf("readahead GETs %v, want 2 to %v", ra, max)
			}
			if used < float64(reads-3) || wasted != 0 {
				t.Errorf("readahead blocks used %v wasted %v", used, wasted)
			}
		})
	}
}

// TestCloseStopsReadahead: Close cancels a stalled readahead GET and waits for its
// goroutine; a read that finds no free readahead slot does not wait for one.
func TestCloseStopsReadahead(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 300, 4, 1000)
	q := newPart(1, 1, 0, 300, 4, 1000)
	size := f.put("o/x.obj", 32<<10, p, q)
	cfg := raConfig()
	cfg.MaxReadaheads = 1
	r, err := New(f.cs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, qobjs := []ObjectRef{ref("o/x.obj", size, p)}, []ObjectRef{ref("o/x.obj", size, q)}
	read(t, r, p, 0, 1, objs) // first reads: not sequential yet
	read(t, r, q, 0, 1, qobjs)

	// Stall the GETs of readahead (they run on its context) until it is cancelled.
	var mu sync.Mutex
	var stallErrs []error
	f.cs.setHook(func(ctx context.Context, key string, off, n int64) error {
		if ctx != r.ra.ctx {
			return nil
		}
		<-ctx.Done()
		mu.Lock()
		stallErrs = append(stallErrs, ctx.Err())
		mu.Unlock()
		return fmt.Errorf("stalled: %w", ctx.Err())
	})
	off := p.batches[1].base
	checkRead(t, p, off, read(t, r, p, off, 1, objs)) // sequential: readahead starts
	testutil.Eventually(t, waitTimeout, "a stalled readahead", func() bool { return r.ra.running.Load() == 1 })

	// q reads sequentially too, but the only slot is taken: no waiting.
	checkRead(t, q, q.batches[1].base, read(t, r, q, q.batches[1].base, 1, qobjs))
	if got := promtest.ToFloat64(r.m.readahead.WithLabelValues("skipped")); got != 1 {
		t.Fatalf("skipped readaheads %v, want 1", got)
	}

	r.Close()
	if n := r.ra.running.Load(); n != 0 {
		t.Fatalf("%d readahead goroutines after Close", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stallErrs) != 1 || !errors.Is(stallErrs[0], context.Canceled) {
		t.Fatalf("stalled GETs ended with %v, want one context.Canceled", stallErrs)
	}
	if _, err := r.Read(context.Background(), p.topic, p.part, off, 1, objs); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestTrackedPartitionsBounded(t *testing.T) {
	var ra readahead
	ra.init(DefaultConfig())
	for i := range maxTracked + 500 {
		ra.track(partKey{partition: int32(i)}, 1)
	}
	if len(ra.ends) != maxTracked {
		t.Fatalf("%d partitions tracked, bound %d", len(ra.ends), maxTracked)
	}
	if !ra.sequential(partKey{partition: maxTracked + 499}, 1) || ra.sequential(partKey{partition: maxTracked + 499}, 2) {
		t.Fatal("the latest partition's end is not tracked")
	}
}

// TestReadaheadEndsWithItsOwner: readahead started by a Read whose context carries an
// owner (the client's connection) is cancelled when the owner ends, while the Reader
// goes on serving; without an owner it would run until Close.
func TestReadaheadEndsWithItsOwner(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 300, 4, 1000)
	size := f.put("o/own.obj", 32<<10, p)
	r := f.reader(raConfig())
	objs := []ObjectRef{ref("o/own.obj", size, p)}
	owner, gone := context.WithCancel(context.Background())
	ctx := ReadaheadContext(context.Background(), owner)
	if _, err := r.Read(ctx, p.topic, p.part, 0, 1, objs); err != nil {
		t.Fatal(err)
	}
	stalled := make(chan error, 4)
	f.cs.setHook(func(gctx context.Context, key string, off, n int64) error {
		if gctx == context.Background() || gctx.Value(ownerKey{}) != nil {
			return nil // a foreground read
		}
		<-gctx.Done()
		stalled <- gctx.Err()
		return gctx.Err()
	})
	off := p.batches[1].base
	b, err := r.Read(ctx, p.topic, p.part, off, 1, objs) // sequential: readahead starts
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, p, off, b)
	testutil.Eventually(t, waitTimeout, "a stalled readahead", func() bool { return r.ra.running.Load() == 1 })
	gone()
	testutil.Eventually(t, waitTimeout, "the readahead to end with its owner", func() bool { return r.ra.running.Load() == 0 })
	if err := <-stalled; !errors.Is(err, context.Canceled) {
		t.Fatalf("stalled readahead GET ended with %v", err)
	}
	f.cs.setHook(nil)
	checkRead(t, p, p.batches[2].base, read(t, r, p, p.batches[2].base, 1, objs))
}
