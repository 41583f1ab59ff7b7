package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/weir-io/weir/internal/crc32c"
	"io"
)

// Framing constants. See doc.go for the drawings.
const (
	// RecordHeaderSize is the size of the frame in front of every payload:
	// length u32 | crc32c u32 | type u8.
	RecordHeaderSize = 9
	// HeaderSize is the size of the segment header at the start of every segment file.
	HeaderSize = 24
	// MaxPayloadSize is the largest payload the format can carry. The decoder
	// rejects longer length fields as corrupt; Config.MaxRecordSize may be lower.
	MaxPayloadSize = 1<<30 - 1
	// FormatVersion is written into every segment header.
	FormatVersion = 1
)

// segmentMagic opens every segment file.
var segmentMagic = [8]byte{'W', 'E', 'I', 'R', '-', 'W', 'A', 'L'}

// recordCRC is the CRC32C of the type byte followed by the payload.
func recordCRC(typ byte, payload []byte) uint32 {
	c := crc32c.Update(0, []byte{typ})
	return crc32c.Update(c, payload)
}

// FrameSize is the number of bytes a record with an n-byte payload occupies.
func FrameSize(n int) int { return RecordHeaderSize + n }

// AppendRecord appends one framed record to dst and returns the extended slice.
// It panics if the payload is longer than MaxPayloadSize (a programming error;
// the WAL checks sizes before framing).
func AppendRecord(dst []byte, typ byte, payload []byte) []byte {
	if len(payload) > MaxPayloadSize {
		panic("wal: payload larger than MaxPayloadSize")
	}
	start := len(dst)
	dst = append(dst, make([]byte, RecordHeaderSize)...)
	dst = append(dst, payload...)
	sealRecord(dst[start:], typ)
	return dst
}

// sealRecord fills in the frame header of rec, whose payload is already in
// place at rec[RecordHeaderSize:].
func sealRecord(rec []byte, typ byte) {
	rec[8] = typ
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(rec)-8)) // type + payload
	binary.LittleEndian.PutUint32(rec[4:8], crc32c.Checksum(rec[8:]))
}

