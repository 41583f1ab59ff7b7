package wal

// Format boundaries the mutation run found unpinned (docs/MUTATION.md).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/weir-io/weir/internal/crc32c"
)

// headerWith is a segment header with the given version and base and a valid checksum.
func headerWith(version uint32, base uint64) []byte {
	h := encodeSegmentHeader(0)
	binary.LittleEndian.PutUint32(h[8:12], version)
	binary.LittleEndian.PutUint64(h[12:20], base)
	binary.LittleEndian.PutUint32(h[20:24], crc32c.Checksum(h[0:20]))
	return h
}

// A well-formed header of another version is ErrVersion (not damage); a base beyond
// 2^62 is impossible, 2^62 itself is not; a header one byte short is torn.
func TestMutSegmentHeaderBounds(t *testing.T) {
	if _, err := decodeSegmentHeader(headerWith(FormatVersion+1, 0)); !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("version %d: %v, want ErrVersion", FormatVersion+1, err)
	}
	if base, err := decodeSegmentHeader(headerWith(FormatVersion, 1<<62)); err != nil || base != 1<<62 {
		t.Fatalf("base 2^62: %d %v", base, err)
	}
	if _, err := decodeSegmentHeader(headerWith(FormatVersion, 1<<62+1)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("base 2^62+1: %v, want ErrCorrupt", err)
	}
	if base, err := decodeSegmentHeader(encodeSegmentHeader(0)); err != nil || base != 0 {
		t.Fatalf("base 0: %d %v", base, err)
	}
	h := encodeSegmentHeader(77)
	if _, err := decodeSegmentHeader(h[:HeaderSize-1]); !errors.Is(err, ErrTorn) {
		t.Fatalf("header one byte short: %v", err)
	}
	// A header followed by more bytes (the segment's records) decodes.
	if base, err := decodeSegmentHeader(append(h, 1, 2, 3)); err != nil || base != 77 {
		t.Fatalf("header with records after it: %d %v", base, err)
	}
}

// Segment file names are exactly 20 decimal digits and ".wal".
func TestMutSegmentNames(t *testing.T) {
	for name, want := range map[string]int64{
		"00000000000000000000.wal": 0,
		"00000000000000004096.wal": 4096,
		"09223372036854775807.wal": 1<<63 - 1,
	} {
		if got, ok := parseSegmentName(name); !ok || int64(got) != want || segmentName(got) != name {
			t.Fatalf("%s: %d %v", name, got, ok)
		}
	}
	for _, name := range []string{"0000000000000004096.wal", "000000000000000004096.wal", "00000000000000004096.tmp",
		"-0000000000000004096.wal", "0000000000000000409x.wal", "segment-1.tmp"} {
		if got, ok := parseSegmentName(name); ok {
			t.Fatalf("%s parsed as %d", name, got)
		}
	}
}

// The largest length field the format allows (type + MaxPayloadSize) is not corrupt;
// one more is. With an unknown stream size the Reader finds the record cut short.
func TestMutLengthLimit(t *testing.T) {
	if err := checkLength(MaxPayloadSize+1, -1); err != nil {
		t.Fatalf("length MaxPayloadSize+1: %v", err)
	}
	if err := checkLength(MaxPayloadSize+2, -1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("length MaxPayloadSize+2: %v", err)
	}
	if err := checkLength(10, 10); err != nil {
		t.Fatalf("a record exactly as long as what is left: %v", err)
	}
	if err := checkLength(11, 10); !errors.Is(err, ErrTorn) {
		t.Fatalf("a record one byte longer than what is left: %v", err)
	}
	b := make([]byte, RecordHeaderSize+16)
	binary.LittleEndian.PutUint32(b, MaxPayloadSize+1)
	if _, _, err := NewReader(bytes.NewReader(b), -1).Next(); !errors.Is(err, ErrTorn) {
		t.Fatalf("largest length, stream of unknown size cut short: %v", err)
	}
}

// The Reader: records exactly filling a stream of known size all decode and the offset
// ends at the stream's end; a zero length field after 4 bytes is the end marker; a
// record declared longer than the rest of the stream is torn.
func TestMutReaderBoundaries(t *testing.T) {
	var b []byte
	b = AppendRecord(b, 1, []byte("first"))
	b = AppendRecord(b, 2, nil)
	b = AppendRecord(b, 3, bytes.Repeat([]byte{7}, 300))
	for _, size := range []int64{int64(len(b)), -1} {
		r := NewReader(bytes.NewReader(b), size)
		for i, want := range []byte{1, 2, 3} {
			typ, _, err := r.Next()
			if err != nil || typ != want {
				t.Fatalf("size %d: record %d: type %d %v", size, i, typ, err)
			}
		}
		if r.Offset() != int64(len(b)) {
			t.Fatalf("size %d: offset %d after the records, want %d", size, r.Offset(), len(b))
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("size %d: after the last record: %v", size, err)
		}
	}
	for n := 4; n < RecordHeaderSize; n++ {
		tail := append(bytes.Clone(b), make([]byte, n)...)
		r := NewReader(bytes.NewReader(tail), int64(len(tail)))
		for i := 0; i < 3; i++ {
			r.Next()
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("%d zero bytes after the records: %v, want the end", n, err)
		}
	}
	// Known size: the length field says one byte more than the stream holds.
	rec := AppendRecord(nil, 1, []byte("abc"))
	if _, _, err := NewReader(bytes.NewReader(rec[:len(rec)-1]), int64(len(rec)-1)).Next(); !errors.Is(err, ErrTorn) {
		t.Fatalf("record cut by one byte: %v", err)
	}
}

// zerosAfter reads prefix, then zeros without end.
type zerosAfter struct{ prefix []byte }

func (z *zerosAfter) Read(p []byte) (int, error) {
	n := copy(p, z.prefix)
	z.prefix = z.prefix[n:]
	clear(p[n:])
	return len(p), nil
}

// With a known stream size, a record whose length runs past the end of the stream
// (also after records were read from it) is torn — the tail of a file cut short —
// found from the length alone, not by reading what follows and calling it corrupt.
func TestMutReaderTornPastKnownEnd(t *testing.T) {
	first := AppendRecord(nil, 1, []byte("first"))
	const size = 1 << 20
	for _, lead := range [][]byte{nil, first} {
		over := uint32(size-len(lead)-8) + 1 // one byte past the end
		hdr := make([]byte, RecordHeaderSize)
		binary.LittleEndian.PutUint32(hdr, over)
		r := NewReader(&zerosAfter{prefix: append(bytes.Clone(lead), hdr...)}, size)
		if lead != nil {
			if _, _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := r.Next(); !errors.Is(err, ErrTorn) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("after %d bytes: a record one byte past the known end: %v, want ErrTorn", len(lead), err)
		}
	}
}
