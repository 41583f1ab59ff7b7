package objfmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/weir-io/weir/internal/crc32c"
	"io"
	"math"
	"slices"
)

const (
	// DefaultBlockSize is the target block size: one GET for a sequential reader, and
	// what a point read fetches.
	DefaultBlockSize = 1 << 20
	// MaxBlockSize bounds Options.BlockSize.
	MaxBlockSize = 1 << 30
)

var (
	// ErrOutOfOrder reports a batch that does not start right after the previous batch
	// of its partition (a gap or an overlap).
	ErrOutOfOrder = errors.New("objfmt: batch does not continue its partition")
	// ErrPartitionReopened reports a batch of a partition whose run in the object already
	// ended: the batches of a partition must be added in one run of Add calls.
	ErrPartitionReopened = errors.New("objfmt: partition already finished in this object (add each partition's batches in one run)")
	// ErrBadBatch reports Add arguments that do not describe a well-formed record batch v2.
	ErrBadBatch = errors.New("objfmt: bad record batch")
	// ErrClosed reports use of a closed Writer.
	ErrClosed = errors.New("objfmt: writer closed")
)

// Options configure a Writer.
type Options struct {
	// BlockSize is the target block size in bytes (DefaultBlockSize if 0). A block is cut
	// before a batch that would make it longer, so it is at most BlockSize long unless it
	// holds one larger batch. At most MaxBlockSize.
	BlockSize int
	// SkipBatchCRC skips verifying each batch's CRC32C in Add (the header checks stay),
	// for callers that have just verified it themselves: readers trust a batch's CRC
	// once its block's CRC matches (DecodeBlock), so a batch with a bad CRC must never
	// be written.
	SkipBatchCRC bool
	// Sparse lets a partition's batches have gaps between them (offsets strictly
	// increasing, not dense): the cleaner's compacted ranges. The object gets FlagSparse.
	Sparse bool
}

// Summary describes a written object.
type Summary struct {
	Size       int64              // bytes of the whole object
	DataLen    int64              // bytes of the data region (= Footer.IndexPos)
	IndexLen   int64              // bytes of the index
	Blocks     int                // blocks in the object
	Partitions []PartitionSummary // sorted by topic ID bytes and partition, as in the index
}

// Writer writes one object to an io.Writer: Add the batches, then Close.
//
// Each Add writes its batch with one Write call, straight through (wrap a file or pipe in
// a bufio.Writer); the caller may reuse the batch slice when Add returns. Only the index
// is kept in memory. The batches of a partition must come in one run of Add calls, in
// offset order and dense (with Options.Sparse: strictly increasing); a batch of another
// partition ends the current run.
//
// A Writer is not safe for concurrent use. An Add that fails validation changes nothing
// and the Writer stays usable; a failed Write of the underlying writer is returned by
// every later call.
type Writer struct {
	w         io.Writer
	blockSize int64
	verifyCRC bool
	sparse    bool

	pos   int64            // bytes written
	parts []PartitionIndex // finished runs, in write order
	done  map[partKey]struct{}

	cur     *PartitionIndex // the open run, or nil
	blk     Block           // the open block of cur (Length 0: none)
	nblocks int

	err    error
	closed bool
}

// NewWriter returns a Writer that writes an object to w.
func NewWriter(w io.Writer, opts Options) *Writer {
	bs := int64(opts.BlockSize)
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	bs = min(bs, MaxBlockSize)
	return &Writer{w: w, blockSize: bs, verifyCRC: !opts.SkipBatchCRC, sparse: opts.Sparse, done: make(map[partKey]struct{})}
}

// Size is the number of bytes written so far: the data region. Close adds the index
// (8 bytes, 24 per partition, 44 per block) and the footer (FooterSize).
func (w *Writer) Size() int64 { return w.pos }

