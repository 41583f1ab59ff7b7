package recbatch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/weir-io/weir/internal/crc32c"
	"github.com/weir-io/weir/internal/kafkatest"
)

// rec is one record as a test writes it, fields raw so that a test can lie in them.
type rec struct {
	tsDelta, offDelta int64
	key, value        []byte // nil: null
	headers           [][2][]byte
	extra             []byte // bytes appended inside the record, after its fields
	lenAdjust         int64  // added to the record's length varint
}

func (r rec) encode() []byte {
	var b []byte
	b = append(b, 0)
	b = binary.AppendVarint(b, r.tsDelta)
	b = binary.AppendVarint(b, r.offDelta)
	for _, f := range [][]byte{r.key, r.value} {
		if f == nil {
			b = binary.AppendVarint(b, -1)
		} else {
			b = binary.AppendVarint(b, int64(len(f)))
			b = append(b, f...)
		}
	}
	b = binary.AppendVarint(b, int64(len(r.headers)))
	for _, h := range r.headers {
		for _, f := range h {
			if f == nil {
				b = binary.AppendVarint(b, -1)
			} else {
				b = binary.AppendVarint(b, int64(len(f)))
				b = append(b, f...)
			}
		}
	}
	b = append(b, r.extra...)
	return append(binary.AppendVarint(nil, int64(len(b))+r.lenAdjust), b...)
}

// batchOf builds a v2 batch whose header claims count records (and lastOffsetDelta
// count-1), holding recs, compressed with codec; the CRC is right.
func batchOf(t *testing.T, codec int16, count int32, recs ...rec) []byte {
	t.Helper()
	var body []byte
	for _, r := range recs {
		body = append(body, r.encode()...)
	}
	body = compress(t, codec, body)
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	binary.BigEndian.PutUint32(b[8:], uint32(HeaderLen-12+len(body)))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1))
	binary.BigEndian.PutUint64(b[27:], 1700000000000)
	binary.BigEndian.PutUint64(b[35:], 1700000000000)
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

