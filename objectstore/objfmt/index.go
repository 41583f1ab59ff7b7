package objfmt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"github.com/weir-io/weir/internal/crc32c"
	"io"
	"math"
	"slices"
	"sort"
)

const (
	indexHeaderLen = 8
	partEntryLen   = 24
	blockEntryLen  = 44
	// minBatchLen is the smallest record batch v2: its fixed header.
	minBatchLen = 61
)

// Block is one block of a partition's run: whole record batches, adjacent in the object.
type Block struct {
	FirstOffset  int64  // offset of the block's first record
	LastOffset   int64  // offset of the block's last record
	Position     int64  // first byte of the block in the object
	Length       int64  // bytes
	Batches      int    // record batches in the block
	MaxTimestamp int64  // largest batch maxTimestamp (ms)
	CRC          uint32 // CRC32C of the block's bytes
	// Sparse: the block's batches may have gaps between them (an object with
	// FlagSparse); set by ParseIndex from the footer, not stored per block.
	Sparse bool
}

// PartitionSummary describes one partition's data in an object: what the controller's
// manifest records for the object.
type PartitionSummary struct {
	TopicID      [16]byte
	Partition    int32
	FirstOffset  int64 // offset of the first record
	LastOffset   int64 // offset of the last record
	Bytes        int64 // bytes of its batches (its run in the object)
	Batches      int64 // record batches
	MaxTimestamp int64 // largest batch maxTimestamp (ms)
}

// PartitionIndex is one partition's entry of a parsed index.
type PartitionIndex struct {
	PartitionSummary
	Position int64 // first byte of the partition's run; the run is [Position, Position+Bytes)
	blocks   []Block
}

// AllBlocks returns all the partition's blocks, in offset order and adjacent in the
// object. The result aliases the index: do not modify it.
func (p *PartitionIndex) AllBlocks() []Block { return p.blocks }

// Index is a parsed object index. It is immutable and safe for concurrent use.
type Index struct {
	parts   []PartitionIndex // sorted by (TopicID, Partition)
	blocks  int
	dataLen int64
}

// Partitions returns all partitions of the object, sorted by topic ID bytes and
// partition. The caller must not modify them.
func (ix *Index) Partitions() []PartitionIndex { return ix.parts }

// BlockCount is the number of blocks in the object.
func (ix *Index) BlockCount() int { return ix.blocks }

// DataLen is the length of the data region, which starts at offset 0 of the object.
func (ix *Index) DataLen() int64 { return ix.dataLen }

// Partition finds a partition's entry.
func (ix *Index) Partition(topicID [16]byte, partition int32) (*PartitionIndex, bool) {
	i, ok := slices.BinarySearchFunc(ix.parts, partKey{topicID, partition}, func(p PartitionIndex, k partKey) int {
		return comparePartKey(partKey{p.TopicID, p.Partition}, k)
	})
	if !ok {
		return nil, false
	}
	return &ix.parts[i], true
}

// Blocks returns the blocks to read for a fetch from fromOffset: the first block whose
// last offset is at least fromOffset (the one holding fromOffset if this object has it),
// then the blocks after it while their total length stays within maxBytes. Like Kafka's
// fetch (KIP-74) it returns at least one block however small maxBytes is, and nil only
// when fromOffset is past the partition's last offset. The blocks are adjacent in the
// object, so Span gives one range for all of them. The result aliases the index.
func (p *PartitionIndex) Blocks(fromOffset int64, maxBytes int64) []Block {
	bs := p.blocks
	i := sort.Search(len(bs), func(i int) bool { return bs[i].LastOffset >= fromOffset })
	if i == len(bs) {
		return nil
	}
	j, total := i+1, bs[i].Length
	for j < len(bs) && total+bs[j].Length <= maxBytes {
		total += bs[j].Length
		j++
	}
	return bs[i:j:j]
}

// BlockForTimestamp returns the first block with a batch whose maxTimestamp is at least
// ts, where a ListOffsets by timestamp starts to look; false if there is none.
func (p *PartitionIndex) BlockForTimestamp(ts int64) (Block, bool) {
	for _, b := range p.blocks {
		if b.MaxTimestamp >= ts {
			return b, true
		}
	}
	return Block{}, false
}

