package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
)

type rec struct {
	typ     byte
	payload []byte
}

func testRecords() []rec {
	big := make([]byte, 5000)
	for i := range big {
		big[i] = byte(i * 31)
	}
	return []rec{{1, nil}, {2, []byte{0}}, {3, []byte("hello, wal")}, {0xff, big}, {0, []byte{0, 0, 0, 0}}}
}

func TestRecordRoundTrip(t *testing.T) {
	var buf []byte
	for _, r := range testRecords() {
		buf = AppendRecord(buf, r.typ, r.payload)
	}
	buf = append(buf, make([]byte, 100)...) // preallocated zeros: end marker

	// DecodeRecord on the slice.
	b := buf
	for i, r := range testRecords() {
		typ, payload, n, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if typ != r.typ || !bytes.Equal(payload, r.payload) || n != FrameSize(len(r.payload)) {
			t.Fatalf("record %d: got type %d, %d bytes, n=%d", i, typ, len(payload), n)
		}
		b = b[n:]
	}
	if _, _, _, err := DecodeRecord(b); err != io.EOF {
		t.Fatalf("after the records: err = %v, want io.EOF", err)
	}

	// The streaming Reader, with and without a known size, and with the end
	// of the stream instead of zeros.
	for _, stream := range [][]byte{buf, buf[:len(buf)-100]} {
		for _, size := range []int64{int64(len(stream)), -1} {
			r := NewReader(bytes.NewReader(stream), size)
			var off int64
			for i, want := range testRecords() {
				if r.Offset() != off {
					t.Fatalf("record %d: Offset = %d, want %d", i, r.Offset(), off)
				}
				typ, payload, err := r.Next()
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if typ != want.typ || !bytes.Equal(payload, want.payload) {
					t.Fatalf("record %d: got type %d, %d bytes", i, typ, len(payload))
				}
				off += int64(FrameSize(len(want.payload)))
			}
			if _, _, err := r.Next(); err != io.EOF {
				t.Fatalf("after the records: err = %v, want io.EOF", err)
			}
		}
	}
}

