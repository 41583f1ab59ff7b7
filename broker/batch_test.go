package broker

import (
	"encoding/binary"
	"errors"
	"github.com/weir-io/weir/internal/kafkatest"
	"hash/crc32"
	"testing"
)

func makeBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	return kafkatest.Batch(pid, epoch, seq, values...)
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
