package recbatch

// Rewriting a stored batch with fewer records (the log cleaner): the records are decoded
// (decompressed if needed), the caller keeps some, and Rebuild encodes them again under
// the same base offset, lastOffsetDelta, producer fields and codec, with a new record
// count, base timestamp and CRC. Kafka's cleaner does the same (MemoryRecords.filterTo):
// a batch keeps its offsets even when records inside it were removed.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/weir-io/weir/internal/crc32c"
)

// AttrDeleteHorizon is the batch attribute bit (6) saying that baseTimestamp holds the
// delete horizon (KIP-534): the time after which the cleaner may remove the batch's
// tombstones and transaction markers. Record timestamps stay baseTimestamp + delta.
const AttrDeleteHorizon = 0x40

// Record is one record of a batch, decoded for rewriting.
type Record struct {
	Offset    int64  // absolute offset
	Timestamp int64  // absolute timestamp (ms)
	Key       []byte // nil: null key
	Value     []byte // nil: null value (a tombstone)
	Headers   []byte // the encoded header count and headers, as stored
}

// ReadRecords decodes every record of the stored batch b (its header h), decompressing
// it within maxDecompressed bytes. Keys, values and headers alias the batch or the
// decompressed buffer.
func ReadRecords(b []byte, maxDecompressed int) (Header, []Record, error) {
	h, err := Frame(b)
	if err != nil {
		return h, nil, err
	}
	data := b[HeaderLen:h.Size()]
	if codec := h.Attributes & 0x07; codec != 0 {
		if data, err = decompress(codec, data, maxDecompressed); err != nil {
			return h, nil, fmt.Errorf("%w: records (codec %d): %w", ErrInvalid, codec, err)
		}
	}
	recs := make([]Record, 0, max(0, min(int(h.RecordCount), len(data)/7)))
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(data)
		if n <= 0 || l <= 0 || l > int64(len(data)-n) {
			return h, nil, fmt.Errorf("%w: record %d of %d", ErrRecords, i, h.RecordCount)
		}
		r := recReader{b: data[n+1 : n+int(l)]} // attributes: unused in v2
		data = data[n+int(l):]
		tsDelta, offDelta := r.varint(), r.varint()
		key := r.bytes(true)
		val := r.bytes(true)
		if r.err {
			return h, nil, fmt.Errorf("%w: record %d of %d", ErrRecords, i, h.RecordCount)
		}
		recs = append(recs, Record{Offset: h.BaseOffset + offDelta, Timestamp: h.BaseTimestamp + tsDelta, Key: key, Value: val, Headers: r.b})
	}
	return h, recs, nil
}

// Rebuild encodes the batch of header h again with recs (a subset of its records, in
// order): same base offset, lastOffsetDelta, attributes, producer fields and max
// timestamp; record count, base timestamp and CRC recomputed; compressed with the same
// codec. horizon >= 0 sets the delete horizon (AttrDeleteHorizon, baseTimestamp =
// horizon); -1 keeps the batch's own (a horizon it had stays). No records makes an
// empty batch (uncompressed), which Kafka keeps where producer state or the range's
// last offset needs one.
func Rebuild(h Header, recs []Record, horizon int64) ([]byte, error) {
	attrs := h.Attributes
	base := h.BaseTimestamp
	switch {
	case horizon >= 0:
		attrs |= AttrDeleteHorizon
		base = horizon
	case attrs&AttrDeleteHorizon == 0 && len(recs) > 0:
		base = recs[0].Timestamp
		for _, r := range recs {
			base = min(base, r.Timestamp)
		}
	}
	var raw []byte
	for _, r := range recs {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, r.Timestamp-base)
		body = binary.AppendVarint(body, r.Offset-h.BaseOffset)
		body = appendBytes(body, r.Key)
		body = appendBytes(body, r.Value)
		if len(r.Headers) == 0 {
			body = binary.AppendVarint(body, 0)
		} else {
			body = append(body, r.Headers...)
		}
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	codec := attrs & 0x07
	if len(recs) == 0 {
		codec = 0
		attrs &^= 0x07
	}
	if codec != 0 {
		var err error
		if raw, err = Compress(codec, raw); err != nil {
			return nil, err
		}
	}
	if HeaderLen-12+len(raw) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: rebuilt batch too large", ErrInvalid)
	}
	b := make([]byte, HeaderLen, HeaderLen+len(raw))
	binary.BigEndian.PutUint64(b[0:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[8:], uint32(HeaderLen-12+len(raw)))
	binary.BigEndian.PutUint32(b[12:], uint32(h.LeaderEpoch))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(base))
	binary.BigEndian.PutUint64(b[35:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[43:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[51:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[53:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[57:], uint32(len(recs)))
	b = append(b, raw...)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b, nil
}

func appendBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(v))), v...)
}

// DeleteHorizon returns the batch's delete horizon (ms) and whether it has one.
func (h *Header) DeleteHorizon() (int64, bool) {
	if h.Attributes&AttrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// zstdEncPool: an encoder is costly to create (its tables), EncodeAll is safe to reuse.
var zstdEncPool sync.Pool

// Compress encodes records with Kafka codec (1 gzip, 2 snappy in the Java producer's
// xerial framing, which every client reads, 3 lz4 frame, 4 zstd).
func Compress(codec int16, src []byte) ([]byte, error) {
	switch codec {
	case 1:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(src); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case 2:
		block := s2.EncodeSnappy(nil, src)
		out := append([]byte{}, xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		return append(out, block...), nil
	case 3:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(src); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case 4:
		enc, _ := zstdEncPool.Get().(*zstd.Encoder)
		if enc == nil {
			var err error
			if enc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
				return nil, err
			}
		}
		defer zstdEncPool.Put(enc)
		return enc.EncodeAll(src, nil), nil
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrInvalid, codec)
}