// Span is the byte range (offset, length) in the object of adjacent blocks, such as
// those Blocks returns: one ranged GET. It is (0, 0) for no blocks.
func Span(blocks []Block) (off, n int64) {
	if len(blocks) == 0 {
		return 0, 0
	}
	last := blocks[len(blocks)-1]
	return blocks[0].Position, last.Position + last.Length - blocks[0].Position
}

type partKey struct {
	topicID   [16]byte
	partition int32
}

func comparePartKey(a, b partKey) int {
	if c := bytes.Compare(a.topicID[:], b.topicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// appendIndex encodes parts (sorted by key, each with at least one block) after dst.
func appendIndex(dst []byte, parts []PartitionIndex) []byte {
	nblocks := 0
	for _, p := range parts {
		nblocks += len(p.blocks)
	}
	dst = slices.Grow(dst, indexHeaderLen+partEntryLen*len(parts)+blockEntryLen*nblocks)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(parts)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(nblocks))
	for _, p := range parts {
		dst = append(dst, p.TopicID[:]...)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(p.Partition))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(p.blocks)))
	}
	for _, p := range parts {
		for _, b := range p.blocks {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(b.FirstOffset))
			dst = binary.LittleEndian.AppendUint64(dst, uint64(b.LastOffset))
			dst = binary.LittleEndian.AppendUint64(dst, uint64(b.Position))
			dst = binary.LittleEndian.AppendUint32(dst, uint32(b.Length))
			dst = binary.LittleEndian.AppendUint32(dst, uint32(b.Batches))
			dst = binary.LittleEndian.AppendUint64(dst, uint64(b.MaxTimestamp))
			dst = binary.LittleEndian.AppendUint32(dst, b.CRC)
		}
	}
	return dst
}

// ParseIndex decodes and validates the index bytes b of the object whose footer is f.
// It checks the checksum first and every length before it allocates; the structure it
// accepts is described in the package documentation, and every lookup on the result is
// safe.
func ParseIndex(b []byte, f Footer) (*Index, error) {
	if int64(len(b)) != f.IndexLen {
		return nil, corruptf("index is %d bytes, footer says %d", len(b), f.IndexLen)
	}
	if got := crc32c.Checksum(b); got != f.IndexCRC {
		return nil, corruptf("index checksum %08x, footer says %08x", got, f.IndexCRC)
	}
	if len(b) < indexHeaderLen {
		return nil, corruptf("index of %d bytes is shorter than its header", len(b))
	}
	if f.IndexPos < 0 || f.IndexPos > maxDataLen {
		return nil, corruptf("index position %d out of range", f.IndexPos)
	}
	np := uint64(binary.LittleEndian.Uint32(b[0:]))
	nb := uint64(binary.LittleEndian.Uint32(b[4:]))
	if want := indexHeaderLen + partEntryLen*np + blockEntryLen*nb; want != uint64(len(b)) {
		return nil, corruptf("index of %d partitions and %d blocks needs %d bytes, has %d", np, nb, want, len(b))
	}
	ix := &Index{parts: make([]PartitionIndex, np), blocks: int(nb), dataLen: f.IndexPos}
	blocks := make([]Block, nb)
	pe := b[indexHeaderLen:]
	be := b[indexHeaderLen+partEntryLen*np:]
	next := uint64(0) // next unassigned block entry
	for i := range ix.parts {
		e := pe[i*partEntryLen:]
		p := &ix.parts[i]
		copy(p.TopicID[:], e[:16])
		p.Partition = int32(binary.LittleEndian.Uint32(e[16:]))
		if p.Partition < 0 {
			return nil, corruptf("partition %d", p.Partition)
		}
		if i > 0 && comparePartKey(partKey{ix.parts[i-1].TopicID, ix.parts[i-1].Partition}, partKey{p.TopicID, p.Partition}) >= 0 {
			return nil, corruptf("index partitions not strictly sorted at entry %d", i)
		}
		cnt := uint64(binary.LittleEndian.Uint32(e[20:]))
		if cnt == 0 || cnt > nb-next {
			return nil, corruptf("partition entry %d has %d blocks, %d left", i, cnt, nb-next)
		}
		p.blocks = blocks[next : next+cnt : next+cnt]
		for k := range p.blocks {
			blk, err := decodeBlockEntry(be[(next+uint64(k))*blockEntryLen:], f.IndexPos)
			if err != nil {
				return nil, corruptf("partition entry %d block %d: %v", i, k, err)
			}
			blk.Sparse = f.Sparse()
			if k > 0 {
				prev := p.blocks[k-1]
				if blk.FirstOffset != prev.LastOffset+1 && !(blk.Sparse && blk.FirstOffset > prev.LastOffset) {
					return nil, corruptf("partition entry %d block %d starts at offset %d after %d", i, k, blk.FirstOffset, prev.LastOffset)
				}
				if blk.Position != prev.Position+prev.Length {
					return nil, corruptf("partition entry %d block %d at %d, previous ends at %d", i, k, blk.Position, prev.Position+prev.Length)
				}
			}
			p.blocks[k] = blk
			p.Bytes += blk.Length
			p.Batches += int64(blk.Batches)
			if k == 0 || blk.MaxTimestamp > p.MaxTimestamp {
				p.MaxTimestamp = blk.MaxTimestamp
			}
		}
		next += cnt
		p.FirstOffset = p.blocks[0].FirstOffset
		p.LastOffset = p.blocks[len(p.blocks)-1].LastOffset
		p.Position = p.blocks[0].Position
	}
	if next != nb {
		return nil, corruptf("%d block entries, partitions use %d", nb, next)
	}
	// The runs must tile the data region: sorted by position, each starts where the
	// previous one ends, the first at 0 and the last ends at IndexPos.
	order := make([]int, len(ix.parts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ix.parts[a].Position, ix.parts[b].Position) })
	pos := int64(0)
	for _, i := range order {
		p := &ix.parts[i]
		if p.Position != pos {
			return nil, corruptf("data region: run at %d where %d was expected", p.Position, pos)
		}
		pos += p.Bytes
	}
	if pos != f.IndexPos {
		return nil, corruptf("runs cover %d bytes of a %d-byte data region", pos, f.IndexPos)
	}
	return ix, nil
}

