package partlog

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// Read replicas (KIP-392, zone routing). A broker in the consumer's zone serves a
// partition led in another zone by following the leader's index: the leader sends the
// entries of its synced batches (FollowEntry: offsets, where the bytes are, their CRC)
// and its high watermark; the replica reads the bytes itself from the shared file system
// (the leader's WAL, a proxy's WAL, or objects through its own manifest). Only entries
// cross zones, never record bytes. A replica's partition is in state Following: it
// serves reads up to the leader's high watermark as last received, never past it, and is
// never appended to. Its index starts where its own view of the manifest ends, so it
// holds no gap: until the entries reach back that far it stays Loading.

// Following is the state of a read replica's partition (created by New, Loading until
// its first Follow).
const Following State = Gone + 1

// ErrFollowGap: the leader's index no longer reaches back to where the replica's view of
// the manifest ends (the leader uploaded and dropped those entries; the replica's
// metadata will show the objects shortly). The replica is answered OFFSET_OUT_OF_RANGE.
var ErrFollowGap = kcode.New("partlog: the leader's index does not reach the replica's manifest", kcode.OffsetOutOfRange)

// FollowEntry is one synced batch of a leader's index.
type FollowEntry struct {
	Base      int64
	LastDelta int32
	Epoch     int32
	MaxTS     int64
	Size      int32
	From      SourceID // the WAL directory holding the bytes
	Pos       wal.Pos
	CRC       uint32
}

// FollowEntryLen is the encoded size of a FollowEntry.
const FollowEntryLen = 8 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 4

// AppendFollowEntry appends the encoding of e.
func AppendFollowEntry(b []byte, e *FollowEntry) []byte {
	be := binary.BigEndian
	b = be.AppendUint64(b, uint64(e.Base))
	b = be.AppendUint32(b, uint32(e.LastDelta))
	b = be.AppendUint32(b, uint32(e.Epoch))
	b = be.AppendUint64(b, uint64(e.MaxTS))
	b = be.AppendUint32(b, uint32(e.Size))
	b = be.AppendUint32(b, uint32(e.From.Broker))
	b = be.AppendUint64(b, uint64(e.From.Epoch))
	b = be.AppendUint64(b, uint64(e.Pos))
	b = be.AppendUint32(b, e.CRC)
	return b
}

// DecodeFollowEntry reads one entry from the start of p.
func DecodeFollowEntry(p []byte) (FollowEntry, error) {
	if len(p) < FollowEntryLen {
		return FollowEntry{}, fmt.Errorf("partlog: follow entry of %d bytes", len(p))
	}
	be := binary.BigEndian
	e := FollowEntry{Base: int64(be.Uint64(p)), LastDelta: int32(be.Uint32(p[8:])), Epoch: int32(be.Uint32(p[12:])), MaxTS: int64(be.Uint64(p[16:])),
		Size: int32(be.Uint32(p[24:])), From: SourceID{int32(be.Uint32(p[28:])), int64(be.Uint64(p[32:]))}, Pos: wal.Pos(be.Uint64(p[40:])), CRC: be.Uint32(p[48:])}
	if e.Base < 0 || e.LastDelta < 0 || e.Size < 61 || e.Pos < 0 {
		return e, fmt.Errorf("partlog: follow entry at %d of %d bytes is invalid", e.Base, e.Size)
	}
	return e, nil
}

// EpochStart is where a leader epoch began.
type EpochStart struct {
	Epoch int32
	Start int64
}

// FollowState is the rest of a leader's answer for one partition.
type FollowState struct {
	LeaderEpoch int32
	HW          int64
	LogStart    int64
	Epochs      []EpochStart
	// LSO is the last stable offset a replica may serve read_committed consumers up
	// to (-1: the high watermark; a leader that knows no transactions), and Aborted the
	// aborted transactions whose markers lie from the offset asked for up to HW. When
	// there are more than MaxFollowAborted of those, the rest are left out and LSO is
	// lowered to the first offset of each left out, so a replica never serves data of
	// an aborted transaction it was not told of.
	LSO     int64
	Aborted []metadata.AbortedTxn
}

// MaxFollowAborted bounds the aborted transactions of one partition in a leader's
// answer.
const MaxFollowAborted = 1000

