package objread

import (
	"context"
	"testing"
	"time"
)

// BenchmarkReadSequential reads a 64 MiB partition (one object, 1 MiB blocks, batches
// of 16 records of 1 KiB) from localfs with a cold Reader, 1 MiB per Read, as a
// catching-up consumer does: throughput with readahead and without, on localfs as it
// is and with 10 ms added to every GET.
func BenchmarkReadSequential(b *testing.B) {
	f := newFixture(b)
	p := &tpart{topic: [16]byte{1}, part: 0}
	for off := int64(0); p.bytes() < 64<<20; off += 16 {
		ts := 1_700_000_000_000 + off
		p.batches = append(p.batches, tbatch{off, off + 15, ts + 15, makeBatch(off, 16, 1024, ts)})
	}
	size := f.put("o/bench.obj", 0, p)
	objs := []ObjectRef{ref("o/bench.obj", size, p)}
	// S3's first-byte latency is tens of milliseconds: where readahead pays. The
	// sleep is that latency, the thing measured, not a wait for anything.
	latency := func(ctx context.Context, key string, off, n int64) error {
		time.Sleep(10 * time.Millisecond) // on purpose: the injected latency
		return nil
	}
	for _, c := range []struct {
		name string
		cfg  Config
		hook func(ctx context.Context, key string, off, n int64) error
	}{
		{"readahead", DefaultConfig(), nil},
		{"no-readahead", noReadahead(), nil},
		{"readahead-10ms", DefaultConfig(), latency},
		{"no-readahead-10ms", noReadahead(), latency},
	} {
		b.Run(c.name, func(b *testing.B) {
			f.cs.setHook(c.hook)
			b.SetBytes(int64(p.bytes()))
			gets := f.cs.count()
			for b.Loop() {
				r, err := New(f.cs, c.cfg)
				if err != nil {
					b.Fatal(err)
				}
				for off := p.first(); off <= p.last(); {
					data := read(b, r, p, off, 1<<20, objs)
					off = p.batches[p.holding(b, off)+countBatches(data)-1].last + 1
				}
				r.Close()
			}
			b.ReportMetric(float64(f.cs.count()-gets)/float64(b.N), "GETs/op")
		})
	}
}
