package group

// recordbin.go is the binary form of a Record (version 2), which EncodeRecord writes: a
// new coordinator decodes every record of its partition before it serves the partition's
// groups, and JSON decoded at about 100 MB/s (BenchmarkGroupLoad).
//
//	value   := 0x00 'W' 'G' 0x02 flags [meta] topics offsets [txn] [ends] [consumer]
//	flags   := byte: 1 full, 2 deleted, 4 meta present, 8 txn present, 16 ends present,
//	           32 consumer present
//	meta    := varint(generation) str(protocol_type) str(protocol) str(leader)
//	           varint(time, unix ms) uvarint(n) member*n
//	member  := str(id) optstr(instance_id) str(client_id) str(client_host)
//	           uvarint(session ms) uvarint(rebalance ms)
//	           uvarint(n) (str(name) bytes(metadata))*n bytes(assignment)
//	topics  := uvarint(n) (str(name) str(topic_id))*n
//	offsets := uvarint(n) offset*n
//	offset  := common byte(delete)
//	common  := uvarint(topic index) varint(partition) varint(offset) varint(leader_epoch)
//	           str(metadata) varint(commit time, unix ms)
//	txn     := uvarint(n) (common varint(producer_id) varint(producer_epoch) byte(stale))*n
//	ends    := uvarint(n) (varint(producer_id) byte(commit))*n
//	consumer:= a consumer group's state (flag 32, consumer_record.go)
//	str     := uvarint(len) bytes
//	optstr  := byte(0: absent | 1: present) [str]
//	bytes   := uvarint(0: nil | len+1) bytes
//
// Times are kept to the millisecond (as Kafka's commit timestamps). Every count and
// length is checked against what is left of the value before anything is allocated.
// The txn and ends sections (transactional offsets) came later than the rest: a record
// without them is what brokers wrote before, and a broker that predates them refuses a
// record with them (unknown flags) rather than reading half of it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

var binMagic = [4]byte{0x00, 'W', 'G', 0x02}

const (
	flagFull    = 1
	flagDeleted = 2
	flagMeta    = 4
	flagTxn     = 8
	flagTxnEnds = 16
	flagsKnown  = flagFull | flagDeleted | flagMeta | flagTxn | flagTxnEnds | flagConsumer
)

type binWriter struct{ b []byte }

func (w *binWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *binWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *binWriter) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *binWriter) byte1(c byte)     { w.b = append(w.b, c) }

func (w *binWriter) bool1(v bool) {
	if v {
		w.byte1(1)
	} else {
		w.byte1(0)
	}
}

func (w *binWriter) bytes(b []byte) {
	if b == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(len(b)) + 1)
	w.b = append(w.b, b...)
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func encodeBinary(rec Record) []byte {
	w := &binWriter{b: make([]byte, 0, 64+len(rec.Offsets)*24)}
	w.b = append(w.b, binMagic[:]...)
	var flags byte
	if rec.Full {
		flags |= flagFull
	}
	if rec.Deleted {
		flags |= flagDeleted
	}
	if rec.Meta != nil {
		flags |= flagMeta
	}
	if len(rec.Txn) > 0 {
		flags |= flagTxn
	}
	if len(rec.TxnEnds) > 0 {
		flags |= flagTxnEnds
	}
	if rec.Consumer != nil {
		flags |= flagConsumer
	}
	w.byte1(flags)
	if m := rec.Meta; m != nil {
		w.varint(int64(m.Generation))
		w.str(m.ProtocolType)
		w.str(m.Protocol)
		w.str(m.Leader)
		w.varint(unixMs(m.Time))
		w.uvarint(uint64(len(m.Members)))
		for _, mm := range m.Members {
			w.str(mm.ID)
			if mm.InstanceID == nil {
				w.byte1(0)
			} else {
				w.byte1(1)
				w.str(*mm.InstanceID)
			}
			w.str(mm.ClientID)
			w.str(mm.ClientHost)
			w.uvarint(uint64(max(mm.SessionTimeout.Milliseconds(), 0)))
			w.uvarint(uint64(max(mm.RebalanceTimeout.Milliseconds(), 0)))
			w.uvarint(uint64(len(mm.Protocols)))
			for _, p := range mm.Protocols {
				w.str(p.Name)
				w.bytes(p.Metadata)
			}
			w.bytes(mm.Assignment)
		}
	}
	type topicKey struct{ name, id string }
	index := map[topicKey]uint64{}
	var topics []topicKey
	addTopic := func(o *Offset) {
		k := topicKey{o.Topic, o.TopicID}
		if _, ok := index[k]; !ok {
			index[k] = uint64(len(topics))
			topics = append(topics, k)
		}
	}
	for i := range rec.Offsets {
		addTopic(&rec.Offsets[i])
	}
	for i := range rec.Txn {
		addTopic(&rec.Txn[i].Offset)
	}
	w.uvarint(uint64(len(topics)))
	for _, k := range topics {
		w.str(k.name)
		w.str(k.id)
	}
	common := func(o *Offset) {
		w.uvarint(index[topicKey{o.Topic, o.TopicID}])
		w.varint(int64(o.Partition))
		w.varint(o.Offset)
		w.varint(int64(o.LeaderEpoch))
		w.str(o.Metadata)
		w.varint(unixMs(o.CommitTime))
	}
	w.uvarint(uint64(len(rec.Offsets)))
	for i := range rec.Offsets {
		common(&rec.Offsets[i])
		w.bool1(rec.Offsets[i].Delete)
	}
	if len(rec.Txn) > 0 {
		w.uvarint(uint64(len(rec.Txn)))
		for i := range rec.Txn {
			x := &rec.Txn[i]
			common(&x.Offset)
			w.varint(x.ProducerID)
			w.varint(int64(x.ProducerEpoch))
			w.bool1(x.Stale)
		}
	}
	if len(rec.TxnEnds) > 0 {
		w.uvarint(uint64(len(rec.TxnEnds)))
		for _, e := range rec.TxnEnds {
			w.varint(e.ProducerID)
			w.bool1(e.Commit)
		}
	}
	if rec.Consumer != nil {
		encodeConsumer(w, rec.Consumer)
	}
	return w.b
}