// Entries (leader side) returns up to max synced entries below the high watermark from
// the one holding offset from on, and the partition's state. ErrFollowGap: from is below
// the first entry the index holds (object storage has it; the follower's manifest is
// behind); ErrNotLeader: not serving.
func (p *Partition) Entries(from int64, max int) ([]FollowEntry, FollowState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := FollowState{LeaderEpoch: p.leaderEpoch, HW: p.hw, LogStart: p.logStart, LSO: p.lsoLocked()}
	for _, e := range p.epochs {
		st.Epochs = append(st.Epochs, EpochStart{e.epoch, e.start})
	}
	// Markers below the high watermark only: an unsynced one may still be rolled back.
	for i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last >= from }); i < len(p.aborted) && p.aborted[i].Last < p.hw; i++ {
		if a := p.aborted[i]; len(st.Aborted) < MaxFollowAborted {
			st.Aborted = append(st.Aborted, a)
		} else {
			st.LSO = min(st.LSO, a.First)
		}
	}
	if p.state != Ready && p.state != Closing {
		return nil, st, ErrNotLeader
	}
	if from >= p.hw {
		return nil, st, nil
	}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= from })
	if i == len(p.batches) || p.batches[i].base > from {
		return nil, st, fmt.Errorf("%w: %d (the index starts at %d)", ErrFollowGap, from, p.firstIndexedLocked())
	}
	var out []FollowEntry
	for ; i < len(p.batches) && len(out) < max; i++ {
		b := p.batches[i]
		if !b.synced || b.base >= p.hw {
			break
		}
		out = append(out, FollowEntry{Base: b.base, LastDelta: int32(b.last - b.base), Epoch: b.epoch, MaxTS: b.maxTS, Size: b.size, From: b.from, Pos: b.pos, CRC: b.crc})
	}
	return out, st, nil
}

func (p *Partition) firstIndexedLocked() int64 {
	if len(p.batches) == 0 {
		return p.hw
	}
	return p.batches[0].base
}

// FollowFrom is the offset a replica asks its leader for next: its end once following,
// else where its view of object storage ends.
func (p *Partition) FollowFrom() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Following {
		return p.next
	}
	return max(p.logStart, p.tier.uploaded)
}

// Follow (replica side) applies a leader's answer: entries from FollowFrom on (the first
// one may start below it), read through reader(from) — which must check each batch's
// CRC, see NewEntryReader —, and the leader's state. It reports whether the high
// watermark advanced (waiters are woken). An answer that does not continue the index
// exactly resets the replica to Loading (it asks again from its manifest).
func (p *Partition) Follow(es []FollowEntry, st FollowState, reader func(SourceID) Reader) (advanced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Gone {
		return false
	}
	if st.LeaderEpoch > p.leaderEpoch {
		p.leaderEpoch = st.LeaderEpoch
	}
	p.setLogStartLocked(st.LogStart)
	for _, a := range st.Aborted {
		p.putAbortedLocked(a)
	}
	p.followLSO = st.LSO
	woke := false
	if p.state == Loading {
		start := max(p.logStart, p.tier.uploaded)
		switch {
		case len(es) > 0 && es[0].Base > start:
			return false // a gap: wait for the manifest
		case len(es) == 0 && st.HW > start:
			return false
		}
		p.batches, p.next, p.hw = nil, start, start
		for len(es) > 0 && es[0].Base+int64(es[0].LastDelta) < start {
			es = es[1:]
		}
		if len(es) > 0 {
			p.next, p.hw = es[0].Base, es[0].Base
		}
		p.state, woke = Following, true
	}
	if len(es) > 0 && es[0].Base != p.next {
		p.state, p.batches = Loading, nil // does not continue: start over
		return false
	}
	now := time.Now().UnixNano()
	for i := range es {
		e := &es[i]
		loc := &batchLoc{base: e.Base, last: e.Base + int64(e.LastDelta), epoch: e.Epoch, maxTS: e.MaxTS, size: e.Size, pos: e.Pos,
			synced: true, pid: -1, at: now, from: e.From, crc: e.CRC,
			src: &linkReader{in: reader(e.From), base: e.Base, epoch: e.Epoch, crc: e.CRC, lastDelta: e.LastDelta}}
		p.batches = append(p.batches, loc)
		p.next = loc.last + 1
	}
	p.epochs = p.epochs[:0]
	for _, e := range st.Epochs {
		p.epochs = append(p.epochs, epochStart{e.Epoch, e.Start})
	}
	hw := min(st.HW, p.next)
	if hw > p.hw {
		p.hw, advanced = hw, true
	}
	if advanced || woke {
		w := p.waiters
		p.waiters = nil
		wake(w)
	}
	return advanced
}

// Unfollow marks a replica's partition Gone (its readers get NOT_LEADER) and wakes its
// waiters.
func (p *Partition) Unfollow() {
	p.mu.Lock()
	p.state = Gone
	w := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	wake(w)
}