func TestRecordFormat(t *testing.T) {
	// Pin the documented layout: length u32 LE (1+len(payload)) | crc32c LE
	// over type+payload | type | payload.
	got := AppendRecord(nil, 7, []byte("ab"))
	want := []byte{3, 0, 0, 0, 0, 0, 0, 0, 7, 'a', 'b'}
	binary.LittleEndian.PutUint32(want[4:8], crc32.Checksum([]byte{7, 'a', 'b'}, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(got, want) {
		t.Fatalf("frame = %x, want %x", got, want)
	}
}

// decodeBoth runs DecodeRecord and the Reader on b and checks they agree.
func decodeBoth(t *testing.T, b []byte) error {
	t.Helper()
	_, _, _, err1 := DecodeRecord(b)
	_, _, err2 := NewReader(bytes.NewReader(b), int64(len(b))).Next()
	_, _, err3 := NewReader(bytes.NewReader(b), -1).Next()
	for _, e := range []error{err2, err3} {
		if (err1 == nil) != (e == nil) || errors.Is(err1, ErrTorn) != errors.Is(e, ErrTorn) ||
			errors.Is(err1, ErrCorrupt) != errors.Is(e, ErrCorrupt) || (err1 == io.EOF) != (e == io.EOF) {
			t.Fatalf("DecodeRecord: %v, Reader: %v", err1, e)
		}
	}
	return err1
}

func TestDecodeRejectsBadChecksum(t *testing.T) {
	frame := AppendRecord(nil, 9, []byte("some payload bytes"))
	for i := 4; i < len(frame); i++ { // crc, type and payload bytes
		b := bytes.Clone(frame)
		b[i] ^= 0x10
		if err := decodeBoth(t, b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	for i := 0; i < 4; i++ { // length bytes: shorter is corrupt, longer is torn or absurd
		b := bytes.Clone(frame)
		b[i] ^= 0x10
		if err := decodeBoth(t, b); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTorn) {
			t.Fatalf("length byte %d flipped: err = %v", i, err)
		}
	}
}

func TestDecodeRejectsTruncated(t *testing.T) {
	frame := AppendRecord(nil, 9, []byte("some payload bytes"))
	for n := 1; n < len(frame); n++ {
		if err := decodeBoth(t, frame[:n]); !errors.Is(err, ErrTorn) {
			t.Fatalf("cut at %d: err = %v, want ErrTorn", n, err)
		}
	}
	if err := decodeBoth(t, nil); err != io.EOF {
		t.Fatalf("empty: err = %v, want io.EOF", err)
	}
	if err := decodeBoth(t, []byte{0, 0}); err != io.EOF {
		t.Fatalf("two zero bytes: err = %v, want io.EOF", err)
	}
}

func TestDecodeRejectsAbsurdLength(t *testing.T) {
	for _, length := range []uint32{MaxPayloadSize + 2, 1 << 31, 0xffffffff} {
		b := make([]byte, 64)
		binary.LittleEndian.PutUint32(b, length)
		if err := decodeBoth(t, b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("length %d: err = %v, want ErrCorrupt", length, err)
		}
	}
	// A plausible length longer than the data is torn, and the Reader must
	// not allocate for it when the size is known.
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b, MaxPayloadSize)
	allocs := testing.AllocsPerRun(10, func() {
		r := NewReader(bytes.NewReader(b), int64(len(b)))
		if _, _, err := r.Next(); !errors.Is(err, ErrTorn) {
			t.Fatalf("err = %v, want ErrTorn", err)
		}
	})
	if allocs > 10 {
		t.Fatalf("%v allocations for a torn length", allocs)
	}
}

func TestSegmentHeader(t *testing.T) {
	h := encodeSegmentHeader(123456789)
	if base, err := decodeSegmentHeader(h); err != nil || base != 123456789 {
		t.Fatalf("decode = %d, %v", base, err)
	}
	for i := range h {
		b := bytes.Clone(h)
		b[i] ^= 1
		if _, err := decodeSegmentHeader(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := decodeSegmentHeader(make([]byte, HeaderSize)); !errors.Is(err, ErrTorn) {
		t.Fatalf("zero header: err = %v, want ErrTorn", err)
	}
	if _, err := decodeSegmentHeader(h[:10]); !errors.Is(err, ErrTorn) {
		t.Fatalf("short header: err = %v, want ErrTorn", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	two := AppendRecord(AppendRecord(nil, 1, []byte("first")), 2, []byte("second"))
	f.Add(two)
	f.Add(two[:7])
	f.Add(two[:len(two)-1])
	f.Add(append(AppendRecord(nil, 3, nil), 0, 0, 0, 0, 0))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, payload, n, err := DecodeRecord(data)
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrTorn) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if n != 0 || payload != nil {
				t.Fatalf("error %v with n=%d and a payload", err, n)
			}
		} else {
			if n != FrameSize(len(payload)) || n > len(data) {
				t.Fatalf("n = %d for a %d-byte payload in %d bytes", n, len(payload), len(data))
			}
			stored := binary.LittleEndian.Uint32(data[4:8])
			if recordCRC(typ, payload) != stored {
				t.Fatalf("returned a record whose CRC does not match")
			}
			if !bytes.Equal(AppendRecord(nil, typ, payload), data[:n]) {
				t.Fatalf("re-encoding differs from the input")
			}
		}
		// The streaming reader agrees on every record of the input.
		r := NewReader(bytes.NewReader(data), int64(len(data)))
		b := data
		for {
			typ1, p1, n1, err1 := DecodeRecord(b)
			typ2, p2, err2 := r.Next()
			if (err1 == nil) != (err2 == nil) || (err1 == io.EOF) != (err2 == io.EOF) ||
				errors.Is(err1, ErrTorn) != errors.Is(err2, ErrTorn) {
				t.Fatalf("DecodeRecord: %v, Reader: %v", err1, err2)
			}
			if err1 != nil {
				break
			}
			if typ1 != typ2 || !bytes.Equal(p1, p2) {
				t.Fatalf("DecodeRecord and Reader return different records")
			}
			b = b[n1:]
		}
	})
}