func compress(t *testing.T, codec int16, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case 0:
		return b
	case 1:
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case 2:
		return s2.EncodeSnappy(nil, b)
	case 3:
		w := lz4.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case 4:
		w, _ := zstd.NewWriter(&buf)
		w.Write(b)
		w.Close()
	case 5: // snappy in the Java producer's xerial framing
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(b) > 0 {
			n := min(len(b), 1000)
			blk := s2.EncodeSnappy(nil, b[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
			buf.Write(blk)
			b = b[n:]
		}
	}
	return buf.Bytes()
}

func validate(b []byte, rules RecordRules) error {
	h, err := ValidateProduce(b, 0)
	if err != nil {
		return err
	}
	return ValidateRecords(&h, b, rules)
}

// TestValidateRecords: well-formed batches pass, compressed with every codec; each way
// a producer can plant a batch whose records disagree with its header, or do not
// decode, is refused with ErrInvalid (INVALID_RECORD), compressed or not.
func TestValidateRecords(t *testing.T) {
	good := []rec{{offDelta: 0, value: []byte("a")}, {offDelta: 1, tsDelta: 5, key: []byte("k"), value: []byte("b"), headers: [][2][]byte{{[]byte("h"), nil}}}}
	rules := RecordRules{MaxDecompressed: 1 << 20}
	if err := validate(kafkatest.Batch(-1, -1, -1, []byte("a"), []byte("bc")), rules); err != nil {
		t.Fatalf("kafkatest batch: %v", err)
	}
	bad := map[string]struct {
		count int32
		recs  []rec
	}{
		"fewer records than counted": {3, good},
		"more records than counted":  {1, good},
		"offset deltas not dense":    {2, []rec{good[0], {offDelta: 2, value: []byte("b")}}},
		"offset deltas repeated":     {2, []rec{good[0], {offDelta: 0, value: []byte("b")}}},
		"value beyond the record":    {1, []rec{{value: []byte("abc"), lenAdjust: -2}}},
		"record beyond the batch":    {1, []rec{{value: []byte("abc"), lenAdjust: 50}}},
		"bytes after the fields":     {1, []rec{{value: []byte("a"), extra: []byte{0, 0}}}},
		"null header key":            {1, []rec{{value: []byte("a"), headers: [][2][]byte{{nil, []byte("v")}}}}},
		"timestamp overflow":         {1, []rec{{tsDelta: 9223372036854775807, value: []byte("a")}}},
		"negative timestamp":         {1, []rec{{tsDelta: -1700000000002, value: []byte("a")}}},
	}
	for _, codec := range []int16{0, 1, 2, 3, 4, 5} {
		wire := codec
		if codec == 5 {
			wire = 2
		}
		b := batchOf(t, codec, 2, good...)
		binary.BigEndian.PutUint16(b[21:], uint16(wire))
		binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
		if err := validate(b, rules); err != nil {
			t.Errorf("codec %d: good batch refused: %v", codec, err)
		}
		for name, tc := range bad {
			b := batchOf(t, codec, tc.count, tc.recs...)
			binary.BigEndian.PutUint16(b[21:], uint16(wire))
			binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
			if err := validate(b, rules); !errors.Is(err, ErrInvalid) {
				t.Errorf("codec %d: %s: %v, want ErrInvalid", codec, name, err)
			}
		}
		// A decompression bomb: refused at the bound, whatever the codec.
		if codec != 0 {
			big := rec{value: make([]byte, 64<<10)}
			b := batchOf(t, codec, 1, big)
			binary.BigEndian.PutUint16(b[21:], uint16(wire))
			binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
			if err := validate(b, RecordRules{MaxDecompressed: 32 << 10}); !errors.Is(err, ErrInvalid) {
				t.Errorf("codec %d: 64 KiB of records with a 32 KiB bound: %v, want ErrInvalid", codec, err)
			}
			if err := validate(b, rules); err != nil {
				t.Errorf("codec %d: 64 KiB of records with a 1 MiB bound: %v", codec, err)
			}
		}
	}
}

// TestValidateRecordsRequireKeys: with RequireKeys (a compacted topic) a record with a
// null key is refused with ErrNullKey and ErrInvalid (INVALID_RECORD), whichever record
// of the batch it is and whatever the codec; an empty key is a key; without the rule a
// null key passes.
func TestValidateRecordsRequireKeys(t *testing.T) {
	keyed := rec{offDelta: 0, key: []byte("k"), value: []byte("a")}
	for _, codec := range []int16{0, 1, 2, 3, 4} {
		for name, tc := range map[string]struct {
			recs []rec
			ok   bool
		}{
			"keyed":                {[]rec{keyed, {offDelta: 1, key: []byte("j"), value: []byte("b")}}, true},
			"empty key":            {[]rec{keyed, {offDelta: 1, key: []byte{}, value: []byte("b")}}, true},
			"tombstone":            {[]rec{keyed, {offDelta: 1, key: []byte("k")}}, true},
			"first key null":       {[]rec{{offDelta: 0, value: []byte("a")}, {offDelta: 1, key: []byte("k"), value: []byte("b")}}, false},
			"second key null":      {[]rec{keyed, {offDelta: 1, value: []byte("b")}}, false},
			"null key, null value": {[]rec{keyed, {offDelta: 1}}, false},
		} {
			b := batchOf(t, codec, 2, tc.recs...)
			err := validate(b, RecordRules{MaxDecompressed: 1 << 20, RequireKeys: true})
			if tc.ok && err != nil {
				t.Errorf("codec %d: %s: refused: %v", codec, name, err)
			}
			if !tc.ok && (!errors.Is(err, ErrNullKey) || !errors.Is(err, ErrInvalid)) {
				t.Errorf("codec %d: %s: %v, want ErrNullKey and ErrInvalid", codec, name, err)
			}
			if err := validate(b, RecordRules{MaxDecompressed: 1 << 20}); err != nil {
				t.Errorf("codec %d: %s without RequireKeys: %v", codec, name, err)
			}
		}
	}
}

func FuzzValidateRecords(f *testing.F) {
	f.Add(kafkatest.Batch(-1, -1, -1, []byte("a")))
	f.Add(kafkatest.Batch(5, 0, 0, []byte("a"), []byte("bc")))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateProduce(b, 1<<20)
		if err != nil {
			return
		}
		if err := ValidateRecords(&h, b, RecordRules{MaxDecompressed: 1 << 20}); err == nil {
			// Accepted: every record must decode with the broker's own reader.
			n := int32(0)
			if h.Attributes&0x07 == 0 {
				if err := DecodeRecords(b, func(k, v []byte) { n++ }); err != nil || n != h.RecordCount {
					t.Fatalf("accepted records that do not decode: %v (%d of %d)", err, n, h.RecordCount)
				}
			}
		}
	})
}

// BenchmarkValidateRecords prints the record check's cost per produced batch: 16
// records of 1 KiB, uncompressed and with each codec (the decompression dominates).
func BenchmarkValidateRecords(b *testing.B) {
	t := &testing.T{}
	var recs []rec
	for i := 0; i < 16; i++ {
		v := bytes.Repeat([]byte{byte('a' + i)}, 1024)
		recs = append(recs, rec{offDelta: int64(i), key: []byte("key"), value: v})
	}
	for _, c := range []struct {
		name  string
		codec int16
	}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		batch := batchOf(t, c.codec, 16, recs...)
		h, err := ValidateProduce(batch, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(16 << 10)
			for i := 0; i < b.N; i++ {
				if err := ValidateRecords(&h, batch, RecordRules{MaxDecompressed: 128 << 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
