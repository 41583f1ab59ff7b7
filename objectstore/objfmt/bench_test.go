package objfmt

import (
	"bytes"
	"testing"
)

// benchParts is 64 MiB of batches of 16 records of 1 KiB (about 16.5 KiB a batch) in 16
// partitions of 4 MiB, as an uploader would gather them.
func benchParts(tb testing.TB) []*testPart {
	const (
		objSize  = 64 << 20
		nparts   = 16
		recs     = 16
		valBytes = 1024
	)
	var parts []*testPart
	for i := range nparts {
		p := &testPart{topicID: [16]byte{byte(i / 4), 0xaa}, partition: int32(i % 4)}
		off := int64(1000 * i)
		for p.bytes() < objSize/nparts {
			b := makeBatch(off, recs, valBytes, 1_700_000_000_000+off, byte(off))
			p.batches = append(p.batches, testBatch{off, off + recs - 1, 1_700_000_000_000 + off + recs - 1, b})
			off += recs
		}
		parts = append(parts, p)
	}
	return parts
}

func BenchmarkWrite(b *testing.B) {
	parts := benchParts(b)
	for _, c := range []struct {
		name string
		opts Options
	}{{"verifyCRC", Options{}}, {"skipCRC", Options{SkipBatchCRC: true}}} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			buf.Grow(65 << 20)
			var sum Summary
			for b.Loop() {
				buf.Reset()
				w := NewWriter(&buf, c.opts)
				for _, p := range parts {
					for _, bt := range p.batches {
						if err := w.Add(p.topicID, p.partition, bt.base, bt.last, bt.maxTs, bt.data); err != nil {
							b.Fatal(err)
						}
					}
				}
				var err error
				if sum, err = w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(sum.DataLen)
			b.ReportMetric(float64(sum.Blocks), "blocks")
			b.ReportMetric(float64(sum.IndexLen), "index-bytes")
		})
	}
}

// BenchmarkRead reads a 64 MiB object as the read path would: the tail (footer and
// index), then for every partition the blocks from its first offset, 1 MiB per fetch,
// each span verified (block CRC, batch CRCs, offsets) and split into batches.
func BenchmarkRead(b *testing.B) {
	parts := benchParts(b)
	obj, sum := writeObject(b, parts, Options{})
	tailLen := min(len(obj), DefaultTailSize)

	b.Run("parse+lookup+verify", func(b *testing.B) {
		b.SetBytes(sum.DataLen)
		var batches []Batch
		for b.Loop() {
			_, idx, err := ParseTail(obj[len(obj)-tailLen:])
			if err != nil || idx == nil {
				b.Fatal(err, idx == nil)
			}
			for _, tp := range parts {
				p, ok := idx.Partition(tp.topicID, tp.partition)
				if !ok {
					b.Fatal("missing partition")
				}
				for from := p.FirstOffset; from <= p.LastOffset; {
					blocks := p.Blocks(from, 1<<20)
					off, n := Span(blocks)
					if batches, err = DecodeBlocks(blocks, obj[off:off+n]); err != nil {
						b.Fatal(err)
					}
					batches = SeekBatch(batches, from)
					from = batches[len(batches)-1].LastOffset + 1
				}
			}
		}
	})

	b.Run("parse+lookup", func(b *testing.B) {
		// Footer and index parse plus one point lookup per partition: what a broker does
		// per object before its first GET of data.
		for b.Loop() {
			_, idx, err := ParseTail(obj[len(obj)-tailLen:])
			if err != nil || idx == nil {
				b.Fatal(err)
			}
			for _, tp := range parts {
				p, _ := idx.Partition(tp.topicID, tp.partition)
				if len(p.Blocks(tp.batches[len(tp.batches)/2].base, 0)) != 1 {
					b.Fatal("lookup")
				}
			}
		}
		b.SetBytes(sum.DataLen) // MB/s of object data indexed per second
	})
}
