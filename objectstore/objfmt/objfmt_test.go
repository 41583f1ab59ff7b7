package objfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/weir-io/weir/internal/crc32c"
	"io"
	"math/rand/v2"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := genParts(rng, 48, 80, 12, 1500)
	// one partition with batches larger than a block
	big := &testPart{topicID: [16]byte{0xff}, partition: 0}
	for i := range 5 {
		off := int64(i * 3)
		big.batches = append(big.batches, testBatch{off, off + 2, 100 + off + 2, makeBatch(off, 3, 20_000, 100+off, 9)})
	}
	parts = append(parts, big)
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })

	const blockSize = 32 << 10
	obj, sum := writeObject(t, parts, Options{BlockSize: blockSize})
	f, idx := mustIndex(t, obj)
	t.Logf("%d partitions, %d blocks, %d bytes (index %d)", len(sum.Partitions), sum.Blocks, sum.Size, sum.IndexLen)

	if f.ObjectSize() != int64(len(obj)) || f.IndexPos != sum.DataLen || f.IndexLen != sum.IndexLen {
		t.Fatalf("footer %+v, summary %+v", f, sum)
	}
	if len(idx.Partitions()) != len(parts) || len(sum.Partitions) != len(parts) || idx.BlockCount() != sum.Blocks {
		t.Fatalf("index has %d partitions / %d blocks, summary %d / %d, wrote %d partitions",
			len(idx.Partitions()), idx.BlockCount(), len(sum.Partitions), sum.Blocks, len(parts))
	}
	for i, ps := range sum.Partitions {
		if ps != idx.Partitions()[i].PartitionSummary {
			t.Fatalf("summary %+v, index %+v", ps, idx.Partitions()[i].PartitionSummary)
		}
	}

	// The short tail leaves the index out; the full object has it.
	if f2, idx2, err := ParseTail(obj[len(obj)-FooterSize-10:]); err != nil || idx2 != nil || f2 != f {
		t.Fatalf("short tail: %v %v %+v", idx2, err, f2)
	}
	if _, idx2, err := ParseTail(obj[len(obj)-FooterSize-int(f.IndexLen):]); err != nil || idx2 == nil {
		t.Fatalf("exact tail: %v %v", idx2, err)
	}

	for _, tp := range parts {
		p, ok := idx.Partition(tp.topicID, tp.partition)
		if !ok {
			t.Fatalf("partition %x/%d missing", tp.topicID, tp.partition)
		}
		last := tp.batches[len(tp.batches)-1]
		var maxTs int64 = tp.batches[0].maxTs
		for _, b := range tp.batches {
			maxTs = max(maxTs, b.maxTs)
		}
		want := PartitionSummary{tp.topicID, tp.partition, tp.batches[0].base, last.last, tp.bytes(), int64(len(tp.batches)), maxTs}
		if p.PartitionSummary != want {
			t.Fatalf("partition summary %+v, want %+v", p.PartitionSummary, want)
		}

		// The whole run in one GET gives back exactly the batches written.
		off, n := Span(p.AllBlocks())
		if off != p.Position || n != p.Bytes {
			t.Fatalf("span %d+%d, partition at %d+%d", off, n, p.Position, p.Bytes)
		}
		all, err := DecodeBlocks(p.AllBlocks(), obj[off:off+n])
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(tp.batches) {
			t.Fatalf("%d batches back, wrote %d", len(all), len(tp.batches))
		}
		for i, b := range all {
			w := tp.batches[i]
			if b.BaseOffset != w.base || b.LastOffset != w.last || b.MaxTimestamp != w.maxTs || !bytes.Equal(b.Data, w.data) {
				t.Fatalf("batch %d: got [%d,%d] ts %d, want [%d,%d] ts %d", i, b.BaseOffset, b.LastOffset, b.MaxTimestamp, w.base, w.last, w.maxTs)
			}
		}

		decoded := map[int64][]Batch{} // block position → batches
		decode := func(blk Block) []Batch {
			if bs, ok := decoded[blk.Position]; ok {
				return bs
			}
			bs, err := DecodeBlock(blk, obj[blk.Position:blk.Position+blk.Length])
			if err != nil {
				t.Fatal(err)
			}
			decoded[blk.Position] = bs
			return bs
		}
		// Every boundary: first and last offset of each batch, and one inside it.
		for _, w := range tp.batches {
			for _, o := range []int64{w.base, w.last, w.base + (w.last-w.base)/2} {
				blks := p.Blocks(o, 0)
				if len(blks) != 1 || o < blks[0].FirstOffset || o > blks[0].LastOffset {
					t.Fatalf("Blocks(%d, 0) = %+v", o, blks)
				}
				got := SeekBatch(decode(blks[0]), o)
				if len(got) == 0 || got[0].BaseOffset != w.base || !bytes.Equal(got[0].Data, w.data) {
					t.Fatalf("offset %d: batch %+v, want base %d", o, got, w.base)
				}
			}
		}
		// Below the first offset: from the first block; past the last: nothing.
		if p.FirstOffset > 0 {
			if blks := p.Blocks(p.FirstOffset-1, 0); len(blks) != 1 || blks[0] != p.AllBlocks()[0] {
				t.Fatalf("Blocks below first offset: %+v", blks)
			}
		}
		if blks := p.Blocks(p.LastOffset+1, 1<<40); blks != nil {
			t.Fatalf("Blocks past last offset: %+v", blks)
		}
		// maxBytes: the blocks fit (after the first), and the next one would not.
		for _, maxBytes := range []int64{0, blockSize, 3 * blockSize, 1 << 40} {
			for _, blk := range p.AllBlocks() {
				got := p.Blocks(blk.FirstOffset, maxBytes)
				_, n := Span(got)
				if got[0] != blk || (len(got) > 1 && n > maxBytes) {
					t.Fatalf("Blocks(%d, %d): %d blocks of %d bytes", blk.FirstOffset, maxBytes, len(got), n)
				}
				end := blk.Position + n
				if end < p.Position+p.Bytes {
					nextLen := p.Blocks(got[len(got)-1].LastOffset+1, 0)[0].Length
					if n+nextLen <= maxBytes {
						t.Fatalf("Blocks(%d, %d) stopped early", blk.FirstOffset, maxBytes)
					}
				}
				if bs, err := DecodeBlocks(got, obj[blk.Position:end]); err != nil || bs[0].BaseOffset != blk.FirstOffset {
					t.Fatalf("DecodeBlocks: %v", err)
				}
			}
		}
	}
	if _, ok := idx.Partition([16]byte{1, 2, 3}, 0); ok {
		t.Fatal("found a partition never written")
	}
	if _, ok := idx.Partition(parts[0].topicID, 1000); ok {
		t.Fatal("found a partition never written")
	}
}