var errShort = errors.New("truncated")

type binReader struct {
	b   []byte
	err error
}

func (r *binReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int32v reads a varint that must fit an int32.
func (r *binReader) int32v() int32 {
	v := r.varint()
	if int64(int32(v)) != v {
		r.fail(fmt.Errorf("value %d out of range", v))
		return 0
	}
	return int32(v)
}

func (r *binReader) byte1() byte {
	if len(r.b) < 1 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bool1 reads a byte that must be 0 or 1 (what names it, in the error).
func (r *binReader) bool1(what string) bool {
	switch r.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail(fmt.Errorf("bad %s flag", what))
	return false
}

func (r *binReader) raw(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *binReader) str() string { return string(r.raw(r.uvarint())) }

func (r *binReader) bytes() []byte {
	n := r.uvarint()
	if n == 0 {
		return nil
	}
	return append([]byte{}, r.raw(n-1)...)
}

// count reads a count of items each at least min bytes long, refusing one the rest of
// the value cannot hold (so a forged count allocates nothing).
func (r *binReader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.fail(fmt.Errorf("count %d exceeds the record", n))
		return 0
	}
	return int(n)
}

func ms2d(v uint64) time.Duration {
	if v > uint64(1<<62)/uint64(time.Millisecond) {
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

func decodeBinary(b []byte) (Record, error) {
	r := &binReader{b: b[len(binMagic):]}
	var rec Record
	flags := r.byte1()
	if flags&^flagsKnown != 0 {
		return Record{}, fmt.Errorf("%w: unknown flags %#x", ErrRecord, flags)
	}
	rec.Full, rec.Deleted = flags&flagFull != 0, flags&flagDeleted != 0
	if flags&flagMeta != 0 {
		m := &Meta{}
		m.Generation = r.int32v()
		m.ProtocolType, m.Protocol, m.Leader = r.str(), r.str(), r.str()
		m.Time = fromMs(r.varint())
		n := r.count(8)
		m.Members = make([]MemberMeta, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			var mm MemberMeta
			mm.ID = r.str()
			if r.byte1() != 0 {
				s := r.str()
				mm.InstanceID = &s
			}
			mm.ClientID, mm.ClientHost = r.str(), r.str()
			mm.SessionTimeout, mm.RebalanceTimeout = ms2d(r.uvarint()), ms2d(r.uvarint())
			np := r.count(2)
			for j := 0; j < np && r.err == nil; j++ {
				mm.Protocols = append(mm.Protocols, ProtocolMeta{Name: r.str(), Metadata: r.bytes()})
			}
			mm.Assignment = r.bytes()
			m.Members = append(m.Members, mm)
		}
		if len(m.Members) == 0 {
			m.Members = nil
		}
		rec.Meta = m
	}
	type topic struct{ name, id string }
	nt := r.count(2)
	topics := make([]topic, 0, nt)
	for i := 0; i < nt && r.err == nil; i++ {
		topics = append(topics, topic{r.str(), r.str()})
	}
	common := func() Offset {
		ti := r.uvarint()
		if r.err == nil && ti >= uint64(len(topics)) {
			r.fail(fmt.Errorf("topic index %d of %d", ti, len(topics)))
			return Offset{}
		}
		o := Offset{Partition: r.int32v(), Offset: r.varint(), LeaderEpoch: r.int32v(), Metadata: r.str(), CommitTime: fromMs(r.varint())}
		if r.err == nil {
			o.Topic, o.TopicID = topics[ti].name, topics[ti].id
		}
		return o
	}
	no := r.count(7)
	if no > 0 {
		rec.Offsets = make([]Offset, 0, no)
	}
	for i := 0; i < no && r.err == nil; i++ {
		o := common()
		o.Delete = r.bool1("delete")
		if r.err == nil {
			rec.Offsets = append(rec.Offsets, o)
		}
	}
	if flags&flagTxn != 0 {
		n := r.count(9)
		if n > 0 {
			rec.Txn = make([]TxnOffset, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			x := TxnOffset{Offset: common(), ProducerID: r.varint()}
			epoch := r.int32v()
			if int32(int16(epoch)) != epoch {
				r.fail(fmt.Errorf("producer epoch %d out of range", epoch))
			}
			x.ProducerEpoch = int16(epoch)
			x.Stale = r.bool1("stale")
			if r.err == nil {
				rec.Txn = append(rec.Txn, x)
			}
		}
	}
	if flags&flagTxnEnds != 0 {
		n := r.count(2)
		if n > 0 {
			rec.TxnEnds = make([]TxnEnd, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			e := TxnEnd{ProducerID: r.varint(), Commit: r.bool1("commit")}
			if r.err == nil {
				rec.TxnEnds = append(rec.TxnEnds, e)
			}
		}
	}
	if flags&flagConsumer != 0 {
		rec.Consumer = decodeConsumer(r)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d bytes after the record", len(r.b)))
	}
	if r.err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, r.err)
	}
	return rec, nil
}
