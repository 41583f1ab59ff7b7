package recbatch

import "encoding/binary"

// Cutting a read at the last stable offset (read_committed fetches): b is whole record
// batches as a partition stores them (offsets assigned), concatenated; a truncated tail
// (a frame that does not fit) is left as it is, as consumers expect of a size-limited
// read.

// Below returns the prefix of b made of the batches whose base offset is below end.
// A batch never straddles a last stable offset: that is a batch's base offset (the
// first of an open transaction) or the high watermark.
func Below(b []byte, end int64) []byte {
	pos := 0
	for pos+HeaderLen <= len(b) {
		if int64(binary.BigEndian.Uint64(b[pos:])) >= end {
			return b[:pos]
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[pos+8:])))
		if size < HeaderLen || pos+size > len(b) {
			break
		}
		pos += size
	}
	return b
}

// LastOffsetOf is the offset of the last record of the last whole batch in b, or -1
// when b holds none.
func LastOffsetOf(b []byte) int64 {
	last := int64(-1)
	for pos := 0; pos+HeaderLen <= len(b); {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[pos+8:])))
		if size < HeaderLen || pos+size > len(b) {
			break
		}
		last = int64(binary.BigEndian.Uint64(b[pos:])) + int64(int32(binary.BigEndian.Uint32(b[pos+23:])))
		pos += size
	}
	return last
}
