package share

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadSnapshot: a persisted share-partition state that cannot be decoded.
var ErrBadSnapshot = errors.New("share: malformed share-partition state")

// StateBatch is a run of offsets with one state and delivery count, as persisted.
type StateBatch struct {
	First, Last int64
	State       State
	Deliveries  int16
}

// Snapshot is a share partition's durable state: what Kafka's share coordinator keeps
// per (group, topic, partition). Acquired records are written Available (a lock does not
// outlive its leader) with their delivery count. An acquisition alone writes nothing, as
// in Kafka: the counts of records acquired since the last write are lost with a leader,
// so such a record may be delivered once more than its count says.
type Snapshot struct {
	// LeaderEpoch is the data partition's leader epoch of the writer: the store refuses
	// writes of an older epoch than it has seen (a leader that lost the partition).
	LeaderEpoch int32
	// StateEpoch moves when an admin request resets the state (AlterShareGroupOffsets,
	// DeleteShareGroupOffsets, DeleteGroups; Kafka's state epoch): the store refuses a
	// leader's write of another state epoch than its own, so a leader that loaded the
	// state before the reset loads it again rather than overwriting it.
	StateEpoch int32
	// Start is the share-partition start offset; -1: not initialized (deleted), a leader
	// starts it as if no state had been written.
	Start   int64
	Batches []StateBatch
}

// Snapshot returns p's durable state.
func (p *Partition) Snapshot(leaderEpoch int32) Snapshot {
	s := Snapshot{LeaderEpoch: leaderEpoch, Start: p.start}
	for i, r := range p.inflight {
		st := r.state
		if st == Acquired {
			st = Available
		}
		if st == Available && r.deliveries == 0 {
			continue // as if never fetched
		}
		off := p.start + int64(i)
		if k := len(s.Batches) - 1; k >= 0 && s.Batches[k].Last == off-1 && s.Batches[k].State == st && s.Batches[k].Deliveries == r.deliveries {
			s.Batches[k].Last = off
			continue
		}
		s.Batches = append(s.Batches, StateBatch{First: off, Last: off, State: st, Deliveries: r.deliveries})
	}
	return s
}

// Restore returns the share partition a snapshot describes.
func Restore(s Snapshot, lim Limits) *Partition {
	p := NewPartition(s.Start, lim)
	for _, b := range s.Batches {
		for off := max(b.First, s.Start); off <= b.Last; off++ {
			i := off - p.start
			for int64(len(p.inflight)) <= i {
				p.inflight = append(p.inflight, rec{state: Available})
			}
			p.inflight[i] = rec{state: b.State, deliveries: b.Deliveries}
		}
	}
	p.advance()
	return p
}

// snapshotVersion is the first byte of an encoded snapshot.
//
//	v1: version 1 | leader epoch int32 | start int64 | batches uint32 |
//	    batches × (first int64 | last int64 | state int8 | deliveries int16)
//	v2: version 2 | leader epoch int32 | state epoch int32 | start int64 | batches uint32 |
//	    batches as v1
//
// v2 is written; v1 is read with state epoch 0.
const (
	snapshotV1      = 1
	snapshotVersion = 2
)

// Encode appends the snapshot's binary form to b.
func (s Snapshot) Encode(b []byte) []byte {
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(s.LeaderEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.StateEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Start))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Batches)))
	for _, x := range s.Batches {
		b = binary.BigEndian.AppendUint64(b, uint64(x.First))
		b = binary.BigEndian.AppendUint64(b, uint64(x.Last))
		b = append(b, byte(x.State))
		b = binary.BigEndian.AppendUint16(b, uint16(x.Deliveries))
	}
	return b
}

// DecodeSnapshot parses an encoded snapshot.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	head := 17
	if len(b) > 0 && b[0] == snapshotVersion {
		head = 21
	}
	if len(b) < head || (b[0] != snapshotVersion && b[0] != snapshotV1) {
		return s, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	s.LeaderEpoch = int32(binary.BigEndian.Uint32(b[1:]))
	if b[0] == snapshotVersion {
		s.StateEpoch = int32(binary.BigEndian.Uint32(b[5:]))
		b = b[4:]
	}
	s.Start = int64(binary.BigEndian.Uint64(b[5:]))
	n := int(binary.BigEndian.Uint32(b[13:]))
	b = b[17:]
	if n < 0 || len(b) != n*19 || s.Start < -1 {
		return Snapshot{}, fmt.Errorf("%w: %d batches in %d bytes", ErrBadSnapshot, n, len(b))
	}
	s.Batches = make([]StateBatch, n)
	for i := range s.Batches {
		x := &s.Batches[i]
		x.First = int64(binary.BigEndian.Uint64(b))
		x.Last = int64(binary.BigEndian.Uint64(b[8:]))
		x.State = State(b[16])
		x.Deliveries = int16(binary.BigEndian.Uint16(b[17:]))
		if x.Last < x.First || (x.State != Available && x.State != Acknowledged && x.State != Archived) {
			return Snapshot{}, fmt.Errorf("%w: batch %d-%d state %d", ErrBadSnapshot, x.First, x.Last, x.State)
		}
		b = b[19:]
	}
	return s, nil
}
