package objfmt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testdata/object-v<Version>.obj is a committed fixture, not a build output. It is
// written only by
//
//	go test ./objectstore/objfmt/ -run Golden -update
//
// which rewrites the current version's file and never an older one: a build must keep
// reading every older file (or refuse it with ErrVersion), so a format change bumps
// Version and adds a file instead of rewriting one.
var update = flag.Bool("update", false, "rewrite the golden file of the current format version in testdata/")

const goldenObjectV1 = "testdata/object-v1.obj"

// goldenBlockSize cuts the golden partitions' runs into two blocks each.
const goldenBlockSize = 200

var (
	goldenTopicA = [16]byte{'t', 'o', 'p', 'i', 'c', '-', 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0xa}
	goldenTopicB = [16]byte{'t', 'o', 'p', 'i', 'c', '-', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 0xb}
)

// goldenRuns is what the golden object was written from, in write order: topic B's run
// first, so that the index order (topic A first) differs from the data order. Only
// -update uses it; the other tests read the batches back from the file.
func goldenRuns() []*testPart {
	mk := func(topic [16]byte, partition int32, specs ...[4]int64) *testPart {
		p := &testPart{topicID: topic, partition: partition}
		for _, s := range specs { // base, records, value size, base timestamp
			base, n, val, ts := s[0], s[1], s[2], s[3]
			p.batches = append(p.batches, testBatch{base, base + n - 1, ts + n - 1, makeBatch(base, int(n), int(val), ts, byte(base))})
		}
		return p
	}
	return []*testPart{
		mk(goldenTopicB, 1, [4]int64{100, 2, 10, 1_700_000_000_000}, [4]int64{102, 1, 10, 1_700_000_000_500}, [4]int64{103, 3, 10, 1_700_000_000_200}),
		mk(goldenTopicA, 0, [4]int64{0, 1, 40, 1_700_000_001_000}, [4]int64{1, 2, 5, 1_700_000_000_900}, [4]int64{3, 1, 0, 1_700_000_002_000}),
	}
}

// What format version 1 stores for goldenRuns, in index order (topic A, then B), written
// down from the file once: a reader that derives other values misreads version 1.
var (
	goldenFooterV1     = Footer{Version: 1, IndexPos: 546, IndexLen: 8 + 2*24 + 4*44, IndexCRC: 0x00e07d5a}
	goldenPartitionsV1 = []PartitionIndex{
		{PartitionSummary: PartitionSummary{TopicID: goldenTopicA, Partition: 0, FirstOffset: 0, LastOffset: 3, Bytes: 261, Batches: 3, MaxTimestamp: 1_700_000_002_000}, Position: 285},
		{PartitionSummary: PartitionSummary{TopicID: goldenTopicB, Partition: 1, FirstOffset: 100, LastOffset: 105, Bytes: 285, Batches: 3, MaxTimestamp: 1_700_000_000_500}, Position: 0},
	}
	goldenBlocksV1 = [][]Block{
		{
			{FirstOffset: 0, LastOffset: 2, Position: 285, Length: 193, Batches: 2, MaxTimestamp: 1_700_000_001_000, CRC: 0x9a1dcf5f},
			{FirstOffset: 3, LastOffset: 3, Position: 478, Length: 68, Batches: 1, MaxTimestamp: 1_700_000_002_000, CRC: 0xe7066ab6},
		},
		{
			{FirstOffset: 100, LastOffset: 102, Position: 0, Length: 173, Batches: 2, MaxTimestamp: 1_700_000_000_500, CRC: 0xb84b7213},
			{FirstOffset: 103, LastOffset: 105, Position: 173, Length: 112, Batches: 1, MaxTimestamp: 1_700_000_000_202, CRC: 0x0f06d2be},
		},
	}
)