func decodeBlockEntry(e []byte, dataLen int64) (Block, error) {
	first := binary.LittleEndian.Uint64(e[0:])
	last := binary.LittleEndian.Uint64(e[8:])
	pos := binary.LittleEndian.Uint64(e[16:])
	length := uint64(binary.LittleEndian.Uint32(e[24:]))
	batches := uint64(binary.LittleEndian.Uint32(e[28:]))
	b := Block{
		FirstOffset:  int64(first),
		LastOffset:   int64(last),
		Position:     int64(pos),
		Length:       int64(length),
		Batches:      int(batches),
		MaxTimestamp: int64(binary.LittleEndian.Uint64(e[32:])),
		CRC:          binary.LittleEndian.Uint32(e[40:]),
	}
	switch {
	case first > math.MaxInt64 || last > math.MaxInt64 || last < first:
		return b, corruptf("offsets [%d, %d]", int64(first), int64(last))
	case batches == 0 || batches*minBatchLen > length:
		return b, corruptf("%d batches in %d bytes", batches, length)
	case batches-1 > last-first: // each batch holds at least one offset
		return b, corruptf("%d batches for offsets [%d, %d]", batches, first, last)
	case pos > uint64(dataLen) || length > uint64(dataLen)-pos:
		return b, corruptf("bytes [%d, +%d) outside the %d-byte data region", pos, length, dataLen)
	}
	return b, nil
}

// ReadIndex reads and parses the footer and index of an object of the given size with at
// most two reads: the last DefaultTailSize bytes, then the index if it was not among them.
// It checks that the footer agrees with size.
func ReadIndex(r io.ReaderAt, size int64) (Footer, *Index, error) {
	if size < FooterSize {
		return Footer{}, nil, corruptf("object of %d bytes is shorter than a footer", size)
	}
	tail := make([]byte, min(size, DefaultTailSize))
	if err := readFull(r, tail, size-int64(len(tail))); err != nil {
		return Footer{}, nil, err
	}
	f, idx, err := ParseTail(tail)
	if err != nil {
		return f, nil, err
	}
	if f.ObjectSize() != size {
		return f, nil, corruptf("footer describes a %d-byte object, it has %d", f.ObjectSize(), size)
	}
	if idx != nil {
		return f, idx, nil
	}
	buf := make([]byte, f.IndexLen)
	if err := readFull(r, buf, f.IndexPos); err != nil {
		return f, nil, err
	}
	idx, err = ParseIndex(buf, f)
	return f, idx, err
}

// readFull is ReadAt that accepts io.EOF with a full buffer, as io.ReaderAt allows.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