// Add appends one record batch v2 of a partition: batch is its exact bytes with offsets
// assigned, from baseOffset to lastOffset (which must match the batch header), and
// maxTimestamp is recorded in the index for time-based lookups and retention.
func (w *Writer) Add(topicID [16]byte, partition int32, baseOffset, lastOffset int64, maxTimestamp int64, batch []byte) error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if partition < 0 {
		return fmt.Errorf("%w: partition %d", ErrBadBatch, partition)
	}
	if baseOffset < 0 || lastOffset < baseOffset || lastOffset == math.MaxInt64 {
		return fmt.Errorf("%w: offsets [%d, %d]", ErrBadBatch, baseOffset, lastOffset)
	}
	if err := w.checkBatch(baseOffset, lastOffset, batch); err != nil {
		return err
	}
	key := partKey{topicID, partition}
	same := w.cur != nil && w.cur.TopicID == topicID && w.cur.Partition == partition
	if same {
		if next := w.cur.LastOffset + 1; baseOffset != next && !(w.sparse && baseOffset > next) {
			what := "gap"
			if baseOffset < next {
				what = "overlap"
			}
			return fmt.Errorf("%w: %x/%d: batch at offset %d, expected %d (%s)", ErrOutOfOrder, topicID, partition, baseOffset, next, what)
		}
	} else if _, ok := w.done[key]; ok {
		return fmt.Errorf("%w: %x/%d at offset %d", ErrPartitionReopened, topicID, partition, baseOffset)
	}

	if _, err := w.w.Write(batch); err != nil {
		w.err = fmt.Errorf("objfmt: write: %w", err)
		return w.err
	}
	n := int64(len(batch))
	if !same {
		w.finishRun()
		w.cur = &PartitionIndex{PartitionSummary: PartitionSummary{
			TopicID: topicID, Partition: partition, FirstOffset: baseOffset, MaxTimestamp: maxTimestamp,
		}, Position: w.pos}
		w.done[key] = struct{}{}
	}
	if w.blk.Length > 0 && w.blk.Length+n > w.blockSize {
		w.finishBlock()
	}
	if w.blk.Length == 0 {
		w.blk = Block{FirstOffset: baseOffset, Position: w.pos, MaxTimestamp: maxTimestamp}
	}
	w.blk.LastOffset = lastOffset
	w.blk.Length += n
	w.blk.Batches++
	w.blk.MaxTimestamp = max(w.blk.MaxTimestamp, maxTimestamp)
	w.blk.CRC = crc32c.Update(w.blk.CRC, batch)

	p := w.cur
	p.LastOffset = lastOffset
	p.Bytes += n
	p.Batches++
	p.MaxTimestamp = max(p.MaxTimestamp, maxTimestamp)
	w.pos += n
	return nil
}

func (w *Writer) checkBatch(base, last int64, b []byte) error {
	if len(b) < minBatchLen {
		return fmt.Errorf("%w: %d bytes, a batch header needs %d", ErrBadBatch, len(b), minBatchLen)
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[8:]))) + 12; n != int64(len(b)) {
		return fmt.Errorf("%w: batch length field says %d bytes, got %d (exactly one batch per Add)", ErrBadBatch, n, len(b))
	}
	_, hbase, hlast, err := batchFrame(b)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	if hbase != base || hlast != last {
		return fmt.Errorf("%w: header says offsets [%d, %d], Add says [%d, %d]", ErrBadBatch, hbase, hlast, base, last)
	}
	if w.verifyCRC && !batchCRCOK(b) {
		return fmt.Errorf("%w: CRC mismatch at offset %d", ErrBadBatch, base)
	}
	return nil
}

func (w *Writer) finishBlock() {
	if w.blk.Length == 0 {
		return
	}
	w.cur.blocks = append(w.cur.blocks, w.blk)
	w.nblocks++
	w.blk = Block{}
}

func (w *Writer) finishRun() {
	if w.cur == nil {
		return
	}
	w.finishBlock()
	w.parts = append(w.parts, *w.cur)
	w.cur = nil
}

// Close finishes the object: it writes the index and the footer and returns what the
// object holds. An object without batches is valid (an empty index).
func (w *Writer) Close() (Summary, error) {
	if w.closed {
		return Summary{}, ErrClosed
	}
	if w.err != nil {
		return Summary{}, w.err
	}
	w.closed = true
	w.finishRun()
	parts := slices.Clone(w.parts)
	slices.SortFunc(parts, func(a, b PartitionIndex) int {
		return comparePartKey(partKey{a.TopicID, a.Partition}, partKey{b.TopicID, b.Partition})
	})
	buf := appendIndex(nil, parts)
	if len(buf) > MaxIndexLen {
		w.err = fmt.Errorf("objfmt: index of %d bytes exceeds %d (too many partitions or blocks in one object)", len(buf), MaxIndexLen)
		return Summary{}, w.err
	}
	var flags uint32
	if w.sparse {
		flags = FlagSparse
	}
	f := Footer{Version: Version, Flags: flags, IndexPos: w.pos, IndexLen: int64(len(buf)), IndexCRC: crc32c.Checksum(buf)}
	buf = appendFooter(buf, f)
	if _, err := w.w.Write(buf); err != nil {
		w.err = fmt.Errorf("objfmt: write: %w", err)
		return Summary{}, w.err
	}
	s := Summary{
		Size:       f.ObjectSize(),
		DataLen:    w.pos,
		IndexLen:   f.IndexLen,
		Blocks:     w.nblocks,
		Partitions: make([]PartitionSummary, len(parts)),
	}
	for i, p := range parts {
		s.Partitions[i] = p.PartitionSummary
	}
	return s, nil
}
