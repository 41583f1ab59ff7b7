package txn

// record.go is the durable form of a transactional ID's state: one record of
// __transaction_state per change, key the transactional ID, value its Meta (the format
// is in doc.go). The latest record of a key is the ID's state; a Dead one (or an empty
// value) is its tombstone.

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Record is one durable change: the ID's whole state after it.
type Record struct {
	TransactionalID string
	Meta            Meta
}

// Tombstone reports whether the record ends its ID (it expired).
func (r Record) Tombstone() bool { return r.Meta.State == Dead }

// recordMagic starts every value: a zero byte (never the start of JSON or of Kafka's own
// TransactionLogValue, whose version is a big-endian int16 <= 1), "WT", the version.
var recordMagic = [4]byte{0x00, 'W', 'T', 0x01}

// EncodeRecord is the stored form of rec: the key and the value of its log record.
func EncodeRecord(rec Record) (key, value []byte) {
	m := &rec.Meta
	w := &writer{b: make([]byte, 0, 48+len(m.Partitions)*4+16*len(m.Groups))}
	w.b = append(w.b, recordMagic[:]...)
	w.b = append(w.b, byte(m.State))
	w.varint(m.ProducerID)
	w.varint(int64(m.ProducerEpoch))
	w.varint(m.PrevProducerID)
	w.varint(int64(m.LastProducerEpoch))
	w.uvarint(uint64(max(m.Timeout.Milliseconds(), 0)))
	w.varint(toMs(m.Start))
	w.varint(toMs(m.Updated))
	// Partitions grouped by topic (they are sorted, so each topic's are together).
	var topics int
	for i, p := range m.Partitions {
		if i == 0 || p.Topic != m.Partitions[i-1].Topic {
			topics++
		}
	}
	w.uvarint(uint64(topics))
	for i := 0; i < len(m.Partitions); {
		j := i
		for j < len(m.Partitions) && m.Partitions[j].Topic == m.Partitions[i].Topic {
			j++
		}
		w.str(m.Partitions[i].Topic)
		w.uvarint(uint64(j - i))
		for _, p := range m.Partitions[i:j] {
			w.varint(int64(p.Partition))
		}
		i = j
	}
	w.uvarint(uint64(len(m.Groups)))
	for _, g := range m.Groups {
		w.str(g)
	}
	return []byte(rec.TransactionalID), w.b
}

// DecodeRecord reads a stored record. An empty value is a tombstone.
func DecodeRecord(key, value []byte) (Record, error) {
	rec := Record{TransactionalID: string(key)}
	if len(key) == 0 {
		return Record{}, fmt.Errorf("%w: no transactional id", ErrRecord)
	}
	if len(value) == 0 {
		rec.Meta = Meta{State: Dead, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, PrevProducerID: NoProducerID, LastProducerEpoch: NoEpoch}
		return rec, nil
	}
	if len(value) < len(recordMagic) || [3]byte(value[:3]) != [3]byte(recordMagic[:3]) {
		return Record{}, fmt.Errorf("%w: unknown header % x", ErrRecord, value[:min(len(value), 4)])
	}
	if value[3] != recordMagic[3] {
		return Record{}, fmt.Errorf("%w: version %d (this broker reads %d)", ErrRecord, value[3], recordMagic[3])
	}
	r := &reader{b: value[len(recordMagic):]}
	m := &rec.Meta
	m.State = State(r.byte1())
	if r.err == nil && (m.State < Empty || m.State > Dead) {
		r.fail(fmt.Errorf("state %d", m.State))
	}
	m.ProducerID = r.varint()
	m.ProducerEpoch = r.int16v()
	m.PrevProducerID = r.varint()
	m.LastProducerEpoch = r.int16v()
	timeout := r.uvarint()
	if timeout > math.MaxInt32 {
		r.fail(fmt.Errorf("timeout %d ms", timeout))
	}
	m.Timeout = time.Duration(timeout) * time.Millisecond
	m.Start, m.Updated = r.time(), r.time()
	topics := r.count(2)
	for range topics {
		if r.err != nil {
			break
		}
		topic := r.str()
		n := r.count(1)
		for range n {
			if r.err != nil {
				break
			}
			m.Partitions = append(m.Partitions, TopicPartition{topic, r.int32v()})
		}
	}
	groups := r.count(1)
	for range groups {
		if r.err != nil {
			break
		}
		m.Groups = append(m.Groups, r.str())
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d bytes after the record", len(r.b)))
	}
	if r.err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, r.err)
	}
	// Sorted and without duplicates, whatever wrote them.
	m.Partitions = mergeSorted(nil, m.Partitions, comparePartitions)
	m.Groups = mergeSorted(nil, m.Groups, cmp.Compare[string])
	return rec, nil
}

// toMs is t in Unix milliseconds, -1 for the zero time (Kafka's "none").
func toMs(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

type writer struct{ b []byte }

func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }

var errShort = errors.New("truncated")

// reader reads a value; the first error sticks and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) byte1() byte {
	if len(r.b) < 1 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int16v() int16 {
	v := r.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.fail(fmt.Errorf("epoch %d out of range", v))
		return 0
	}
	return int16(v)
}

func (r *reader) int32v() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("partition %d out of range", v))
		return 0
	}
	return int32(v)
}

// time reads Unix milliseconds (-1: the zero time).
func (r *reader) time() time.Time {
	ms := r.varint()
	switch {
	case ms == -1:
		return time.Time{}
	case ms < 0 || ms > math.MaxInt64/int64(time.Millisecond):
		r.fail(fmt.Errorf("time %d ms out of range", ms))
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a count of items each at least min bytes long, refusing one the rest of
// the value cannot hold (so a forged count allocates nothing).
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.fail(fmt.Errorf("count %d exceeds the record", n))
		return 0
	}
	return int(n)
}
