package compact

import (
	"fmt"
	"testing"
)

// BenchmarkClean measures the cleaner alone (map build and rewrite of one pass) over
// 64 MiB-ish of batches of 100 records of 100-byte values, 10,000 distinct keys, so ~99%
// of the records are superseded: MB/s of input cleaned (docs/BENCHMARKS.md, Compaction).
func BenchmarkClean(b *testing.B) {
	for _, codec := range []int16{0, 2, 4} {
		b.Run(fmt.Sprint("codec", codec), func(b *testing.B) {
			val := make([]byte, 100)
			for i := range val {
				val[i] = byte('a' + i*7%26)
			}
			var batches [][]byte
			var total int64
			off := int64(0)
			for total < 16<<20 {
				recs := make([]rec, 100)
				for i := range recs {
					recs[i] = rec{key: fmt.Sprintf("key-%05d", (off+int64(i))*7919%10000), val: fmt.Sprintf("%d-%s", off+int64(i), val)}
				}
				bt := mkBatch(b, off, codec, -1, false, recs...)
				batches = append(batches, bt)
				total += int64(len(bt))
				off += 100
			}
			b.SetBytes(total)
			b.ResetTimer()
			var out int64
			for i := 0; i < b.N; i++ {
				m := NewOffsetMap(0)
				for _, bt := range batches {
					if err := m.Add(bt, nil, 0); err != nil {
						b.Fatal(err)
					}
				}
				c := &Cleaner{Map: m}
				res, err := c.Clean(batches, true)
				if err != nil {
					b.Fatal(err)
				}
				out = c.Stats.BytesOut
				_ = res
			}
			b.ReportMetric(float64(out)/float64(total), "out/in")
		})
	}
}