func TestBlockSizing(t *testing.T) {
	const bs = 10_000
	topic := [16]byte{1}
	var parts []*testPart
	// p0: 3000-byte batches → 3 per block; p1: one huge batch between small ones; p2: one small batch.
	sizes := [][]int{
		{3000, 3000, 3000, 3000, 3000, 3000, 3000},
		{2000, 2000, 25_000, 2000, 9000, 1000, 10_000, 10_001},
		{100},
	}
	for pi, ss := range sizes {
		p := &testPart{topicID: topic, partition: int32(pi)}
		off := int64(0)
		for _, s := range ss {
			b := exactBatch(t, off, s)
			p.batches = append(p.batches, testBatch{off, off, 5, b})
			off++
		}
		parts = append(parts, p)
	}
	wantBlocks := []string{
		"[[3000 3000 3000] [3000 3000 3000] [3000]]",
		"[[2000 2000] [25000] [2000] [9000 1000] [10000] [10001]]",
		"[[100]]",
	}
	obj, _ := writeObject(t, parts, Options{BlockSize: bs})
	_, idx := mustIndex(t, obj)
	for pi, tp := range parts {
		p, _ := idx.Partition(topic, int32(pi))
		var lens [][]int
		for _, blk := range p.AllBlocks() {
			bats, err := DecodeBlock(blk, obj[blk.Position:blk.Position+blk.Length])
			if err != nil {
				t.Fatal(err)
			}
			var l []int
			for _, b := range bats {
				l = append(l, len(b.Data))
			}
			lens = append(lens, l)
			if blk.Length > bs && len(bats) != 1 {
				t.Fatalf("partition %d: block of %d bytes with %d batches", pi, blk.Length, len(bats))
			}
		}
		// Greedy: a block is cut only when the next batch would not fit.
		for i := 0; i+1 < len(lens); i++ {
			n := 0
			for _, l := range lens[i] {
				n += l
			}
			if n+lens[i+1][0] <= bs {
				t.Fatalf("partition %d: block %d (%d bytes) cut before a batch of %d", pi, i, n, lens[i+1][0])
			}
		}
		if got := fmt.Sprint(lens); got != wantBlocks[pi] {
			t.Errorf("partition %d batches %v → blocks %s, want %s", pi, batchLens(tp), got, wantBlocks[pi])
		}
	}
	// Default block size.
	if w := NewWriter(io.Discard, Options{}); w.blockSize != DefaultBlockSize {
		t.Fatalf("default block size %d", w.blockSize)
	}
}

