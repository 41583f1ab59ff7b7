// Package objfmt is the format of Weir's data objects: the record batches of many
// partitions in one object, in blocks, with an index and a fixed-size footer at the end.
//
// An object is written once (Writer), PUT whole, and read with ranged GETs: the footer
// (or the last DefaultTailSize bytes, which usually hold index and footer), then the
// index if it was not in the tail, then exactly the blocks a fetch needs. S3 requests
// are money, so objects are large (8 MiB and more: that is the uploader's policy, not
// this package's) and a reader needs one GET per block, or one GET for a run of
// adjacent blocks of a partition.
//
// # Object
//
//	+----------------------------------------------+----------------+-------------+
//	| data: runs of blocks, one run per partition  | index          | footer 36 B |
//	+----------------------------------------------+----------------+-------------+
//	^ 0                                            ^ IndexPos       ^ IndexPos+IndexLen
//	                                                  object size = IndexPos+IndexLen+36
//
// # Data
//
// The data region holds one run per partition, in the order the writer received them.
// A run is all of the partition's batches in this object, in offset order, with dense
// offsets (each batch starts one past the last offset of the one before), cut into
// blocks. In an object with FlagSparse (the cleaner's compacted ranges) the offsets are
// only strictly increasing: batches the cleaner dropped leave gaps between batches
// (never inside one: a rewritten batch keeps its base offset and lastOffsetDelta). A block is whole record batches v2, concatenated, with no framing of its own:
// the batches are stored byte for byte as the broker indexed them in its WAL (offsets
// and leader epoch assigned), which is exactly what a Fetch response carries, so a block
// (or a run of blocks) is served as it was read once its checksums pass.
//
//	| p7 block 0 | p7 block 1 | p7 block 2 | p3 block 0 | p9 block 0 | p9 block 1 | ...
//	|<------------- run of p7 ------------>|<- run p3 ->|<------ run of p9 ----->|
//
// Blocks are cut greedily: a batch goes into the current block unless that would make
// the block longer than Options.BlockSize (default 1 MiB); then it starts the next
// block. A block is therefore at most BlockSize long, unless it holds a single batch
// larger than BlockSize. Blocks never span partitions. The data region is tiled exactly
// by the runs: no gaps, no padding, no overlap.
//
// # Index
//
// All integers little endian. Entries have fixed sizes, so the index length is
// 8 + 24*partitionCount + 44*blockCount, which a reader checks before allocating.
//
//	index header (8 B)
//	 0                4                8
//	+----------------+----------------+
//	| partitionCount | blockCount     |
//	| u32            | u32 (all parts)|
//	+----------------+----------------+
//
//	partition entry (24 B), partitionCount of them, strictly increasing by
//	(topic ID as bytes, partition), so a lookup is a binary search
//	 0                              16             20             24
//	+------------------------------+--------------+--------------+
//	| topic ID                     | partition    | blockCount   |
//	| [16]byte (UUID)              | i32, >= 0    | u32, >= 1    |
//	+------------------------------+--------------+--------------+
//
//	block entry (44 B), blockCount of them: the blocks of partition entry 0 in offset
//	order, then those of entry 1, ...
//	 0          8          16         24       28        32             40       44
//	+----------+----------+----------+--------+---------+--------------+--------+
//	| first    | last     | position | length | batches | maxTimestamp | crc32c |
//	| offset   | offset   | u64      | u32    | u32     | i64 (ms)     | u32    |
//	| i64      | i64      |          |        |         |              |        |
//	+----------+----------+----------+--------+---------+--------------+--------+
//	first/last offset: of the block's first and last record.
//	position, length: the block's bytes in the object (an HTTP Range).
//	maxTimestamp: the largest maxTimestamp the writer was given for its batches.
//	crc32c: CRC-32 (Castagnoli) of the block's bytes. It covers what a batch's own CRC
//	does not (baseOffset, batchLength, partitionLeaderEpoch, magic).
//
// A partition's first offset, last offset, bytes, batch count and max timestamp are not
// stored: they follow from its blocks. ParseIndex checks that, within a partition,
// blocks are dense in offsets (first = previous last + 1; with FlagSparse first >
// previous last) and adjacent in the object
// (position = previous position + length), that every block holds at least one batch of
// at least 61 bytes and no more batches than offsets, and that the partitions' runs tile
// the data region [0, IndexPos) exactly.
//
// # Footer
//
//	footer (36 B), the last 36 bytes of the object
//	 0            8         12        16         24         28         32          36
//	+------------+---------+---------+----------+----------+----------+-----------+
//	| magic      | version | flags   | IndexPos | IndexLen | index    | footer    |
//	| "WEIR-OBJ" | u32 = 1 | u32     | u64      | u32      | crc32c   | crc32c of |
//	|            |         |         |          |          |          | bytes 0-32|
//	+------------+---------+---------+----------+----------+----------+-----------+
//
// flags: bit 0 FlagSparse (gaps between a partition's batches allowed; set only by the
// cleaner's Writer, Options.Sparse), every other bit 0. Objects without it are read as
// before; a build that predates it refuses a sparse object (unknown flag, ErrVersion)
// rather than call its gaps corruption.
//
// IndexPos is also the length of the data region. A reader that knows the object's size
// (HEAD, LIST, or the controller's manifest) checks it against Footer.ObjectSize. An
// unknown version or a non-zero flag is rejected (ErrVersion), a bad magic or checksum is
// corruption (ErrCorrupt). IndexLen is at most MaxIndexLen.
//
// # Record batch v2 (Kafka's, big endian), as far as this package reads it
//
//	 0 baseOffset int64   8 batchLength int32 (bytes after this field)
//	12 partitionLeaderEpoch int32   16 magic int8 = 2   17 crc uint32 (CRC32C of 21..end)
//	21 attributes int16   23 lastOffsetDelta int32   27 baseTimestamp int64
//	35 maxTimestamp int64 ... 61 records
//
// # Reading
//
//	tail := GET bytes=-DefaultTailSize
//	f, idx, err := ParseTail(tail)          // idx == nil: index not in the tail
//	if idx == nil { idx, err = ParseIndex(GET f.IndexRange(), f) }
//	p, ok := idx.Partition(topicID, partition)
//	blocks := p.Blocks(fetchOffset, maxBytes) // at least one block; adjacent in the object
//	off, n := Span(blocks)                   // one ranged GET
//	batches, err := DecodeBlocks(blocks, data) // block CRC, batch CRCs, dense offsets
//	batches = SeekBatch(batches, fetchOffset) // from the batch that holds fetchOffset
//
// Every decoder checks lengths before it allocates or slices and returns an error, never
// panics, on hostile input (FuzzParseFooter, FuzzParseIndex, FuzzSplitBatches). A parsed
// Index is immutable and safe for concurrent use.
//
// # Writing
//
// Writer streams batches straight to its io.Writer and keeps only the index in memory
// (44 bytes a block, about 100 bytes a partition). It requires the batches of a partition
// in one run of Add calls: once a batch of another partition was added, the first
// partition is finished and adding to it again fails (ErrPartitionReopened). The
// uploader gathers batches per partition anyway, and a partition's run stays contiguous
// in the object without buffering. A large partition gets an object of its own the same
// way: an object with one partition in its index.
//
// # Golden file
//
// testdata/object-v1-sparse.obj is a version 1 object with FlagSparse (one run with
// gaps, TestSparseGolden).
//
// testdata/object-v1.obj is a small object of format version 1 (two partitions' runs of
// two blocks each, index, footer). TestGoldenObject* read it back with this build and
// check that the Writer still writes it byte for byte. A format change bumps Version and
// adds testdata/object-v<N>.obj with
//
//	go test ./objectstore/objfmt/ -run Golden -update
//
// which writes the current version's file only; older files are never regenerated and
// must still be read or refused with ErrVersion.
package objfmt
