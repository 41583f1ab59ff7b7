// Package bincodec writes and reads the compact binary values of the coordinators'
// records: unsigned and zig-zag varints, length-prefixed strings and byte slices. A
// Reader keeps the first error and answers zero values after it, so a decoder reads a
// whole value and checks once; counts are checked against the bytes left before a
// decoder allocates for them, so a forged count costs nothing.
package bincodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort: the value ended inside an item.
var ErrShort = errors.New("bincodec: truncated")

// Writer appends to B.
type Writer struct{ B []byte }

func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }
func (w *Writer) Varint(v int64)   { w.B = binary.AppendVarint(w.B, v) }
func (w *Writer) Byte(c byte)      { w.B = append(w.B, c) }

// Str writes uvarint(len) and the bytes of s.
func (w *Writer) Str(s string) { w.Uvarint(uint64(len(s))); w.B = append(w.B, s...) }

// Bytes writes uvarint(0) for nil, else uvarint(len+1) and the bytes, so that nil and
// empty stay apart.
func (w *Writer) Bytes(b []byte) {
	if b == nil {
		w.Uvarint(0)
		return
	}
	w.Uvarint(uint64(len(b)) + 1)
	w.B = append(w.B, b...)
}

// Reader reads a value written by a Writer.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error met, nil if none.
func (r *Reader) Err() error { return r.err }

// Fail records err (unless an error came first); every later read returns zero.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// End is Err, or an error if bytes are left after the value.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) != 0 {
		r.Fail(fmt.Errorf("bincodec: %d bytes after the value", len(r.b)))
	}
	return r.err
}

func (r *Reader) Byte() byte {
	if len(r.b) < 1 {
		r.Fail(ErrShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail(ErrShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail(ErrShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int16 reads a varint that must fit an int16.
func (r *Reader) Int16() int16 {
	v := r.Varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.Fail(fmt.Errorf("bincodec: %d out of the int16 range", v))
		return 0
	}
	return int16(v)
}

// Int32 reads a varint that must fit an int32.
func (r *Reader) Int32() int32 {
	v := r.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.Fail(fmt.Errorf("bincodec: %d out of the int32 range", v))
		return 0
	}
	return int32(v)
}

func (r *Reader) raw(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.Fail(ErrShort)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *Reader) Str() string { return string(r.raw(r.Uvarint())) }

// Bytes reads what Writer.Bytes wrote, a copy (nil stays nil).
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if n == 0 {
		return nil
	}
	return append([]byte{}, r.raw(n-1)...)
}

// Count reads a count of items each at least min bytes long, refusing one that the rest
// of the value cannot hold.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if n > uint64(len(r.b)/max(min, 1)) {
		r.Fail(fmt.Errorf("bincodec: count %d exceeds the value", n))
		return 0
	}
	return int(n)
}
