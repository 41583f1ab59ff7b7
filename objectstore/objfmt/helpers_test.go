package objfmt

import (
	"bytes"
	"encoding/binary"
	"github.com/weir-io/weir/internal/crc32c"
	"math/rand/v2"
	"testing"
)

// makeBatch builds a real, uncompressed record batch v2 of nrec records with values of
// valSize bytes, offsets from base, timestamps baseTs, baseTs+1, ...
func makeBatch(base int64, nrec, valSize int, baseTs int64, fill byte) []byte {
	var recs []byte
	val := bytes.Repeat([]byte{fill}, valSize)
	for i := range nrec {
		var body []byte
		body = append(body, 0)                           // attributes
		body = binary.AppendVarint(body, int64(i))       // timestamp delta
		body = binary.AppendVarint(body, int64(i))       // offset delta
		body = binary.AppendVarint(body, -1)             // key length: null
		body = binary.AppendVarint(body, int64(valSize)) // value length
		body = append(body, val...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, minBatchLen, minBatchLen+len(recs))
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(minBatchLen-12+len(recs)))
	binary.BigEndian.PutUint32(b[12:], 7) // leader epoch
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], 0)
	binary.BigEndian.PutUint32(b[23:], uint32(nrec-1))
	binary.BigEndian.PutUint64(b[27:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[35:], uint64(baseTs+int64(nrec)-1))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(nrec))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32c.Checksum(b[21:]))
	return b
}

// testBatch is one batch added to a test object.
type testBatch struct {
	base, last, maxTs int64
	data              []byte
}

type testPart struct {
	topicID   [16]byte
	partition int32
	batches   []testBatch
}

func (p *testPart) bytes() int64 {
	n := int64(0)
	for _, b := range p.batches {
		n += int64(len(b.data))
	}
	return n
}

// genParts makes nparts partitions (several per topic) with random batches.
func genParts(rng *rand.Rand, nparts, maxBatches, maxRecs, maxVal int) []*testPart {
	var parts []*testPart
	var topic [16]byte
	for i := range nparts {
		if i%4 == 0 {
			for k := range topic {
				topic[k] = byte(rng.IntN(256))
			}
		}
		p := &testPart{topicID: topic, partition: int32(i % 4 * 3)}
		off := rng.Int64N(1 << 40)
		ts := int64(1_700_000_000_000) + rng.Int64N(1e6)
		for range 1 + rng.IntN(maxBatches) {
			nrec := 1 + rng.IntN(maxRecs)
			b := makeBatch(off, nrec, rng.IntN(maxVal+1), ts, byte(i))
			// timestamps are not monotonic across batches
			p.batches = append(p.batches, testBatch{off, off + int64(nrec) - 1, ts + int64(nrec) - 1, b})
			off += int64(nrec)
			ts += rng.Int64N(2000) - 500
		}
		parts = append(parts, p)
	}
	return parts
}

// writeObject writes parts in order and returns the object and its summary.
func writeObject(t testing.TB, parts []*testPart, opts Options) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for _, p := range parts {
		for _, b := range p.batches {
			if err := w.Add(p.topicID, p.partition, b.base, b.last, b.maxTs, b.data); err != nil {
				t.Fatalf("Add %x/%d @%d: %v", p.topicID, p.partition, b.base, err)
			}
		}
	}
	s, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if int64(buf.Len()) != s.Size {
		t.Fatalf("wrote %d bytes, summary says %d", buf.Len(), s.Size)
	}
	return buf.Bytes(), s
}

// mustIndex parses the footer and index of a whole object.
func mustIndex(t testing.TB, obj []byte) (Footer, *Index) {
	t.Helper()
	f, idx, err := ReadIndex(bytes.NewReader(obj), int64(len(obj)))
	if err != nil {
		t.Fatalf("ReadIndex: %v", err)
	}
	return f, idx
}
