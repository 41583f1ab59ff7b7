package objfmt

import (
	"encoding/binary"
	"fmt"
	"github.com/weir-io/weir/internal/crc32c"
	"github.com/weir-io/weir/internal/recbatch"
	"sort"
)

// Batch is one record batch v2 found in a block.
type Batch struct {
	BaseOffset   int64
	LastOffset   int64 // BaseOffset + lastOffsetDelta
	MaxTimestamp int64
	Data         []byte // the whole batch, aliasing the block's bytes
}

// batchFrame reads the fixed header of the batch at the start of b: its total length
// (12 + batchLength) and its offsets. It checks the frame, the magic and the offsets,
// not the CRC.
func batchFrame(b []byte) (total int, base, last int64, err error) {
	h, err := recbatch.Frame(b)
	if err != nil {
		return 0, 0, 0, err
	}
	return h.Size(), h.BaseOffset, h.LastOffset(), nil
}

func batchCRCOK(b []byte) bool { return recbatch.CRCOK(b) }

// SplitBatches splits concatenated record batches v2 (a block, or a run of blocks) into
// batches and verifies each one's CRC32C (Kafka's, over bytes 21 to the end). The Data of
// each batch aliases data. Any frame that does not fit, a magic other than 2, a negative
// offset or a CRC mismatch is ErrCorrupt.
func SplitBatches(data []byte) ([]Batch, error) {
	bs, err := splitBatches(nil, data, true)
	if err != nil {
		return nil, err
	}
	return bs, nil
}

// splitBatches appends the batches of data to dst; checkCRC false skips the batches' own
// CRCs (the frame checks stay) where a block CRC already vouched for the bytes
// (decodeBlock).
func splitBatches(dst []Batch, data []byte, checkCRC bool) ([]Batch, error) {
	for pos := 0; pos < len(data); {
		b := data[pos:]
		n, base, last, err := batchFrame(b)
		if err != nil {
			return dst, corruptf("at byte %d: %v", pos, err)
		}
		b = b[:n]
		if checkCRC && !batchCRCOK(b) {
			return dst, corruptf("at byte %d: record batch CRC mismatch (base offset %d)", pos, base)
		}
		dst = append(dst, Batch{
			BaseOffset:   base,
			LastOffset:   last,
			MaxTimestamp: int64(binary.BigEndian.Uint64(b[35:])),
			Data:         b,
		})
		pos += n
	}
	return dst, nil
}

// DecodeBlock verifies the bytes of block blk (as read with a GET of its range) and splits
// them into batches: the length and CRC32C of the block (which vouches for each batch's
// CRC, verified when the block was written), each batch's frame, the number of
// batches, and that the batches' offsets are dense from blk.FirstOffset to blk.LastOffset.
// On error it returns no batches: nothing of a damaged block is served.
func DecodeBlock(blk Block, data []byte) ([]Batch, error) {
	bs, err := decodeBlock(nil, blk, data)
	if err != nil {
		return nil, err
	}
	return bs, nil
}

// DecodeBlocks is DecodeBlock for adjacent blocks read with one GET of Span(blocks): the
// batches of all of them, or an error and none.
func DecodeBlocks(blocks []Block, data []byte) ([]Batch, error) {
	_, n := Span(blocks)
	if int64(len(data)) != n {
		return nil, corruptf("span of %d blocks is %d bytes, read %d", len(blocks), n, len(data))
	}
	var out []Batch
	var err error
	base := int64(0)
	if len(blocks) > 0 {
		base = blocks[0].Position
	}
	for i, blk := range blocks {
		if blk.Length < 0 || (i > 0 && blk.Position != blocks[i-1].Position+blocks[i-1].Length) {
			return nil, corruptf("blocks %d and %d are not adjacent", i-1, i)
		}
		off := blk.Position - base
		if out, err = decodeBlock(out, blk, data[off:off+blk.Length]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeBlock(dst []Batch, blk Block, data []byte) ([]Batch, error) {
	if int64(len(data)) != blk.Length {
		return dst, corruptf("block at %d is %d bytes, read %d", blk.Position, blk.Length, len(data))
	}
	if got := crc32c.Checksum(data); got != blk.CRC {
		return dst, corruptf("block at %d: checksum %08x, index says %08x", blk.Position, got, blk.CRC)
	}
	// The block CRC matched, so these are the bytes the Writer wrote, and it wrote only
	// batches whose own CRC it had verified (Writer.Add; SkipBatchCRC's one caller,
	// compaction, verifies them just before): checking each batch's CRC again would
	// read every byte a second time for nothing (cold reads are CPU-bound on small
	// machines, PERFORMANCE.md "Cold reads"). Consumers check the batch CRCs anyway.
	start := len(dst)
	dst, err := splitBatches(dst, data, false)
	if err != nil {
		return dst[:start], fmt.Errorf("block at %d: %w", blk.Position, err)
	}
	got := dst[start:]
	if len(got) != blk.Batches {
		return dst[:start], corruptf("block at %d holds %d batches, index says %d", blk.Position, len(got), blk.Batches)
	}
	next := blk.FirstOffset
	for i, b := range got {
		if b.BaseOffset != next && !(blk.Sparse && i > 0 && b.BaseOffset > next) {
			return dst[:start], corruptf("block at %d: batch at offset %d where %d was expected", blk.Position, b.BaseOffset, next)
		}
		next = b.LastOffset + 1
	}
	if next-1 != blk.LastOffset {
		return dst[:start], corruptf("block at %d ends at offset %d, index says %d", blk.Position, next-1, blk.LastOffset)
	}
	return dst, nil
}

// SeekBatch drops the batches before the one holding offset: it returns batches from the
// first whose last offset is at least offset (empty if there is none). Batches must be
// in offset order, as the decoders return them.
func SeekBatch(batches []Batch, offset int64) []Batch {
	i := sort.Search(len(batches), func(i int) bool { return batches[i].LastOffset >= offset })
	return batches[i:]
}
