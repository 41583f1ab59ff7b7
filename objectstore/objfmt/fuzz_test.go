package objfmt

import (
	"bytes"
	"encoding/binary"
	"github.com/weir-io/weir/internal/crc32c"
	"math"
	"math/rand/v2"
	"testing"
)

// seedObjects are small valid objects for the seed corpora.
func seedObjects(t testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	var objs [][]byte
	for _, c := range []struct{ parts, batches, recs, val, block int }{
		{0, 0, 0, 0, 0}, {1, 1, 1, 0, 0}, {3, 6, 3, 100, 400}, {5, 4, 2, 50, 200},
	} {
		obj, _ := writeObject(t, genParts(rng, c.parts, c.batches, c.recs, c.val), Options{BlockSize: c.block})
		objs = append(objs, obj)
	}
	return objs
}

func FuzzParseFooter(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj[len(obj)-FooterSize:])
		f.Add(obj)
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Add(make([]byte, FooterSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		ft, err := ParseFooter(data)
		if err == nil {
			// Canonical: the footer encodes back to the same bytes, and its sizes add up.
			if enc := appendFooter(nil, ft); !bytes.Equal(enc, data[len(data)-FooterSize:]) {
				t.Fatalf("footer %+v re-encodes to %x, parsed from %x", ft, enc, data[len(data)-FooterSize:])
			}
			if ft.IndexPos < 0 || ft.IndexLen < indexHeaderLen || ft.IndexLen > MaxIndexLen || ft.ObjectSize() < 0 {
				t.Fatalf("accepted footer %+v", ft)
			}
		}
		ft2, idx, err := ParseTail(data)
		if err == nil && ft2 != ft {
			t.Fatalf("ParseTail footer %+v, ParseFooter %+v", ft2, ft)
		}
		if idx != nil {
			checkIndex(t, idx, ft2)
		}
	})
}

