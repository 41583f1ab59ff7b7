package recbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
)

func TestValidateProduce(t *testing.T) {
	good := kafkatest.Batch(-1, -1, -1, []byte("a"), []byte("b"))
	if _, err := ValidateProduce(good, 0); err != nil {
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
	// An independent CRC32C (the standard library's own table) re-signs the batch.
	binary.BigEndian.PutUint32(txn[17:], crc32.Checksum(txn[21:], crc32.MakeTable(crc32.Castagnoli)))
	ctl := append([]byte(nil), txn...)
	binary.BigEndian.PutUint16(ctl[21:], 0x20)
	binary.BigEndian.PutUint32(ctl[17:], crc32.Checksum(ctl[21:], crc32.MakeTable(crc32.Castagnoli)))
	for name, tc := range map[string]struct {
		b   []byte
		max int
		err error
	}{
		"crc":       {flip, 0, ErrCRC},
		"magic":     {old, 0, ErrMagic},
		"short":     {short, 0, ErrTooShort},
		"two":       {two, 0, ErrMultiple},
		"too large": {good, 10, ErrMessageTooLarge},
		"txn":       {txn, 0, ErrTransactional},
		"control":   {ctl, 0, ErrInvalid},
		"empty":     {nil, 0, ErrTooShort},
	} {
		if _, err := ValidateProduce(tc.b, tc.max); !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v, want %v", name, err, tc.err)
		}
	}
}

// Offsets are rewritten in place without invalidating the CRC, which excludes them.
func TestSetOffsetKeepsCRC(t *testing.T) {
	b := kafkatest.Batch(-1, -1, -1, []byte("x"))
	SetOffsetEpoch(b, 12345, 7)
	h, err := ValidateProduce(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 12345 || h.LeaderEpoch != 7 {
		t.Fatalf("got offset %d epoch %d", h.BaseOffset, h.LeaderEpoch)
	}
	SetLogAppendTime(b, 42)
	h, err = ValidateProduce(b, 0)
	if err != nil || h.MaxTimestamp != 42 || h.Attributes&0x08 == 0 {
		t.Fatalf("log append time: %+v %v", h, err)
	}
}

func TestFrame(t *testing.T) {
	a := kafkatest.Batch(-1, -1, -1, []byte("a"), []byte("b"))
	SetOffsetEpoch(a, 10, 1)
	two := append(append([]byte(nil), a...), a...)
	h, err := Frame(two)
	if err != nil || h.Size() != len(a) || h.BaseOffset != 10 || h.LastOffset() != 11 {
		t.Fatalf("frame of the first of two: %+v %v", h, err)
	}
	if _, err := Frame(a[:len(a)-1]); !errors.Is(err, ErrLength) {
		t.Fatalf("cut batch: %v", err)
	}
	neg := append([]byte(nil), a...)
	SetOffsetEpoch(neg, -5, 1)
	if _, err := Frame(neg); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative base offset: %v", err)
	}
	if !CRCOK(a) || CRCOK(a[:HeaderLen-1]) {
		t.Fatal("CRCOK")
	}
}

func TestEncodeSingleRoundTrip(t *testing.T) {
	b := EncodeSingle([]byte("group"), []byte(`[{"o":1}]`), 1700000000000)
	h, err := ValidateProduce(b, 0)
	if err != nil || h.RecordCount != 1 || h.Idempotent() || h.MaxTimestamp != 1700000000000 {
		t.Fatalf("internal batch: %+v %v", h, err)
	}
	n := 0
	err = DecodeRecords(b, func(k, v []byte) {
		n++
		if string(k) != "group" || !bytes.Equal(v, []byte(`[{"o":1}]`)) {
			t.Fatalf("record %q=%q", k, v)
		}
	})
	if err != nil || n != 1 {
		t.Fatalf("decode: %d records, %v", n, err)
	}
	if err := DecodeRecords(b[:len(b)-3], func(k, v []byte) {}); !errors.Is(err, ErrRecords) {
		t.Fatalf("cut records: %v", err)
	}
}

func FuzzValidateProduce(f *testing.F) {
	f.Add(kafkatest.Batch(-1, -1, -1, []byte("a")))
	f.Add(kafkatest.Batch(5, 0, 0, []byte("a"), []byte("bc")))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateProduce(b, 1<<20)
		if err == nil && (h.RecordCount <= 0 || h.Size() != len(b)) {
			t.Fatalf("accepted a bad batch: %+v len %d", h, len(b))
		}
		_ = DecodeRecords(b, func(k, v []byte) {}) // must not panic
	})
}

// CheckStored refuses every header byte the CRC does not cover that a reader can know
// (length, magic), a CRC other than the recorded one, and a count not matching the
// recorded last offset delta.
func TestCheckStored(t *testing.T) {
	b := EncodeSingle([]byte("k"), []byte("v"), 5)
	h, err := ValidateProduce(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStored(b, h.CRC, h.LastOffsetDelta); err != nil {
		t.Fatal(err)
	}
	SetOffsetEpoch(b, 77, 3) // not covered, not checked: readers overwrite them
	if err := CheckStored(b, h.CRC, h.LastOffsetDelta); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(c []byte) ([]byte, uint32, int32){
		"zero length":       func(c []byte) ([]byte, uint32, int32) { c[8], c[9], c[10], c[11] = 0, 0, 0, 0; return c, h.CRC, 0 },
		"zero magic":        func(c []byte) ([]byte, uint32, int32) { c[16] = 0; return c, h.CRC, 0 },
		"other crc":         func(c []byte) ([]byte, uint32, int32) { return c, h.CRC + 1, 0 },
		"record bytes":      func(c []byte) ([]byte, uint32, int32) { c[len(c)-1]++; return c, h.CRC, 0 },
		"other delta":       func(c []byte) ([]byte, uint32, int32) { return c, h.CRC, 1 },
		"short":             func(c []byte) ([]byte, uint32, int32) { return c[:HeaderLen-1], h.CRC, 0 },
		"longer than batch": func(c []byte) ([]byte, uint32, int32) { return append(c, 0), h.CRC, 0 },
	} {
		c, crc, delta := bad(append([]byte(nil), b...))
		if err := CheckStored(c, crc, delta); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
