package recbatch

import (
	"encoding/binary"
	"errors"

	"github.com/weir-io/weir/internal/crc32c"
)

// ErrRecords: a record inside an uncompressed batch does not decode.
var ErrRecords = errors.New("recbatch: malformed records")

// EncodeSingle builds an uncompressed, non-idempotent record batch v2 holding one record,
// for the broker's own internal records (group offset commits).
func EncodeSingle(key, value []byte, tsMs int64) []byte {
	var r []byte
	r = append(r, 0)              // attributes
	r = binary.AppendVarint(r, 0) // timestamp delta
	r = binary.AppendVarint(r, 0) // offset delta
	r = binary.AppendVarint(r, int64(len(key)))
	r = append(r, key...)
	r = binary.AppendVarint(r, int64(len(value)))
	r = append(r, value...)
	r = binary.AppendVarint(r, 0) // headers
	rec := binary.AppendVarint(nil, int64(len(r)))
	rec = append(rec, r...)

	b := make([]byte, HeaderLen, HeaderLen+len(rec))
	binary.BigEndian.PutUint32(b[8:], uint32(HeaderLen-12+len(rec)))
	b[16] = 2
	binary.BigEndian.PutUint64(b[27:], uint64(tsMs))
	binary.BigEndian.PutUint64(b[35:], uint64(tsMs))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)     // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], 1)
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

// DecodeRecords calls fn with the key and value of each record of an uncompressed batch
// (a null key or value is nil).
func DecodeRecords(batch []byte, fn func(key, value []byte)) error {
	h, err := Parse(batch)
	if err != nil {
		return err
	}
	if h.Attributes&0x07 != 0 {
		return errors.New("recbatch: compressed internal batch")
	}
	b := batch[HeaderLen:]
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(b)
		if n <= 0 || l < 0 || int64(len(b)-n) < l {
			return ErrRecords
		}
		rec := b[n : n+int(l)]
		b = b[n+int(l):]
		if len(rec) < 1 {
			return ErrRecords
		}
		rec = rec[1:]            // attributes
		for j := 0; j < 2; j++ { // timestamp delta, offset delta
			_, n := binary.Varint(rec)
			if n <= 0 {
				return ErrRecords
			}
			rec = rec[n:]
		}
		var kv [2][]byte
		for j := range kv {
			l, n := binary.Varint(rec)
			if n <= 0 || int64(len(rec)-n) < l {
				return ErrRecords
			}
			rec = rec[n:]
			if l >= 0 {
				kv[j] = rec[:l]
				rec = rec[l:]
			}
		}
		fn(kv[0], kv[1])
	}
	return nil
}
