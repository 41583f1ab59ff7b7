package txn

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

func sampleRecords() []Record {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	return []Record{
		{"t", Meta{State: Empty, ProducerID: 1000, ProducerEpoch: 0, PrevProducerID: NoProducerID, LastProducerEpoch: NoEpoch,
			Timeout: time.Minute, Updated: at}},
		{"tx-\u00e9", Meta{State: Ongoing, ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16, PrevProducerID: 7, LastProducerEpoch: 3,
			Timeout: 15 * time.Minute, Start: at.Add(-time.Second), Updated: at,
			Partitions: []TopicPartition{{"", 0}, {"a", -1}, {"a", math.MaxInt32}, {"b", 0}},
			Groups:     []string{"", "g1", "g2"}}},
		{"p", Meta{State: PrepareCommit, ProducerID: 1, ProducerEpoch: 2, PrevProducerID: 1, LastProducerEpoch: NoEpoch,
			Timeout: time.Millisecond, Start: time.UnixMilli(0).UTC(), Updated: at, Partitions: []TopicPartition{{"x", 5}}}},
		{"d", Meta{State: Dead, ProducerID: 1, ProducerEpoch: 2, PrevProducerID: 1, LastProducerEpoch: NoEpoch, Updated: at}},
	}
}

// TestRecordRoundTrip: every field survives encoding (times to the millisecond).
func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range sampleRecords() {
		k, v := EncodeRecord(rec)
		if !bytes.Equal(k, []byte(rec.TransactionalID)) {
			t.Fatalf("key %q, want the transactional id %q", k, rec.TransactionalID)
		}
		got, err := DecodeRecord(k, v)
		if err != nil {
			t.Fatalf("%s: %v", rec.TransactionalID, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, rec)
		}
	}
	// A null value is a tombstone too.
	if rec, err := DecodeRecord([]byte("x"), nil); err != nil || !rec.Tombstone() {
		t.Fatalf("empty value: %+v %v", rec, err)
	}
}

// TestRecordRefused: what the decoder refuses, naming ErrRecord: another version or
// header, truncation at every length, trailing bytes, a state out of range, a forged
// count.
func TestRecordRefused(t *testing.T) {
	_, v := EncodeRecord(sampleRecords()[1])
	bad := map[string][]byte{
		"version 2":      append([]byte{0, 'W', 'T', 2}, v[4:]...),
		"JSON":           []byte(`{"v":1}`),
		"Kafka's format": {0, 1, 0, 0},
		"trailing byte":  append(append([]byte{}, v...), 0),
		"fence state":    append(append([]byte{}, v[:4]...), append([]byte{byte(PrepareEpochFence)}, v[5:]...)...),
		// The groups (count 3, "", "g1", "g2": 8 bytes) replaced by a count of 2^28-1.
		"huge count": append(append([]byte{}, v[:len(v)-8]...), 0xff, 0xff, 0xff, 0x7f),
	}
	for i := 1; i < len(v); i++ { // (an empty value is a tombstone)
		bad[fmt.Sprintf("truncated to %d bytes", i)] = v[:i]
	}
	for name, b := range bad {
		if _, err := DecodeRecord([]byte("k"), b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v, want ErrRecord", name, err)
		}
	}
	if _, err := DecodeRecord(nil, v); !errors.Is(err, ErrRecord) {
		t.Errorf("no key: %v", err)
	}
}

// FuzzDecodeRecord: the decoder never panics, and what it accepts encodes to a value
// that decodes to the same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		k, v := EncodeRecord(rec)
		f.Add(k, v)
	}
	f.Add([]byte("k"), []byte{0, 'W', 'T', 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		k, v := EncodeRecord(rec)
		again, err := DecodeRecord(k, v)
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("re-encoding changed the record:\n%+v\n%+v", rec, again)
		}
	})
}
