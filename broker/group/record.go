package group

// record.go is what the coordinator makes durable and replays: the Record of one write,
// its encoding, and the membership it carries (Meta).
//
// A group's state in the log is the replay of its records in log order:
//
//	Offsets  set (or, with Delete, remove) committed offsets, later entries winning;
//	Meta     replaces the group's membership: generation, protocol, leader, members
//	         with their protocols and assignments (written when a generation's
//	         assignment is complete, when the group becomes Empty, and when a static
//	         member is replaced without a rebalance);
//	Full     the record is the group's whole state (Meta and every offset): what came
//	         before it no longer matters. Compaction writes one per group and then
//	         raises the partition's log start past everything older;
//	Deleted  the group is gone (DeleteGroups, or every offset of an empty group expired);
//	Txn      offsets committed in a transaction, pending until it ends (txn_offsets.go);
//	TxnEnds  transactions ended: their pending offsets committed or dropped;
//	Consumer a consumer group's (KIP-848) whole membership state, replacing Meta.
//
// Within one record they apply in that order: Full (or Deleted) first, then Meta,
// Offsets, Txn, TxnEnds. The write queue only merges writes into one record in that order
// (write.class), so the replay of a record is the order its writes were applied in memory.
//
// Encoding (the value of a __consumer_offsets record whose key is the group name):
//
//	'['...             legacy: a JSON array of Offset (before group metadata was kept)
//	'{"v":1,...}'      JSON of Record with v = 1
//	0x00 'W' 'G' 0x02  binary, version 2 (recordbin.go): what EncodeRecord writes
//
// Decoding accepts all three; an unknown version is an error (the reader is older than
// the writer), never silently taken for something else.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Record is one durable change to a group (see the file comment for the replay rules).
type Record struct {
	Offsets []Offset    `json:"offsets,omitempty"`
	Meta    *Meta       `json:"meta,omitempty"`
	Full    bool        `json:"full,omitempty"`
	Deleted bool        `json:"deleted,omitempty"`
	Txn     []TxnOffset `json:"txn,omitempty"`
	TxnEnds []TxnEnd    `json:"txn_ends,omitempty"`
	// Consumer is a KIP-848 consumer group's whole state (consumer_record.go); like
	// Meta it replaces the membership earlier records gave (a classic Meta included).
	Consumer *ConsumerMeta `json:"consumer,omitempty"`
}

// Meta is a group's membership as of one generation.
type Meta struct {
	Generation   int32        `json:"generation"`
	ProtocolType string       `json:"protocol_type,omitempty"`
	Protocol     string       `json:"protocol,omitempty"`
	Leader       string       `json:"leader,omitempty"`
	Members      []MemberMeta `json:"members,omitempty"`
	// Time is when the record was written: for a group with no members, when it became
	// Empty, from which its offsets expire (Kafka's currentStateTimestamp).
	Time time.Time `json:"time"`
}

// MemberMeta is one member of a Meta.
type MemberMeta struct {
	ID               string         `json:"id"`
	InstanceID       *string        `json:"instance_id,omitempty"`
	ClientID         string         `json:"client_id,omitempty"`
	ClientHost       string         `json:"client_host,omitempty"`
	SessionTimeout   time.Duration  `json:"session_timeout"`
	RebalanceTimeout time.Duration  `json:"rebalance_timeout"`
	Protocols        []ProtocolMeta `json:"protocols,omitempty"`
	Assignment       []byte         `json:"assignment,omitempty"`
}

// ProtocolMeta is one protocol a member supports, with its metadata.
type ProtocolMeta struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata,omitempty"`
}

// recordVersion is the version of the JSON form (still read).
const recordVersion = 1

// ErrRecord: a stored group record could not be decoded.
var ErrRecord = errors.New("group: undecodable group record")

type versioned struct {
	V int `json:"v"`
	Record
}

// EncodeRecord is the stored form of rec (binary, version 2).
func EncodeRecord(rec Record) ([]byte, error) {
	return encodeBinary(rec), nil
}

