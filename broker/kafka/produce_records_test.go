package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/crc32c"
	"github.com/weir-io/weir/internal/kafkatest"
)

// TestProducePlantedBatchesRefused mounts issue 20's record attack over TCP: a producer
// sends batches whose header is well formed and correctly signed but whose records lie
// (a count the records do not fill, duplicated offset deltas, a value running past its
// record). Each is refused with INVALID_RECORD and never reaches the log; an honest
// batch on the same connection is stored.
func TestProducePlantedBatchesRefused(t *testing.T) {
	s, be := startServer(t)
	rc := dialRaw(t, s)
	resign := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
		return b
	}
	// kafkatest.Batch's records of a one-byte value are 8 bytes each: the length
	// varint, then attributes, timestamp delta, offset delta, key (-1), value, headers.
	planted := map[string][]byte{}
	b := kafkatest.Batch(-1, -1, -1, []byte("a"))
	binary.BigEndian.PutUint32(b[57:], 2) // two records claimed, one present
	binary.BigEndian.PutUint32(b[23:], 1)
	planted["count larger than the records"] = resign(b)
	b = kafkatest.Batch(-1, -1, -1, []byte("a"), []byte("b"))
	b[61+8+3] = 0 // the second record's offset delta: 0 again
	planted["duplicated offset delta"] = resign(b)
	b = kafkatest.Batch(-1, -1, -1, []byte("a"))
	b[61+5] = 0x7e // the value's length: 63 bytes, past the record's end
	planted["value past the record"] = resign(b)

	corr := int32(0)
	produce := func(batch []byte) int16 {
		corr++
		return rawProduce(t, rc, corr, "t", batch)
	}
	for name, batch := range planted {
		if code := produce(batch); code != kerr.InvalidRecord.Code {
			t.Errorf("%s: %v, want INVALID_RECORD", name, kerr.ErrorForCode(code))
		}
	}
	be.mu.Lock()
	n := len(be.appends)
	be.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d planted batches reached the log", n)
	}
	if code := produce(kafkatest.Batch(-1, -1, -1, []byte("a"), []byte("b"))); code != 0 {
		t.Fatalf("honest batch: %v", kerr.ErrorForCode(code))
	}
}
