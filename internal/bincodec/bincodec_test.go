package bincodec

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// TestRoundTrip: what a Writer writes, a Reader reads back, nil and empty apart.
func TestRoundTrip(t *testing.T) {
	var w Writer
	w.Byte(7)
	w.Uvarint(math.MaxUint64)
	w.Varint(math.MinInt64)
	w.Varint(math.MinInt16)
	w.Varint(math.MaxInt32)
	w.Str("héllo")
	w.Bytes(nil)
	w.Bytes([]byte{})
	w.Bytes([]byte{1, 2})
	w.Uvarint(2)
	r := NewReader(w.B)
	if r.Byte() != 7 || r.Uvarint() != math.MaxUint64 || r.Varint() != math.MinInt64 ||
		r.Int16() != math.MinInt16 || r.Int32() != math.MaxInt32 || r.Str() != "héllo" {
		t.Fatalf("scalars read back wrong (err %v)", r.Err())
	}
	if b := r.Bytes(); b != nil {
		t.Fatalf("nil read back as %v", b)
	}
	if b := r.Bytes(); b == nil || len(b) != 0 {
		t.Fatalf("empty read back as %v", b)
	}
	if b := r.Bytes(); !bytes.Equal(b, []byte{1, 2}) {
		t.Fatalf("bytes read back as %v", b)
	}
	if n := r.Count(1); n != 0 || r.Err() == nil {
		t.Fatalf("a count of 2 with nothing left: %d %v", n, r.Err())
	}
	if err := NewReader(w.B[:1]).End(); err == nil {
		t.Fatal("End with bytes left: no error")
	}
}

// TestErrorsStick: the first error stays, and reads after it return zero values.
func TestErrorsStick(t *testing.T) {
	var w Writer
	w.Varint(math.MaxInt16 + 1)
	w.Str("after")
	r := NewReader(w.B)
	if r.Int16() != 0 || r.Err() == nil {
		t.Fatal("an int16 out of range was read")
	}
	first := r.Err()
	if r.Str() != "" || r.Uvarint() != 0 || r.Err() != first {
		t.Fatal("reads after an error did not stop")
	}
	r = NewReader([]byte{0x80})
	if r.Uvarint(); !errors.Is(r.Err(), ErrShort) {
		t.Fatalf("a truncated varint: %v", r.Err())
	}
}