// exactBatch makes a one-record batch of exactly size bytes.
func exactBatch(t *testing.T, off int64, size int) []byte {
	for v := size - minBatchLen; v >= 0; v-- {
		if b := makeBatch(off, 1, v, 5, 1); len(b) == size {
			return b
		}
	}
	t.Fatalf("no batch of %d bytes", size)
	return nil
}

func batchLens(p *testPart) []int {
	var l []int
	for _, b := range p.batches {
		l = append(l, len(b.data))
	}
	return l
}

func TestLargeBlocksDefaultSize(t *testing.T) {
	// 3 MiB in 16 KiB batches at the default block size: blocks just under 1 MiB.
	p := &testPart{topicID: [16]byte{7}, partition: 3}
	off := int64(0)
	for p.bytes() < 3<<20 {
		b := makeBatch(off, 16, 1000, 1, 2)
		p.batches = append(p.batches, testBatch{off, off + 15, 16, b})
		off += 16
	}
	obj, sum := writeObject(t, []*testPart{p}, Options{})
	_, idx := mustIndex(t, obj)
	pi, _ := idx.Partition(p.topicID, p.partition)
	for i, blk := range pi.AllBlocks() {
		if blk.Length > DefaultBlockSize || (i < len(pi.AllBlocks())-1 && blk.Length < DefaultBlockSize-int64(len(p.batches[0].data))) {
			t.Fatalf("block %d of %d bytes", i, blk.Length)
		}
	}
	if sum.Blocks != 4 {
		t.Fatalf("%d blocks for %d bytes", sum.Blocks, p.bytes())
	}
}

func TestBlockForTimestamp(t *testing.T) {
	p := &testPart{topicID: [16]byte{3}, partition: 1}
	for i := range 10 {
		off := int64(i)
		ts := int64(1000 + i*10)
		p.batches = append(p.batches, testBatch{off, off, ts, makeBatch(off, 1, 500, ts, 1)})
	}
	obj, _ := writeObject(t, []*testPart{p}, Options{BlockSize: 1200}) // two batches a block
	_, idx := mustIndex(t, obj)
	pi, _ := idx.Partition(p.topicID, p.partition)
	for _, c := range []struct {
		ts    int64
		first int64
		ok    bool
	}{{0, 0, true}, {1000, 0, true}, {1011, 2, true}, {1020, 2, true}, {1090, 8, true}, {1091, 0, false}} {
		b, ok := pi.BlockForTimestamp(c.ts)
		if ok != c.ok || (ok && b.FirstOffset != c.first) {
			t.Errorf("BlockForTimestamp(%d) = %+v %v, want first %d %v", c.ts, b, ok, c.first, c.ok)
		}
	}
}

func TestEmptyObject(t *testing.T) {
	obj, sum := writeObject(t, nil, Options{})
	if sum.Size != FooterSize+indexHeaderLen || len(sum.Partitions) != 0 {
		t.Fatalf("%+v", sum)
	}
	_, idx := mustIndex(t, obj)
	if len(idx.Partitions()) != 0 || idx.DataLen() != 0 {
		t.Fatal("empty object has partitions")
	}
}

