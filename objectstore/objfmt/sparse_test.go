package objfmt

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
)

// testdata/object-v1-sparse.obj is a version 1 object with FlagSparse: a compacted run
// whose batches leave gaps in the offsets (written with -update, like object-v1.obj).
const goldenObjectSparse = "testdata/object-v1-sparse.obj"

// sparseBlockSize puts the batches at 10 and 15 in one block, 40 in the next.
const sparseBlockSize = 300

// sparseRun: offsets 10-11, 15, 40-42 (gaps 12-14 and 16-39), cut in two blocks.
func sparseRun() *testPart {
	p := &testPart{topicID: goldenTopicA, partition: 3}
	for _, s := range [][2]int64{{10, 2}, {15, 1}, {40, 3}} {
		base, n := s[0], s[1]
		p.batches = append(p.batches, testBatch{base, base + n - 1, 1_700_000_000_000 + n - 1, makeBatch(base, int(n), 20, 1_700_000_000_000, byte(base))})
	}
	return p
}

// TestSparseGolden writes the sparse golden object again byte for byte and reads it
// back: the footer carries FlagSparse, the index accepts the gaps, the blocks decode
// with them, and a fetch of a removed offset starts at the next batch.
func TestSparseGolden(t *testing.T) {
	if *update {
		obj, _ := writeObject(t, []*testPart{sparseRun()}, Options{BlockSize: sparseBlockSize, Sparse: true})
		if err := os.WriteFile(goldenObjectSparse, obj, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden := readGolden(t, goldenObjectSparse)
	obj, _ := writeObject(t, []*testPart{sparseRun()}, Options{BlockSize: sparseBlockSize, Sparse: true})
	if !bytes.Equal(obj, golden) {
		t.Fatalf("today's sparse Writer differs from %s", goldenObjectSparse)
	}
	f, idx := mustIndex(t, golden)
	if f.Flags != FlagSparse || !f.Sparse() {
		t.Fatalf("footer %+v", f)
	}
	p, ok := idx.Partition(goldenTopicA, 3)
	if !ok || p.FirstOffset != 10 || p.LastOffset != 42 || p.Batches != 3 || len(p.AllBlocks()) != 2 {
		t.Fatalf("partition %+v blocks %+v", p, p.AllBlocks())
	}
	bs := p.Blocks(12, 0) // removed offset: the block holding the next batch
	off, n := Span(bs)
	batches, err := DecodeBlocks(bs, golden[off:off+n])
	if err != nil {
		t.Fatal(err)
	}
	if got := SeekBatch(batches, 12); len(got) == 0 || got[0].BaseOffset != 15 {
		t.Fatalf("seek 12: %+v", got)
	}
	var all []int64
	for _, blk := range p.AllBlocks() {
		bs, err := DecodeBlock(blk, golden[blk.Position:blk.Position+blk.Length])
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			all = append(all, b.BaseOffset)
		}
	}
	if !slices.Equal(all, []int64{10, 15, 40}) {
		t.Fatalf("batches at %v", all)
	}
}

// TestSparseOnlyWithFlag: gaps are refused by a dense Writer, by ParseIndex of an object
// without the flag, and by DecodeBlock of a dense block; a sparse block still refuses
// batches out of order.
func TestSparseOnlyWithFlag(t *testing.T) {
	run := sparseRun()
	w := NewWriter(&bytes.Buffer{}, Options{})
	b0, b1 := run.batches[0], run.batches[1]
	if err := w.Add(run.topicID, run.partition, b0.base, b0.last, b0.maxTs, b0.data); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(run.topicID, run.partition, b1.base, b1.last, b1.maxTs, b1.data); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap in a dense writer: %v", err)
	}
	sw := NewWriter(&bytes.Buffer{}, Options{Sparse: true})
	if err := sw.Add(run.topicID, run.partition, b1.base, b1.last, b1.maxTs, b1.data); err != nil {
		t.Fatal(err)
	}
	if err := sw.Add(run.topicID, run.partition, b0.base, b0.last, b0.maxTs, b0.data); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("overlap in a sparse writer: %v", err)
	}

	golden := readGolden(t, goldenObjectSparse)
	f, idx := mustIndex(t, golden)
	blk := idx.Partitions()[0].AllBlocks()[0]
	data := golden[blk.Position : blk.Position+blk.Length]
	dense := blk
	dense.Sparse = false
	if _, err := DecodeBlock(dense, data); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("dense decode of a sparse block: %v", err)
	}
	// The same index under a footer without the flag: the gap between blocks is corrupt.
	f.Flags = 0
	off, n := f.IndexRange()
	if _, err := ParseIndex(golden[off:off+n], f); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("sparse index without the flag: %v", err)
	}
}