// DecodeRecord reads a stored record, JSON (version 1) and legacy offset arrays included.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > 0 && b[0] == 0 {
		if len(b) < len(binMagic) || [4]byte(b[:4]) != binMagic {
			return Record{}, fmt.Errorf("%w: unknown binary header % x", ErrRecord, b[:min(len(b), 4)])
		}
		return decodeBinary(b)
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	if len(b) > 0 && b[0] == '[' {
		var offs []Offset
		if err := json.Unmarshal(b, &offs); err != nil {
			return Record{}, fmt.Errorf("%w: %w", ErrRecord, err)
		}
		return Record{Offsets: offs}, nil
	}
	var v versioned
	if err := json.Unmarshal(b, &v); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if v.V != recordVersion {
		return Record{}, fmt.Errorf("%w: version %d (this broker reads %d)", ErrRecord, v.V, recordVersion)
	}
	return v.Record, nil
}

// loadState is one group's state while Load replays records.
type loadState struct {
	meta     *Meta
	consumer *ConsumerMeta
	offsets  map[string]map[int32]Offset
	txn      txnOffsets
}

// apply replays rec onto s.
func (s *loadState) apply(rec Record) {
	if rec.Deleted {
		s.meta, s.consumer, s.offsets, s.txn = nil, nil, nil, txnOffsets{}
		return
	}
	if rec.Full {
		s.meta, s.consumer, s.offsets, s.txn = nil, nil, nil, txnOffsets{}
	}
	if rec.Meta != nil {
		s.meta, s.consumer = rec.Meta, nil
	}
	if rec.Consumer != nil {
		s.meta, s.consumer = nil, rec.Consumer
	}
	for _, o := range rec.Offsets {
		if o.Delete {
			s.txn.drop(o.Topic, o.Partition)
			if ps := s.offsets[o.Topic]; ps != nil {
				delete(ps, o.Partition)
				if len(ps) == 0 {
					delete(s.offsets, o.Topic)
				}
			}
			continue
		}
		s.txn.supersede(o.Topic, o.Partition)
		s.set(o)
	}
	for _, x := range rec.Txn {
		s.txn.add(x)
	}
	for _, e := range rec.TxnEnds {
		s.txn.end(e, s.set)
	}
}

// set makes o the committed offset of its partition.
func (s *loadState) set(o Offset) {
	if s.offsets == nil {
		s.offsets = map[string]map[int32]Offset{}
	}
	ps := s.offsets[o.Topic]
	if ps == nil {
		ps = map[int32]Offset{}
		s.offsets[o.Topic] = ps
	}
	ps[o.Partition] = o
}

// empty reports whether the replay left nothing of the group.
func (s *loadState) empty() bool {
	return len(s.offsets) == 0 && s.txn.empty() && (s.meta == nil || len(s.meta.Members) == 0) &&
		(s.consumer == nil || len(s.consumer.Members) == 0)
}

// metaOf is the group's current membership as a Meta, with assignments taken from
// assign when it is not nil (a SyncGroup's, before they are applied) and from the
// members otherwise. Called with g locked.
func (g *group) metaOf(assign map[string][]byte, now time.Time) *Meta {
	m := &Meta{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader, Time: now}
	for _, mm := range g.sortedMembers() {
		mem := MemberMeta{
			ID:               mm.id,
			InstanceID:       mm.instanceID,
			ClientID:         mm.clientID,
			ClientHost:       mm.clientHost,
			SessionTimeout:   mm.sessionTimeout,
			RebalanceTimeout: mm.rebalanceTimeout,
			Assignment:       mm.assignment,
		}
		if assign != nil {
			mem.Assignment = assign[mm.id]
		}
		for _, p := range mm.protocols {
			mem.Protocols = append(mem.Protocols, ProtocolMeta{Name: p.name, Metadata: p.metadata})
		}
		m.Members = append(m.Members, mem)
	}
	if len(m.Members) == 0 {
		m.Leader, m.Protocol = "", ""
	}
	return m
}