func TestManyPartitionsIndexBeyondTail(t *testing.T) {
	// ~2000 single-block partitions: the index (≈ 136 KiB) does not fit in the tail,
	// and ReadIndex needs exactly two reads.
	var parts []*testPart
	b := makeBatch(0, 1, 10, 1, 1)
	for i := range 2000 {
		parts = append(parts, &testPart{topicID: [16]byte{byte(i >> 8), byte(i)}, partition: int32(i % 7), batches: []testBatch{{0, 0, 1, b}}})
	}
	obj, sum := writeObject(t, parts, Options{})
	if sum.IndexLen <= DefaultTailSize {
		t.Fatalf("index of %d bytes fits in the tail", sum.IndexLen)
	}
	r := &countingReader{r: bytes.NewReader(obj)}
	_, idx, err := ReadIndex(r, int64(len(obj)))
	if err != nil || len(idx.Partitions()) != 2000 || r.reads != 2 {
		t.Fatalf("ReadIndex: %v, %d reads", err, r.reads)
	}
	// A small object is read with one read.
	obj, _ = writeObject(t, parts[:10], Options{})
	r = &countingReader{r: bytes.NewReader(obj)}
	if _, _, err := ReadIndex(r, int64(len(obj))); err != nil || r.reads != 1 {
		t.Fatalf("ReadIndex: %v, %d reads", err, r.reads)
	}
	// A size that disagrees with the footer.
	if _, _, err := ReadIndex(bytes.NewReader(append([]byte{0}, obj...)), int64(len(obj)+1)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong size: %v", err)
	}
	if _, _, err := ReadIndex(bytes.NewReader(obj[:20]), 20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tiny object: %v", err)
	}
}

type countingReader struct {
	r     io.ReaderAt
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

func smallObject(t *testing.T) ([]byte, Footer, *Index) {
	rng := rand.New(rand.NewPCG(3, 4))
	parts := genParts(rng, 6, 10, 5, 300)
	obj, _ := writeObject(t, parts, Options{BlockSize: 2000})
	f, idx := mustIndex(t, obj)
	if idx.BlockCount() < 8 {
		t.Fatalf("only %d blocks", idx.BlockCount())
	}
	return obj, f, idx
}

func TestCorruptFooter(t *testing.T) {
	obj, f, _ := smallObject(t)
	foot := obj[len(obj)-FooterSize:]
	if got, err := ParseFooter(foot); err != nil || got != f {
		t.Fatal(err)
	}
	for i := range foot {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(foot)
			c[i] ^= x
			if _, err := ParseFooter(c); err == nil {
				t.Fatalf("footer byte %d ^ %#x not detected", i, x)
			}
		}
	}
	for n := range FooterSize {
		if _, err := ParseFooter(foot[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("footer of %d bytes: %v", n, err)
		}
	}
	// A well-formed footer of a future version or with flags is ErrVersion.
	for _, off := range []int{8, 12} {
		c := bytes.Clone(foot)
		binary.LittleEndian.PutUint32(c[off:], 2)
		binary.LittleEndian.PutUint32(c[32:], crc32c.Checksum(c[:32]))
		if _, err := ParseFooter(c); !errors.Is(err, ErrVersion) {
			t.Fatalf("field at %d = 2: %v", off, err)
		}
	}
	// Index length beyond the limit, with a valid checksum.
	c := bytes.Clone(foot)
	binary.LittleEndian.PutUint32(c[24:], MaxIndexLen+1)
	binary.LittleEndian.PutUint32(c[32:], crc32c.Checksum(c[:32]))
	if _, err := ParseFooter(c); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge index: %v", err)
	}
}

