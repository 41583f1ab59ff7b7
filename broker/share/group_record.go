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
//	          uvarint(n) str(topic)*n uvarint(k) (bytes(topic ID) uvarint(m) varint(p)*m)*k
//	str, bytes as internal/bincodec writes them (a topic ID's bytes are 16)
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

	"github.com/weir-io/weir/internal/bincodec"
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
// data partition's leader epoch, or the coordinator's __consumer_offsets leader epoch),
// or a group config record's version (config_store.go).
func RecordEpoch(v []byte) (int32, bool) {
	if len(v) < 5 || (v[0] != snapshotV1 && v[0] != snapshotVersion && v[0] != groupRecordVersion && v[0] != groupDeletedVersion && v[0] != configRecordVersion && v[0] != groupIndexVersion) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(v[1:])), true
}

// encodeGroup returns g's durable form, written by the coordinator of epoch coordEpoch.
func encodeGroup(g *Group, coordEpoch int32) []byte {
	w := &bincodec.Writer{B: binary.BigEndian.AppendUint32([]byte{groupRecordVersion}, uint32(coordEpoch))}
	w.Varint(int64(g.Epoch))
	w.Varint(int64(g.AssignEpoch))
	w.Str(g.topicsPrint)
	w.Uvarint(uint64(len(g.Topics)))
	for _, t := range g.Topics {
		w.Str(t)
	}
	ids := make([]string, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		m := g.Members[id]
		w.Str(m.ID)
		w.Str(m.ClientID)
		w.Str(m.ClientHost)
		w.Str(m.Rack)
		w.Varint(int64(m.Epoch))
		w.Uvarint(uint64(len(m.Subscribed)))
		for _, t := range m.Subscribed {
			w.Str(t)
		}
		tids := make([][16]byte, 0, len(m.Assignment))
		for tid := range m.Assignment {
			tids = append(tids, tid)
		}
		sort.Slice(tids, func(i, j int) bool { return bytes.Compare(tids[i][:], tids[j][:]) < 0 })
		w.Uvarint(uint64(len(tids)))
		for _, tid := range tids {
			w.Bytes(tid[:])
			ps := m.Assignment[tid]
			w.Uvarint(uint64(len(ps)))
			for _, p := range ps {
				w.Varint(int64(p))
			}
		}
	}
	return w.B
}

// decodeGroup parses a group record; every member is taken as seen at now (it has a
// whole session timeout from the load to heartbeat).
func decodeGroup(id string, v []byte, now time.Time) (*Group, error) {
	if len(v) < 5 || v[0] != groupRecordVersion {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadGroupRecord, len(v))
	}
	r := bincodec.NewReader(v[5:])
	g := &Group{ID: id, Members: map[string]*Member{}}
	g.Epoch, g.AssignEpoch = r.Int32(), r.Int32()
	g.topicsPrint = r.Str()
	nt := r.Count(1)
	for i := 0; i < nt && r.Err() == nil; i++ {
		g.Topics = append(g.Topics, r.Str())
	}
	n := r.Count(6)
	for i := 0; i < n && r.Err() == nil; i++ {
		m := &Member{ID: r.Str(), ClientID: r.Str(), ClientHost: r.Str(), Rack: r.Str(), lastSeen: now}
		m.Epoch = r.Int32()
		nt := r.Count(1)
		for j := 0; j < nt && r.Err() == nil; j++ {
			m.Subscribed = append(m.Subscribed, r.Str())
		}
		na := r.Count(18)
		for j := 0; j < na && r.Err() == nil; j++ {
			tid := r.Bytes()
			if len(tid) != 16 {
				r.Fail(fmt.Errorf("topic ID of %d bytes", len(tid)))
				break
			}
			np := r.Count(1)
			ps := make([]int32, 0, np)
			for k := 0; k < np && r.Err() == nil; k++ {
				ps = append(ps, r.Int32())
			}
			if m.Assignment == nil {
				m.Assignment = map[[16]byte][]int32{}
			}
			m.Assignment[[16]byte(tid)] = ps
		}
		g.Members[m.ID] = m
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadGroupRecord, err)
	}
	return g, nil
}
