package broker

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// makeBatch builds an uncompressed record batch v2 the way a client would.
func makeBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	var recs []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, 0)             // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // key: null
		r = binary.AppendVarint(r, int64(len(v))) // value
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	binary.BigEndian.PutUint32(b[8:], uint32(batchHeaderLen-12+len(recs)))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(len(values)-1))
	binary.BigEndian.PutUint64(b[27:], 1700000000000)
	binary.BigEndian.PutUint64(b[35:], 1700000000000)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(len(values)))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func TestValidateProduceBatch(t *testing.T) {
	good := makeBatch(-1, -1, -1, []byte("a"), []byte("b"))
	if _, err := validateProduceBatch(good, 0); err != nil {
		t.Fatalf("good batch rejected: %v", err)
	}
	flip := append([]byte(nil), good...)
	flip[len(flip)-1] ^= 1
	old := append([]byte(nil), good...)
	old[16] = 1
	short := good[:40]
	two := append(append([]byte(nil), good...), good...)
	txn := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(txn[21:], 0x10)
	binary.BigEndian.PutUint32(txn[17:], crc32.Checksum(txn[21:], castagnoli))
	for name, tc := range map[string]struct {
		b   []byte
		max int
		err error
	}{
		"crc":       {flip, 0, errBatchCRC},
		"magic":     {old, 0, errBatchMagic},
		"short":     {short, 0, errBatchTooShort},
		"two":       {two, 0, errBatchMultiple},
		"too large": {good, 10, errMessageTooLarge},
		"txn":       {txn, 0, errBatchTxn},
		"empty":     {nil, 0, errBatchTooShort},
	} {
		if _, err := validateProduceBatch(tc.b, tc.max); !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v, want %v", name, err, tc.err)
		}
	}
}

// Offsets are rewritten in place without invalidating the CRC, which excludes them.
func TestSetOffsetKeepsCRC(t *testing.T) {
	b := makeBatch(-1, -1, -1, []byte("x"))
	setBatchOffsetEpoch(b, 12345, 7)
	h, err := validateProduceBatch(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 12345 || h.LeaderEpoch != 7 {
		t.Fatalf("got offset %d epoch %d", h.BaseOffset, h.LeaderEpoch)
	}
	setLogAppendTime(b, 42)
	h, err = validateProduceBatch(b, 0)
	if err != nil || h.MaxTimestamp != 42 || h.Attributes&0x08 == 0 {
		t.Fatalf("log append time: %+v %v", h, err)
	}
}

func FuzzValidateProduceBatch(f *testing.F) {
	f.Add(makeBatch(-1, -1, -1, []byte("a")))
	f.Add(makeBatch(5, 0, 0, []byte("a"), []byte("bc")))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := validateProduceBatch(b, 1<<20)
		if err == nil && (h.RecordCount <= 0 || int(h.Length)+12 != len(b)) {
			t.Fatalf("accepted a bad batch: %+v len %d", h, len(b))
		}
	})
}