func TestCorruptIndex(t *testing.T) {
	obj, f, _ := smallObject(t)
	ib := obj[f.IndexPos : f.IndexPos+f.IndexLen]
	for i := range ib {
		c := bytes.Clone(ib)
		c[i] ^= 1 << (i % 8)
		if _, err := ParseIndex(c, f); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("index byte %d flipped: %v", i, err)
		}
	}
	if _, err := ParseIndex(ib[:len(ib)-1], f); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short index: %v", err)
	}

	// Structural damage behind a valid checksum: each must be rejected by the checks.
	np := int(binary.LittleEndian.Uint32(ib))
	// blk0, blk1: the first two block entries of the first partition with two blocks
	blk0, k := -1, 0
	for i := range np {
		cnt := int(binary.LittleEndian.Uint32(ib[indexHeaderLen+partEntryLen*i+20:]))
		if cnt >= 2 {
			blk0 = indexHeaderLen + partEntryLen*np + blockEntryLen*k
			break
		}
		k += cnt
	}
	if blk0 < 0 {
		t.Fatal("no partition with two blocks")
	}
	blk1 := blk0 + blockEntryLen
	cases := map[string]func(c []byte){
		"partition count": func(c []byte) { binary.LittleEndian.PutUint32(c[0:], uint32(np+1)) },
		"block count":     func(c []byte) { binary.LittleEndian.PutUint32(c[4:], 1<<31) },
		"negative part":   func(c []byte) { binary.LittleEndian.PutUint32(c[indexHeaderLen+16:], 0x80000000) },
		"unsorted": func(c []byte) {
			copy(c[indexHeaderLen:], c[indexHeaderLen+partEntryLen:indexHeaderLen+partEntryLen+20])
		},
		"zero blocks":       func(c []byte) { binary.LittleEndian.PutUint32(c[indexHeaderLen+20:], 0) },
		"too many blocks":   func(c []byte) { binary.LittleEndian.PutUint32(c[indexHeaderLen+20:], 1000) },
		"last < first":      func(c []byte) { binary.LittleEndian.PutUint64(c[blk0+8:], 0) },
		"offset gap":        func(c []byte) { binary.LittleEndian.PutUint64(c[blk1:], binary.LittleEndian.Uint64(c[blk1:])+1) },
		"position gap":      func(c []byte) { binary.LittleEndian.PutUint64(c[blk1+16:], binary.LittleEndian.Uint64(c[blk1+16:])+1) },
		"length past data":  func(c []byte) { binary.LittleEndian.PutUint32(c[blk0+24:], uint32(f.IndexPos)+1) },
		"length 1":          func(c []byte) { binary.LittleEndian.PutUint32(c[blk0+24:], 1) },
		"zero batches":      func(c []byte) { binary.LittleEndian.PutUint32(c[blk0+28:], 0) },
		"batches > offsets": func(c []byte) { binary.LittleEndian.PutUint32(c[blk0+28:], 1000) },
		"huge position":     func(c []byte) { binary.LittleEndian.PutUint64(c[blk0+16:], 1<<63) },
	}
	for name, mutate := range cases {
		c := bytes.Clone(ib)
		mutate(c)
		f2 := f
		f2.IndexCRC = crc32c.Checksum(c)
		if _, err := ParseIndex(c, f2); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The runs must tile the data region.
	for _, pos := range []int64{f.IndexPos - 1, f.IndexPos + 1, 0} {
		f2 := f
		f2.IndexPos = pos
		if _, err := ParseIndex(ib, f2); !errors.Is(err, ErrCorrupt) {
			t.Errorf("index position %d: %v", pos, err)
		}
	}
}

