package txn

// record.go is the durable form of a transactional ID's state: one record of
// __transaction_state per change, key the transactional ID, value its Meta (the format
// is in doc.go). The latest record of a key is the ID's state; a Dead one (or an empty
// value) is its tombstone.

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/weir-io/weir/internal/bincodec"
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
	w := &bincodec.Writer{B: make([]byte, 0, 48+len(m.Partitions)*4+16*len(m.Groups))}
	w.B = append(w.B, recordMagic[:]...)
	w.Byte(byte(m.State))
	w.Varint(m.ProducerID)
	w.Varint(int64(m.ProducerEpoch))
	w.Varint(m.PrevProducerID)
	w.Varint(int64(m.LastProducerEpoch))
	w.Uvarint(uint64(max(m.Timeout.Milliseconds(), 0)))
	w.Varint(toMs(m.Start))
	w.Varint(toMs(m.Updated))
	// Partitions grouped by topic (they are sorted, so each topic's are together).
	var topics int
	for i, p := range m.Partitions {
		if i == 0 || p.Topic != m.Partitions[i-1].Topic {
			topics++
		}
	}
	w.Uvarint(uint64(topics))
	for i := 0; i < len(m.Partitions); {
		j := i
		for j < len(m.Partitions) && m.Partitions[j].Topic == m.Partitions[i].Topic {
			j++
		}
		w.Str(m.Partitions[i].Topic)
		w.Uvarint(uint64(j - i))
		for _, p := range m.Partitions[i:j] {
			w.Varint(int64(p.Partition))
		}
		i = j
	}
	w.Uvarint(uint64(len(m.Groups)))
	for _, g := range m.Groups {
		w.Str(g)
	}
	return []byte(rec.TransactionalID), w.B
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
	r := bincodec.NewReader(value[len(recordMagic):])
	m := &rec.Meta
	m.State = State(r.Byte())
	if r.Err() == nil && (m.State < Empty || m.State > Dead) {
		r.Fail(fmt.Errorf("state %d", m.State))
	}
	m.ProducerID = r.Varint()
	m.ProducerEpoch = r.Int16()
	m.PrevProducerID = r.Varint()
	m.LastProducerEpoch = r.Int16()
	timeout := r.Uvarint()
	if timeout > math.MaxInt32 {
		r.Fail(fmt.Errorf("timeout %d ms", timeout))
	}
	m.Timeout = time.Duration(timeout) * time.Millisecond
	m.Start, m.Updated = readTime(r), readTime(r)
	for range r.Count(2) {
		topic := r.Str()
		for range r.Count(1) {
			m.Partitions = append(m.Partitions, TopicPartition{topic, r.Int32()})
		}
	}
	for range r.Count(1) {
		m.Groups = append(m.Groups, r.Str())
	}
	if err := r.End(); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, err)
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

// readTime reads Unix milliseconds (-1: the zero time).
func readTime(r *bincodec.Reader) time.Time {
	ms := r.Varint()
	switch {
	case ms == -1:
		return time.Time{}
	case ms < 0:
		r.Fail(fmt.Errorf("time %d ms out of range", ms))
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