// checkLength validates a frame's length field. n is the field value (type +
// payload bytes); avail is how many bytes follow the length and crc fields, or
// -1 if unknown. It returns io.EOF for the end marker.
func checkLength(n uint32, avail int64) error {
	switch {
	case n == 0:
		return io.EOF
	case n > MaxPayloadSize+1:
		return fmt.Errorf("%w: impossible record length %d", ErrCorrupt, n)
	case avail >= 0 && int64(n) > avail:
		return fmt.Errorf("%w: record of %d bytes but only %d bytes left", ErrTorn, n, avail)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// DecodeRecord parses the record at the start of b. It returns the record's
// type, its payload (aliasing b) and the number of bytes the frame occupies.
//
// Errors: io.EOF at the end of the records (b is empty, only zeros too short to
// hold a length, or the length field is 0); an error wrapping ErrTorn if the
// frame is cut short by the end of b; an error wrapping ErrCorrupt if the
// length is impossible or the checksum does not match.
func DecodeRecord(b []byte) (typ byte, payload []byte, n int, err error) {
	if len(b) < 4 {
		if allZero(b) {
			return 0, nil, 0, io.EOF
		}
		return 0, nil, 0, fmt.Errorf("%w: %d bytes left, record header needs %d", ErrTorn, len(b), RecordHeaderSize)
	}
	length := binary.LittleEndian.Uint32(b[0:4])
	if length == 0 {
		return 0, nil, 0, io.EOF
	}
	if len(b) < RecordHeaderSize {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes left, record header needs %d", ErrTorn, len(b), RecordHeaderSize)
	}
	if err := checkLength(length, int64(len(b)-8)); err != nil {
		return 0, nil, 0, err
	}
	n = 8 + int(length)
	if got, want := crc32c.Checksum(b[8:n]), binary.LittleEndian.Uint32(b[4:8]); got != want {
		return 0, nil, 0, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	return b[8], b[RecordHeaderSize:n:n], n, nil
}

// Reader decodes records from a stream, such as a segment file after its header.
type Reader struct {
	r      *bufio.Reader
	remain int64 // bytes left in the stream, or -1 if unknown
	off    int64 // offset of the next record
	hdr    [RecordHeaderSize]byte
	buf    []byte
}

// NewReader returns a Reader over r. size is the number of bytes r holds, or -1
// if unknown; with a known size a corrupt length never causes a large allocation.
func NewReader(r io.Reader, size int64) *Reader {
	bufSize := 256 << 10
	if size >= 0 && size < int64(bufSize) {
		bufSize = int(size) // bufio enforces a small minimum
	}
	return &Reader{r: bufio.NewReaderSize(r, bufSize), remain: size}
}

// Offset returns the offset (from the start of the stream) of the next record,
// i.e. the end of the last record returned.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the next record. The payload is valid until the next call.
// Errors are as for DecodeRecord; other errors come from the underlying reader.
// After an error the Reader must not be used again.
func (r *Reader) Next() (typ byte, payload []byte, err error) {
	n, err := io.ReadFull(r.r, r.hdr[:])
	switch {
	case err == io.EOF: // nothing at all
		return 0, nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		if n < 4 && allZero(r.hdr[:n]) || n >= 4 && allZero(r.hdr[:4]) {
			return 0, nil, io.EOF
		}
		return 0, nil, fmt.Errorf("%w: %d bytes left, record header needs %d", ErrTorn, n, RecordHeaderSize)
	case err != nil:
		return 0, nil, err
	}
	length := binary.LittleEndian.Uint32(r.hdr[0:4])
	avail := int64(-1)
	if r.remain >= 0 {
		avail = r.remain - 8
	}
	if err := checkLength(length, avail); err != nil {
		return 0, nil, err
	}
	plen := int(length) - 1
	if cap(r.buf) < plen {
		r.buf = make([]byte, plen)
	}
	r.buf = r.buf[:plen]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return 0, nil, fmt.Errorf("%w: record of %d bytes cut short", ErrTorn, length)
		}
		return 0, nil, err
	}
	typ = r.hdr[8]
	if got, want := recordCRC(typ, r.buf), binary.LittleEndian.Uint32(r.hdr[4:8]); got != want {
		return 0, nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	r.off += int64(8 + length)
	if r.remain >= 0 {
		r.remain -= int64(8 + length)
	}
	return typ, r.buf, nil
}

// encodeSegmentHeader returns the header of a segment starting at base.
func encodeSegmentHeader(base Pos) []byte {
	h := make([]byte, HeaderSize)
	copy(h[0:8], segmentMagic[:])
	binary.LittleEndian.PutUint32(h[8:12], FormatVersion)
	binary.LittleEndian.PutUint64(h[12:20], uint64(base))
	binary.LittleEndian.PutUint32(h[20:24], crc32c.Checksum(h[0:20]))
	return h
}

// decodeSegmentHeader checks a segment header and returns its base position. The
// version is checked after the checksum, so that damage is never mistaken for a newer
// format (ErrVersion) nor a newer format for damage.
func decodeSegmentHeader(h []byte) (Pos, error) {
	if len(h) < HeaderSize {
		return 0, fmt.Errorf("%w: segment header cut short (%d bytes)", ErrTorn, len(h))
	}
	if allZero(h[:HeaderSize]) {
		return 0, fmt.Errorf("%w: segment header never written", ErrTorn)
	}
	if [8]byte(h[0:8]) != segmentMagic {
		return 0, fmt.Errorf("%w: bad segment magic %q", ErrCorrupt, h[0:8])
	}
	if got, want := crc32c.Checksum(h[0:20]), binary.LittleEndian.Uint32(h[20:24]); got != want {
		return 0, fmt.Errorf("%w: segment header checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(h[8:12]); v != FormatVersion {
		return 0, fmt.Errorf("%w: segment version %d (this build reads %d)", ErrVersion, v, FormatVersion)
	}
	base := binary.LittleEndian.Uint64(h[12:20])
	if base > 1<<62 {
		return 0, fmt.Errorf("%w: impossible segment base %d", ErrCorrupt, base)
	}
	return Pos(base), nil
}