func FuzzParseIndex(f *testing.F) {
	for _, obj := range seedObjects(f) {
		ft, err := ParseFooter(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(obj[ft.IndexPos:ft.IndexPos+ft.IndexLen], uint64(ft.IndexPos))
	}
	f.Add([]byte{}, uint64(0))
	f.Add(make([]byte, indexHeaderLen), uint64(0))
	f.Add(make([]byte, indexHeaderLen+partEntryLen+blockEntryLen), uint64(100))
	f.Fuzz(func(t *testing.T, data []byte, dataLen uint64) {
		// The footer is made to match, so the fuzzer gets past the checksum.
		ft := Footer{Version: Version, IndexPos: int64(dataLen), IndexLen: int64(len(data)), IndexCRC: crc32c.Checksum(data)}
		idx, err := ParseIndex(data, ft)
		if err != nil {
			return
		}
		// Canonical: the parsed index encodes back to the same bytes.
		if enc := appendIndex(nil, idx.Partitions()); !bytes.Equal(enc, data) {
			t.Fatalf("index re-encodes differently")
		}
		checkIndex(t, idx, ft)
	})
}

// checkIndex runs every lookup on an accepted index and checks that what it returns
// stays inside the data region and follows the documented rules.
func checkIndex(t *testing.T, idx *Index, ft Footer) {
	var total int64
	for i := range idx.Partitions() {
		p := &idx.Partitions()[i]
		if q, ok := idx.Partition(p.TopicID, p.Partition); !ok || q != p {
			t.Fatalf("Partition(%x, %d) does not find its own entry", p.TopicID, p.Partition)
		}
		total += p.Bytes
		for _, o := range []int64{math.MinInt64, -1, 0, p.FirstOffset - 1, p.FirstOffset, p.FirstOffset + 1,
			(p.FirstOffset + p.LastOffset) / 2, p.LastOffset - 1, p.LastOffset, p.LastOffset + 1, math.MaxInt64} {
			for _, mb := range []int64{math.MinInt64, 0, 1, DefaultBlockSize, math.MaxInt64} {
				bs := p.Blocks(o, mb)
				if o > p.LastOffset {
					if bs != nil {
						t.Fatalf("Blocks(%d) past the last offset %d: %d blocks", o, p.LastOffset, len(bs))
					}
					continue
				}
				if len(bs) == 0 {
					t.Fatalf("Blocks(%d, %d) of [%d, %d]: none", o, mb, p.FirstOffset, p.LastOffset)
				}
				off, n := Span(bs)
				if off < 0 || n <= 0 || off+n > ft.IndexPos || off < p.Position || off+n > p.Position+p.Bytes {
					t.Fatalf("span %d+%d outside the run %d+%d / data %d", off, n, p.Position, p.Bytes, ft.IndexPos)
				}
				if o >= p.FirstOffset && (o < bs[0].FirstOffset || o > bs[0].LastOffset) {
					t.Fatalf("Blocks(%d) starts with [%d, %d]", o, bs[0].FirstOffset, bs[0].LastOffset)
				}
			}
		}
		p.BlockForTimestamp(math.MinInt64)
		p.BlockForTimestamp(p.MaxTimestamp)
	}
	if total != ft.IndexPos {
		t.Fatalf("runs hold %d bytes of %d", total, ft.IndexPos)
	}
}

// fixCRCs recomputes the CRC of every batch frame it can walk, so that the fuzzer gets
// past the checksums to the rest of the decoder.
func fixCRCs(b []byte) {
	for pos := 0; pos+minBatchLen <= len(b); {
		n := int(int32(binary.BigEndian.Uint32(b[pos+8:]))) + 12
		if n < minBatchLen || n > len(b)-pos {
			return
		}
		binary.BigEndian.PutUint32(b[pos+17:], crc32c.Checksum(b[pos+21:pos+n]))
		pos += n
	}
}

func FuzzSplitBatches(f *testing.F) {
	for _, obj := range seedObjects(f) {
		ft, err := ParseFooter(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(obj[:ft.IndexPos])
		if ft.IndexPos > 0 {
			f.Add(obj[:ft.IndexPos-1])
		}
	}
	one := makeBatch(5, 3, 10, 1, 1)
	f.Add(one)
	f.Add(one[:minBatchLen])
	f.Add([]byte{})
	f.Add(make([]byte, minBatchLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		for pass := range 2 {
			if pass == 1 {
				data = bytes.Clone(data)
				fixCRCs(data)
			}
			bs, err := SplitBatches(data)
			if err != nil {
				continue
			}
			// The batches tile data and each is a valid frame.
			n := 0
			dense := true
			for i, b := range bs {
				if &b.Data[0] != &data[n] || b.LastOffset < b.BaseOffset || b.BaseOffset < 0 {
					t.Fatalf("batch %d: bad slice or offsets", i)
				}
				n += len(b.Data)
				if i > 0 && b.BaseOffset != bs[i-1].LastOffset+1 {
					dense = false
				}
			}
			if n != len(data) {
				t.Fatalf("batches cover %d of %d bytes", n, len(data))
			}
			if len(bs) == 0 {
				continue
			}
			blk := Block{FirstOffset: bs[0].BaseOffset, LastOffset: bs[len(bs)-1].LastOffset,
				Length: int64(len(data)), Batches: len(bs), CRC: crc32c.Checksum(data)}
			got, err := DecodeBlock(blk, data)
			if dense != (err == nil) || (err == nil && len(got) != len(bs)) {
				t.Fatalf("DecodeBlock: %v, dense %v", err, dense)
			}
			if dense && len(bs) > 1 {
				// Split in two adjacent blocks at the middle batch.
				m := len(bs) / 2
				cut := int64(len(data)) - int64(len(bytes.Join(batchData(bs[m:]), nil)))
				b1 := Block{FirstOffset: bs[0].BaseOffset, LastOffset: bs[m-1].LastOffset, Length: cut, Batches: m, CRC: crc32c.Checksum(data[:cut])}
				b2 := Block{FirstOffset: bs[m].BaseOffset, LastOffset: blk.LastOffset, Position: cut, Length: int64(len(data)) - cut, Batches: len(bs) - m, CRC: crc32c.Checksum(data[cut:])}
				if got, err := DecodeBlocks([]Block{b1, b2}, data); err != nil || len(got) != len(bs) {
					t.Fatalf("DecodeBlocks: %v", err)
				}
				if s := SeekBatch(got, bs[m].BaseOffset); len(s) != len(bs)-m {
					t.Fatalf("SeekBatch")
				}
			}
		}
	})
}

func batchData(bs []Batch) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = b.Data
	}
	return out
}