func TestCorruptBatch(t *testing.T) {
	obj, _, idx := smallObject(t)
	p := idx.Partitions()[0]
	blk := p.AllBlocks()[0]
	data := obj[blk.Position : blk.Position+blk.Length]
	if _, err := DecodeBlock(blk, data); err != nil {
		t.Fatal(err)
	}
	// Every flipped byte of a block is caught (block checksum).
	for i := range data {
		c := bytes.Clone(data)
		c[i] ^= 0x10
		if _, err := DecodeBlock(blk, c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("block byte %d flipped: %v", i, err)
		}
	}
	if _, err := DecodeBlock(blk, data[:len(data)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short block: %v", err)
	}
	// Without the block checksum (recomputed: the Writer itself wrote bad bytes),
	// DecodeBlock still catches the frame (base offset by the offsets check, length,
	// magic); the batch CRCs it leaves to the block checksum, which vouches for them
	// (the Writer verified them). SplitBatches, for bytes no block checksum covers,
	// catches every byte from the length field on, except the leader epoch.
	first, err := SplitBatches(data)
	if err != nil {
		t.Fatal(err)
	}
	n := len(first[0].Data)
	for i := range n {
		if i >= 12 && i < 16 {
			continue // partitionLeaderEpoch: covered by nothing but the block checksum
		}
		c := bytes.Clone(data)
		c[i] ^= 0x04
		b2 := blk
		b2.CRC = crc32c.Checksum(c)
		if _, err := DecodeBlock(b2, c); (i < 12 || i == 16) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("batch byte %d flipped, block checksum fixed: %v", i, err)
		}
		if i >= 8 {
			if _, err := SplitBatches(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("SplitBatches: batch byte %d flipped: %v", i, err)
			}
		}
	}
	// Index entry that disagrees with the bytes.
	for name, b2 := range map[string]Block{
		"batches": {FirstOffset: blk.FirstOffset, LastOffset: blk.LastOffset, Length: blk.Length, Batches: blk.Batches + 1, CRC: blk.CRC},
		"first":   {FirstOffset: blk.FirstOffset + 1, LastOffset: blk.LastOffset, Length: blk.Length, Batches: blk.Batches, CRC: blk.CRC},
		"last":    {FirstOffset: blk.FirstOffset, LastOffset: blk.LastOffset + 1, Length: blk.Length, Batches: blk.Batches, CRC: blk.CRC},
	} {
		if _, err := DecodeBlock(b2, data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAddRejects(t *testing.T) {
	topic := [16]byte{5}
	b := func(off int64, n int) []byte { return makeBatch(off, n, 10, 1, 1) }
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	must(w.Add(topic, 0, 10, 12, 1, b(10, 3)))
	expect(w.Add(topic, 0, 14, 14, 1, b(14, 1)), ErrOutOfOrder) // gap
	expect(w.Add(topic, 0, 12, 12, 1, b(12, 1)), ErrOutOfOrder) // overlap
	expect(w.Add(topic, 0, 5, 5, 1, b(5, 1)), ErrOutOfOrder)    // backwards
	must(w.Add(topic, 0, 13, 13, 1, b(13, 1)))
	must(w.Add(topic, 1, 0, 0, 1, b(0, 1)))
	expect(w.Add(topic, 0, 14, 14, 1, b(14, 1)), ErrPartitionReopened)

	// Bad batches: header disagrees, wrong length, bad CRC, bad magic, several batches.
	expect(w.Add(topic, 1, 1, 2, 1, b(1, 1)), ErrBadBatch)
	expect(w.Add(topic, 1, 1, 1, 1, b(2, 1)), ErrBadBatch)
	expect(w.Add(topic, 1, 1, 1, 1, b(1, 1)[:70]), ErrBadBatch)
	expect(w.Add(topic, 1, 1, 1, 1, append(b(1, 1), b(2, 1)...)), ErrBadBatch)
	bad := b(1, 1)
	bad[len(bad)-1] ^= 1
	expect(w.Add(topic, 1, 1, 1, 1, bad), ErrBadBatch)
	magic := b(1, 1)
	magic[16] = 1
	expect(w.Add(topic, 1, 1, 1, 1, magic), ErrBadBatch)
	expect(w.Add(topic, -1, 1, 1, 1, b(1, 1)), ErrBadBatch)
	expect(w.Add(topic, 1, -1, -1, 1, b(1, 1)), ErrBadBatch)
	expect(w.Add(topic, 1, 1, 1, 1, nil), ErrBadBatch)

	// SkipBatchCRC accepts the bad CRC (the header checks stay).
	w2 := NewWriter(io.Discard, Options{SkipBatchCRC: true})
	must(w2.Add(topic, 1, 1, 1, 1, bad))
	expect(w2.Add(topic, 1, 2, 2, 1, magic), ErrBadBatch)

	// Rejected adds changed nothing.
	must(w.Add(topic, 1, 1, 1, 1, b(1, 1)))
	sum, err := w.Close()
	must(err)
	want := []PartitionSummary{
		{topic, 0, 10, 13, int64(len(b(10, 3)) + len(b(13, 1))), 2, 1},
		{topic, 1, 0, 1, int64(2 * len(b(0, 1))), 2, 1},
	}
	if len(sum.Partitions) != 2 || sum.Partitions[0] != want[0] || sum.Partitions[1] != want[1] {
		t.Fatalf("summary %+v, want %+v", sum.Partitions, want)
	}
	_, idx := mustIndex(t, buf.Bytes())
	if len(idx.Partitions()) != 2 {
		t.Fatal("index")
	}
	expect(w.Add(topic, 1, 2, 2, 1, b(2, 1)), ErrClosed)
	_, err = w.Close()
	expect(err, ErrClosed)
}

type failWriter struct{ n int }

var errDisk = errors.New("disk on fire")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errDisk
	}
	f.n--
	return len(p), nil
}

func TestWriteErrorIsSticky(t *testing.T) {
	topic := [16]byte{5}
	w := NewWriter(&failWriter{n: 1}, Options{})
	if err := w.Add(topic, 0, 0, 0, 1, makeBatch(0, 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(topic, 0, 1, 1, 1, makeBatch(1, 1, 1, 1, 1)); !errors.Is(err, errDisk) {
		t.Fatal(err)
	}
	if err := w.Add(topic, 0, 1, 1, 1, makeBatch(1, 1, 1, 1, 1)); !errors.Is(err, errDisk) {
		t.Fatal(err)
	}
	if _, err := w.Close(); !errors.Is(err, errDisk) {
		t.Fatal(err)
	}
	// A failing index write.
	w = NewWriter(&failWriter{n: 1}, Options{})
	if err := w.Add(topic, 0, 0, 0, 1, makeBatch(0, 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); !errors.Is(err, errDisk) {
		t.Fatal(err)
	}
}
