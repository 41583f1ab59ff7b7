package recbatch

// The records inside a produced batch, checked the way Kafka's LogValidator checks them
// before the broker stores the batch for every consumer to read: the header alone
// (ValidateProduce) lets a producer plant a batch whose records do not decode, whose
// count or offset deltas disagree with the header, so that consumers fail or skip data.
// Compressed batches are decompressed for the check, bounded by a size.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// RecordRules are what ValidateRecords enforces beyond the record format.
type RecordRules struct {
	// MaxDecompressed bounds a compressed batch's records once decompressed; a batch
	// that decompresses to more is refused (a decompression bomb costs the broker no
	// more than this).
	MaxDecompressed int
	// RequireKeys refuses a record whose key is null (an empty key is a key), as
	// Kafka's LogValidator does for compacted topics ("Compacted topic cannot accept
	// message without key"): the cleaner keeps the latest record per key, and a
	// record without one could never be superseded or deleted.
	RequireKeys bool
}

// ValidateRecords decodes every record of the v2 batch b (whose header h was validated
// by ValidateProduce) and checks: the records fill the batch exactly, their number is
// the header's record count, their offset deltas are 0..count-1, each record's fields
// (varint lengths of key, value and headers) fit inside its own length, timestamps do
// not overflow, header keys are not null, and with rules.RequireKeys record keys are
// not null either (ErrNullKey). Errors wrap ErrInvalid (INVALID_RECORD).
func ValidateRecords(h *Header, b []byte, rules RecordRules) error {
	data := b[HeaderLen:]
	if codec := h.Attributes & 0x07; codec != 0 {
		var err error
		if data, err = decompress(codec, data, rules.MaxDecompressed); err != nil {
			return fmt.Errorf("%w: compressed records (codec %d): %w", ErrInvalid, codec, err)
		}
	}
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(data)
		if n <= 0 || l <= 0 || l > int64(len(data)-n) {
			return fmt.Errorf("%w: record %d of %d: length does not fit the batch", ErrInvalid, i, h.RecordCount)
		}
		if err := checkRecord(h, i, data[n:n+int(l)], rules.RequireKeys); err != nil {
			return err
		}
		data = data[n+int(l):]
	}
	if len(data) != 0 {
		return fmt.Errorf("%w: %d bytes after the %d records the header counts", ErrInvalid, len(data), h.RecordCount)
	}
	return nil
}

func checkRecord(h *Header, i int32, rec []byte, requireKey bool) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: record %d of %d: %s", ErrInvalid, i, h.RecordCount, what)
	}
	r := recReader{b: rec[1:]} // attributes: unused in v2
	tsDelta := r.varint()
	offDelta := r.varint()
	if r.err {
		return bad("truncated")
	}
	if offDelta != int64(i) {
		return bad(fmt.Sprintf("offset delta %d, want %d", offDelta, i))
	}
	if (tsDelta > 0 && h.BaseTimestamp > math.MaxInt64-tsDelta) || (tsDelta < 0 && h.BaseTimestamp < math.MinInt64-tsDelta) || h.BaseTimestamp+tsDelta < -1 {
		return bad(fmt.Sprintf("timestamp delta %d from base %d", tsDelta, h.BaseTimestamp))
	}
	if key := r.bytes(true); key == nil && requireKey && !r.err {
		return fmt.Errorf("%w: record %d of %d: %w", ErrInvalid, i, h.RecordCount, ErrNullKey)
	}
	r.bytes(true) // value
	headers := r.varint()
	if r.err || headers < 0 || headers > int64(len(r.b)) {
		return bad("bad header count")
	}
	for j := int64(0); j < headers && !r.err; j++ {
		if r.bytes(false) == nil && !r.err {
			return bad("null header key")
		}
		r.bytes(true)
	}
	if r.err {
		return bad("a length does not fit the record")
	}
	if len(r.b) != 0 {
		return bad(fmt.Sprintf("%d bytes after its fields", len(r.b)))
	}
	return nil
}

// recReader reads a record's varints and length-prefixed fields; err sticks.
type recReader struct {
	b   []byte
	err bool
}

func (r *recReader) varint() int64 {
	if r.err {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a varint length and that many bytes; -1 is null (nil) when nullable.
func (r *recReader) bytes(nullable bool) []byte {
	l := r.varint()
	switch {
	case r.err:
		return nil
	case l == -1 && nullable:
		return nil
	case l < 0 || l > int64(len(r.b)):
		r.err = true
		return nil
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	if v == nil {
		v = []byte{}
	}
	return v
}

// errTooLarge: a compressed batch decompresses to more than the bound.
var errTooLarge = errors.New("decompresses to more than the broker's bound")

// MaxDecompressed is the largest bound ValidateRecords applies to zstd batches (its
// decoders are pooled with the bound built in): RecordRules.MaxDecompressed above it
// counts as it.
const MaxDecompressed = 128 << 20

var zstdPool = sync.Pool{New: func() any {
	// A frame may claim a window of up to 512 MiB by default: producers' frames use
	// a few MiB, so the window (what a decoder allocates up front) is bounded too.
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(32<<20), zstd.WithDecoderMaxMemory(MaxDecompressed))
	return d
}}

var gzipPool sync.Pool // *gzip.Reader

// xerialMagic starts the snappy framing of the Java producer.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress decodes Kafka's codecs (1 gzip, 2 snappy raw or xerial-framed, 3 lz4
// frame, 4 zstd) and refuses output beyond max bytes without producing it.
func decompress(codec int16, src []byte, max int) ([]byte, error) {
	if max <= 0 {
		max = math.MaxInt32
	}
	limited := func(r io.Reader) ([]byte, error) {
		out, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
		if err == nil && len(out) > max {
			err = errTooLarge
		}
		return out, err
	}
	switch codec {
	case 1:
		zr, _ := gzipPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = zr.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return nil, err
		}
		defer gzipPool.Put(zr)
		return limited(zr)
	case 2:
		if len(src) >= 16 && bytes.HasPrefix(src, xerialMagic) {
			return xerial(src[16:], max)
		}
		if l, err := s2.DecodedLen(src); err != nil {
			return nil, err
		} else if l > max {
			return nil, errTooLarge
		}
		return s2.Decode(nil, src)
	case 3:
		return limited(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		// DecodeAll, not the stream: it sizes the output from the frame header at once
		// (5x faster on small batches); the decoder's memory bound stops a bomb.
		d := zstdPool.Get().(*zstd.Decoder)
		defer zstdPool.Put(d)
		out, err := d.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || (err == nil && len(out) > max) {
			return nil, errTooLarge
		}
		return out, err
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
}

// xerial decodes the Java producer's snappy framing: big-endian chunk lengths, each
// followed by a raw snappy block.
func xerial(src []byte, max int) ([]byte, error) {
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("malformed xerial snappy framing")
		}
		size := int64(binary.BigEndian.Uint32(src))
		src = src[4:]
		if size > int64(len(src)) {
			return nil, errors.New("malformed xerial snappy framing")
		}
		l, err := s2.DecodedLen(src[:size])
		if err != nil {
			return nil, err
		}
		if l > max-len(out) {
			return nil, errTooLarge
		}
		chunk, err := s2.Decode(nil, src[:size])
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
		src = src[size:]
	}
	return out, nil
}
