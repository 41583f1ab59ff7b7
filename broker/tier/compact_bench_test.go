package tier

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
)

// BenchmarkCompactEndToEnd measures the log cleaner end to end on a store whose
// requests are counted (faulty.Store with no faults): store=localfs over a local
// directory, store=minio over a MinIO server on loopback (skipped without its binary,
// WEIR_MINIO; each object a PUT and ranged GETs through the S3 client). 64 MiB of a
// compacted topic (batches of 100 records with incompressible 1,000-byte values over
// 10,000 keys, uncompressed) is uploaded in 8 MiB objects, then a pass cleans it all;
// 16 MiB more of the same keys is uploaded and a second pass cleans again (the first
// pass's output is read and rewritten with the new data). Reported, over both passes:
// MB/s of input cleaned (the cleaner's own bytes_cleaned metric over the passes' wall
// time), PUTs, GETs and HEADs per GB of input cleaned, and the bytes the manifest
// names at the end over the bytes produced.
func BenchmarkCompactEndToEnd(b *testing.B) {
	b.Run("store=localfs", func(b *testing.B) { benchCompact(b, nil) })
	b.Run("store=minio", func(b *testing.B) { benchCompact(b, minioStore) })
}

// benchCompact is BenchmarkCompactEndToEnd on the store newStore makes (nil: the rig's
// localfs).
func benchCompact(b *testing.B, newStore func(testing.TB) objectstore.Store) {
	const (
		keys      = 10_000
		perBatch  = 100
		valueSize = 1000
		firstMB   = 64
		secondMB  = 16
	)
	var cleaned, puts, gets, heads, wall, outBytes, produced float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var counted *faulty.Store
		r := compactRig(b, rigOpts{wrap: func(s objectstore.Store) objectstore.Store {
			if newStore != nil {
				s = newStore(b)
			}
			counted = faulty.New(s, 1)
			return counted
		}})
		next := 0
		produceMB := func(mb int) {
			for n := 0; n < mb<<20/(perBatch*valueSize); n++ {
				var kv []string
				for j := 0; j < perBatch; j++ {
					v := make([]byte, valueSize/2)
					rand.Read(v)
					kv = append(kv, fmt.Sprintf("key-%06d", next%keys), fmt.Sprintf("%x", v))
					next++
				}
				r.produceKeyed(b, kv...)
			}
			for {
				more, err := r.tr.uploadOnce()
				if err != nil {
					b.Fatal(err)
				}
				if !more && r.manifest().UploadedThrough() == r.p.End() {
					return
				}
			}
		}
		pass := func() {
			p0, g0, h0 := counted.Calls(faulty.Put), counted.Calls(faulty.Get), counted.Calls(faulty.Head)
			c0 := testutil.ToFloat64(r.tr.metrics.cleanedBytes)
			start := time.Now()
			b.StartTimer()
			r.tr.CompactRound()
			b.StopTimer()
			wall += time.Since(start).Seconds()
			cleaned += testutil.ToFloat64(r.tr.metrics.cleanedBytes) - c0
			puts += float64(counted.Calls(faulty.Put) - p0)
			gets += float64(counted.Calls(faulty.Get) - g0)
			heads += float64(counted.Calls(faulty.Head) - h0)
			if n := testutil.ToFloat64(r.tr.metrics.cleanFailures); n != 0 {
				b.Fatalf("%v failed passes", n)
			}
		}
		produceMB(firstMB)
		pass()
		produceMB(secondMB)
		pass()
		for _, or := range r.manifest().Objects {
			if !or.Compacted {
				b.Fatalf("range %+v not cleaned", or)
			}
			outBytes += float64(or.Bytes)
		}
		for _, a := range r.acked {
			produced += float64(len(a))
		}
		if got := len(r.coldKeys(b)); got != keys {
			b.Fatalf("%d keys after the clean, want %d", got, keys)
		}
	}
	gb := cleaned / 1e9
	b.ReportMetric(cleaned/1e6/wall, "MB/s-cleaned")
	b.ReportMetric(puts/gb, "PUTs/GB")
	b.ReportMetric(gets/gb, "GETs/GB")
	b.ReportMetric(heads/gb, "HEADs/GB")
	b.ReportMetric(outBytes/produced, "kept/produced")
}

// coldKeys lists the distinct keys of the records the manifest names.
func (r *upRig) coldKeys(t testing.TB) map[string]bool {
	out := map[string]bool{}
	for _, kv := range r.coldRecords(t) {
		k, _, _ := strings.Cut(kv, "=")
		out[k] = true
	}
	return out
}
