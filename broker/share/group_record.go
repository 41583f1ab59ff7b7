package share

// group_record.go is the durable form of a share group's membership (what Kafka's group
// coordinator keeps of a share group in its ShareGroupMetadata, member and assignment
// records): the broker stores it in __share_group_state next to the share-partition
// states, so the coordinator that takes the group's __consumer_offsets partition over
// keeps every member and epoch (no member is told UNKNOWN_MEMBER_ID).
//
//	v1: byte(0x81) | coordinator epoch uint32 | varint(group epoch) | varint(assignment
//	    epoch) | str(topics fingerprint) | uvarint(t) str(topic ever subscribed)*t |
//	    uvarint(n) | member*n
//	member := str(id) str(client id) str(client host) str(rack) varint(epoch)
//	          uvarint(n) str(topic)*n uvarint(k) (topic ID [16] uvarint(m) varint(p)*m)*k
//	str    := uvarint(length) bytes
//
//	deleted: byte(0x82) | coordinator epoch uint32 (DeleteGroups; loaded as no group)
//
// The first byte differs from a snapshot's (snapshot.go, 1 or 2), and both carry the
// writer's epoch in bytes 1-4 (RecordEpoch), so the store can fence either without
// knowing which it holds. Members and topics are written in sorted order: the same
// membership always encodes to the same bytes, which is how a change is detected.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

// ErrBadGroupRecord: a persisted share group membership that cannot be decoded.
var ErrBadGroupRecord = errors.New("share: malformed share group record")

// ErrGroupStore marks the errors of a GroupStore (the broker wraps its own with it).
var ErrGroupStore = errors.New("share: share group store")

const (
	groupRecordVersion  = 0x81
	groupDeletedVersion = 0x82 // byte(0x82) | coordinator epoch uint32: the group was deleted
)

// RecordEpoch returns the writer's epoch of a stored share state or group record (the
// data partition's leader epoch, or the coordinator's __consumer_offsets leader epoch).
func RecordEpoch(v []byte) (int32, bool) {
	if len(v) < 5 || (v[0] != snapshotV1 && v[0] != snapshotVersion && v[0] != groupRecordVersion && v[0] != groupDeletedVersion) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(v[1:])), true
}

// encodeGroup returns g's durable form, written by the coordinator of epoch coordEpoch.
func encodeGroup(g *Group, coordEpoch int32) []byte {
	b := []byte{groupRecordVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(coordEpoch))
	b = binary.AppendVarint(b, int64(g.Epoch))
	b = binary.AppendVarint(b, int64(g.AssignEpoch))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(g.topicsPrint)
	b = binary.AppendUvarint(b, uint64(len(g.Topics)))
	for _, t := range g.Topics {
		str(t)
	}
	ids := make([]string, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		m := g.Members[id]
		str(m.ID)
		str(m.ClientID)
		str(m.ClientHost)
		str(m.Rack)
		b = binary.AppendVarint(b, int64(m.Epoch))
		b = binary.AppendUvarint(b, uint64(len(m.Subscribed)))
		for _, t := range m.Subscribed {
			str(t)
		}
		tids := make([][16]byte, 0, len(m.Assignment))
		for tid := range m.Assignment {
			tids = append(tids, tid)
		}
		sort.Slice(tids, func(i, j int) bool { return bytes.Compare(tids[i][:], tids[j][:]) < 0 })
		b = binary.AppendUvarint(b, uint64(len(tids)))
		for _, tid := range tids {
			b = append(b, tid[:]...)
			ps := m.Assignment[tid]
			b = binary.AppendUvarint(b, uint64(len(ps)))
			for _, p := range ps {
				b = binary.AppendVarint(b, int64(p))
			}
		}
	}
	return b
}

// groupReader reads a group record, remembering the first error.
type groupReader struct {
	b   []byte
	err error
}

func (r *groupReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", ErrBadGroupRecord, what)
	}
	r.b = nil
}

func (r *groupReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *groupReader) int32v(what string) int32 {
	v, n := binary.Varint(r.b)
	if n <= 0 || v != int64(int32(v)) {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return int32(v)
}

// count reads a count of items each at least min bytes long.
func (r *groupReader) count(what string, min int) int {
	n := r.uvarint(what)
	if n > uint64(len(r.b)/min) {
		r.fail(what)
		return 0
	}
	return int(n)
}

func (r *groupReader) str(what string) string {
	n := r.uvarint(what)
	if n > uint64(len(r.b)) {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// decodeGroup parses a group record; every member is taken as seen at now (it has a
// whole session timeout from the load to heartbeat).
func decodeGroup(id string, v []byte, now time.Time) (*Group, error) {
	if len(v) < 5 || v[0] != groupRecordVersion {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadGroupRecord, len(v))
	}
	r := &groupReader{b: v[5:]}
	g := &Group{ID: id, Members: map[string]*Member{}}
	g.Epoch, g.AssignEpoch = r.int32v("group epoch"), r.int32v("assignment epoch")
	g.topicsPrint = r.str("fingerprint")
	nt := r.count("topics", 1)
	for i := 0; i < nt && r.err == nil; i++ {
		g.Topics = append(g.Topics, r.str("topic"))
	}
	n := r.count("members", 6)
	for i := 0; i < n && r.err == nil; i++ {
		m := &Member{ID: r.str("member"), ClientID: r.str("client id"), ClientHost: r.str("client host"), Rack: r.str("rack"), lastSeen: now}
		m.Epoch = r.int32v("member epoch")
		nt := r.count("topics", 1)
		for j := 0; j < nt && r.err == nil; j++ {
			m.Subscribed = append(m.Subscribed, r.str("topic"))
		}
		na := r.count("assignment", 17)
		for j := 0; j < na && r.err == nil; j++ {
			var tid [16]byte
			if len(r.b) < 16 {
				r.fail("topic id")
				break
			}
			copy(tid[:], r.b)
			r.b = r.b[16:]
			np := r.count("partitions", 1)
			ps := make([]int32, 0, np)
			for k := 0; k < np && r.err == nil; k++ {
				ps = append(ps, r.int32v("partition"))
			}
			if m.Assignment == nil {
				m.Assignment = map[[16]byte][]int32{}
			}
			m.Assignment[tid] = ps
		}
		g.Members[m.ID] = m
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return g, nil
}