func readGolden(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenObjectWrite checks that today's Writer turns the golden object's batches
// into the golden object again, byte for byte: an accidental change of the block cut,
// the index or the footer fails here. It runs first so that -update rewrites the file
// before the other tests read it.
func TestGoldenObjectWrite(t *testing.T) {
	if Version != 1 {
		t.Fatalf("Version is %d: add the new version's golden file and expectations and compare against those", Version)
	}
	if *update {
		obj, _ := writeObject(t, goldenRuns(), Options{BlockSize: goldenBlockSize})
		if err := os.MkdirAll(filepath.Dir(goldenObjectV1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenObjectV1, obj, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", goldenObjectV1)
	}
	golden := readGolden(t, goldenObjectV1)
	_, idx := mustIndex(t, golden)
	// Add the batches again in the order of the runs in the data region.
	parts := slices.Clone(idx.Partitions())
	slices.SortFunc(parts, func(a, b PartitionIndex) int { return cmp.Compare(a.Position, b.Position) })
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{BlockSize: goldenBlockSize})
	for _, p := range parts {
		off, n := Span(p.AllBlocks())
		batches, err := DecodeBlocks(p.AllBlocks(), golden[off:off+n])
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if err := w.Add(p.TopicID, p.Partition, b.BaseOffset, b.LastOffset, b.MaxTimestamp, b.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes(); !bytes.Equal(got, golden) {
		t.Fatalf("today's Writer writes %d bytes that differ from the %d of %s. If the format change is "+
			"deliberate, bump Version, keep %s and add the new version's golden file with "+
			"go test ./objectstore/objfmt/ -run Golden -update", len(got), len(golden), goldenObjectV1, goldenObjectV1)
	}
}

// TestGoldenObjectRead reads the golden object with today's code: the footer, the index
// (through the tail and through a separate index read) and every block's batches.
func TestGoldenObjectRead(t *testing.T) {
	obj := readGolden(t, goldenObjectV1)

	// The footer as drawn in doc.go, decoded by hand.
	foot := obj[len(obj)-FooterSize:]
	if string(foot[:8]) != "WEIR-OBJ" || binary.LittleEndian.Uint32(foot[8:]) != 1 || binary.LittleEndian.Uint32(foot[12:]) != 0 ||
		binary.LittleEndian.Uint32(foot[32:]) != crc32.Checksum(foot[:32], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("footer bytes %x", foot)
	}
	f, idx, err := ReadIndex(bytes.NewReader(obj), int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	if f != goldenFooterV1 || f.ObjectSize() != int64(len(obj)) {
		t.Fatalf("footer %+v, want %+v", f, goldenFooterV1)
	}
	// A tail too short for the index: the index is read with its own range.
	f2, noIdx, err := ParseTail(obj[len(obj)-FooterSize-10:])
	if err != nil || noIdx != nil || f2 != f {
		t.Fatalf("short tail: %+v %v %v", f2, noIdx, err)
	}
	off, n := f.IndexRange()
	idx2, err := ParseIndex(obj[off:off+n], f)
	if err != nil {
		t.Fatal(err)
	}

	for _, ix := range []*Index{idx, idx2} {
		if ix.BlockCount() != 4 || ix.DataLen() != f.IndexPos || len(ix.Partitions()) != len(goldenPartitionsV1) {
			t.Fatalf("index of %d blocks, %d partitions, %d data bytes", ix.BlockCount(), len(ix.Partitions()), ix.DataLen())
		}
		for i, p := range ix.Partitions() {
			want := goldenPartitionsV1[i]
			if p.PartitionSummary != want.PartitionSummary || p.Position != want.Position {
				t.Fatalf("partition %d: %+v at %d, want %+v at %d", i, p.PartitionSummary, p.Position, want.PartitionSummary, want.Position)
			}
			if !slices.Equal(p.AllBlocks(), goldenBlocksV1[i]) {
				t.Fatalf("partition %d blocks:\n%+v\nwant\n%+v", i, p.AllBlocks(), goldenBlocksV1[i])
			}
		}
	}

	// Every batch, block by block, against the runs it was written from.
	for _, run := range goldenRuns() {
		p, ok := idx.Partition(run.topicID, run.partition)
		if !ok {
			t.Fatalf("partition %x/%d missing", run.topicID, run.partition)
		}
		var got []Batch
		for _, blk := range p.AllBlocks() {
			bs, err := DecodeBlock(blk, obj[blk.Position:blk.Position+blk.Length])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, bs...)
		}
		if len(got) != len(run.batches) {
			t.Fatalf("%x/%d: %d batches, want %d", run.topicID, run.partition, len(got), len(run.batches))
		}
		for i, b := range got {
			w := run.batches[i]
			if b.BaseOffset != w.base || b.LastOffset != w.last || b.MaxTimestamp != w.maxTs || !bytes.Equal(b.Data, w.data) {
				t.Fatalf("%x/%d batch %d: %d-%d ts %d, want %d-%d ts %d", run.topicID, run.partition, i,
					b.BaseOffset, b.LastOffset, b.MaxTimestamp, w.base, w.last, w.maxTs)
			}
		}
		// A fetch from the middle of the run reads from the block holding the offset.
		mid := run.batches[len(run.batches)-1].base
		if bs := p.Blocks(mid, 0); len(bs) != 1 || bs[0] != p.AllBlocks()[1] {
			t.Fatalf("%x/%d: blocks for offset %d: %+v", run.topicID, run.partition, mid, bs)
		}
	}
}

// TestGoldenObjectUnknownVersion: the golden object with a footer of a newer version, or
// with flags this build does not know, checksums intact, is refused with ErrVersion.
func TestGoldenObjectUnknownVersion(t *testing.T) {
	golden := readGolden(t, goldenObjectV1)
	for _, c := range []struct {
		off  int
		val  uint32
		want string
	}{
		{8, Version + 1, fmt.Sprintf("version: %d (this build reads %d)", Version+1, Version)},
		{12, 2, "unknown flags 0x2"},
	} {
		obj := bytes.Clone(golden)
		foot := obj[len(obj)-FooterSize:]
		binary.LittleEndian.PutUint32(foot[c.off:], c.val)
		binary.LittleEndian.PutUint32(foot[32:], crc32.Checksum(foot[:32], crc32.MakeTable(crc32.Castagnoli)))
		_, idx, err := ReadIndex(bytes.NewReader(obj), int64(len(obj)))
		if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) || idx != nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("footer field at %d = %d: %v, want ErrVersion saying %q", c.off, c.val, err, c.want)
		}
	}
}
