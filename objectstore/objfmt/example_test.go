package objfmt_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/weir-io/weir/objectstore/objfmt"
)

// batch builds a minimal record batch v2 header for offsets [base, base+n) with a
// correct CRC (no records: enough for the format, which does not parse records).
func batch(base int64, n int32) []byte {
	b := make([]byte, 61)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], 49)
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func Example() {
	topic := [16]byte{0xde, 0xad}

	// Upload: one run of batches per partition, then Close.
	var obj bytes.Buffer
	w := objfmt.NewWriter(&obj, objfmt.Options{BlockSize: 150}) // two 61-byte batches a block
	for p := int32(0); p < 2; p++ {
		for off := int64(0); off < 30; off += 10 {
			if err := w.Add(topic, p, off, off+9, 1000+off, batch(off, 10)); err != nil {
				panic(err)
			}
		}
	}
	sum, err := w.Close()
	if err != nil {
		panic(err)
	}
	for _, p := range sum.Partitions {
		fmt.Printf("partition %d: offsets %d-%d, %d bytes in %d batches\n", p.Partition, p.FirstOffset, p.LastOffset, p.Bytes, p.Batches)
	}

	// Fetch partition 1 from offset 25: one GET for the tail, one for the block.
	data := obj.Bytes()
	_, idx, err := objfmt.ParseTail(data[max(0, len(data)-objfmt.DefaultTailSize):])
	if err != nil {
		panic(err)
	}
	p, _ := idx.Partition(topic, 1)
	blocks := p.Blocks(25, 1<<20)
	off, n := objfmt.Span(blocks)
	batches, err := objfmt.DecodeBlocks(blocks, data[off:off+n])
	if err != nil {
		panic(err)
	}
	for _, b := range objfmt.SeekBatch(batches, 25) {
		fmt.Printf("GET bytes=%d-%d → batch %d-%d\n", off, off+n-1, b.BaseOffset, b.LastOffset)
	}
	// Output:
	// partition 0: offsets 0-29, 183 bytes in 3 batches
	// partition 1: offsets 0-29, 183 bytes in 3 batches
	// GET bytes=305-365 → batch 20-29
}
