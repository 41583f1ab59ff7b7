package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// Ops: the first byte of a request body.
const (
	// OpLinkV1 (links without a session, answers without a class) is retired: a
	// leader answers it with an empty body, which the old proxy takes as a lost answer.
	OpLinkV1     byte = 1
	OpOffsets    byte = 2
	OpFollow     byte = 3
	OpWake       byte = 4
	OpLink       byte = 7
	OpFenceLinks byte = 8
	OpMoveReady  byte = 9
	// OpFollowTxn is OpFollow whose answer carries each partition's last stable offset
	// and aborted transactions (read_committed on read replicas). A leader that does
	// not know it answers with an empty body; the replica then follows it with
	// OpFollow and serves read_committed up to the high watermark (such a leader has
	// no transactions).
	OpFollowTxn byte = 10
)

// AppendWake encodes an OpWake request: the replica's long poll in flight is answered
// now (its partitions changed). Body: op | replica int32; the answer is empty.
func AppendWake(b []byte, replica int32) []byte {
	b = append(b, OpWake)
	return binary.BigEndian.AppendUint32(b, uint32(replica))
}

// DecodeWake parses an OpWake request.
func DecodeWake(b []byte) (int32, error) {
	if len(b) != 5 || b[0] != OpWake {
		return 0, fmt.Errorf("%w: wake request of %d bytes", ErrMalformed, len(b))
	}
	return int32(binary.BigEndian.Uint32(b[1:])), nil
}

// ErrMalformed: a request or answer body that does not parse.
var ErrMalformed = errors.New("peer: malformed message")

// maxItems bounds the entries of one message (a hostile count must not allocate).
const maxItems = 1 << 16

// LinkRequest is a proxy's batch of links to one leader. Session names the proxy's link
// session (one per link sender, increasing within the proxy's registration epoch): the
// leader refuses links of a session the proxy fenced (FenceRequest).
type LinkRequest struct {
	Proxy      int32
	ProxyEpoch int64
	Session    uint64
	Links      []partlog.Link
}

const linkRequestHdr = 1 + 4 + 8 + 8 + 4

// AppendTo encodes the request body.
func (r *LinkRequest) AppendTo(b []byte) []byte {
	b = append(b, OpLink)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Proxy))
	b = binary.BigEndian.AppendUint64(b, uint64(r.ProxyEpoch))
	b = binary.BigEndian.AppendUint64(b, r.Session)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Links)))
	for i := range r.Links {
		b = partlog.AppendLink(b, &r.Links[i])
	}
	return b
}

// DecodeLinkRequest parses a body that starts with OpLink.
func DecodeLinkRequest(b []byte) (LinkRequest, error) {
	var r LinkRequest
	if len(b) < linkRequestHdr || b[0] != OpLink {
		return r, fmt.Errorf("%w: link request of %d bytes", ErrMalformed, len(b))
	}
	r.Proxy = int32(binary.BigEndian.Uint32(b[1:]))
	r.ProxyEpoch = int64(binary.BigEndian.Uint64(b[5:]))
	r.Session = binary.BigEndian.Uint64(b[13:])
	n := int(binary.BigEndian.Uint32(b[21:]))
	b = b[linkRequestHdr:]
	if n < 0 || n > maxItems || len(b) < n*partlog.LinkLenV1 || len(b) > n*partlog.MaxLinkLen {
		return r, fmt.Errorf("%w: %d links in %d bytes", ErrMalformed, n, len(b))
	}
	r.Links = make([]partlog.Link, n)
	for i := range r.Links {
		l, size, err := partlog.DecodeLink(b)
		if err != nil {
			return r, fmt.Errorf("%w: link %d: %w", ErrMalformed, i, err)
		}
		b = b[size:]
		if l.Proxy != r.Proxy || l.ProxyEpoch != r.ProxyEpoch {
			return r, fmt.Errorf("%w: link of broker %d epoch %d in a request of broker %d epoch %d", ErrMalformed, l.Proxy, l.ProxyEpoch, r.Proxy, r.ProxyEpoch)
		}
		r.Links[i] = l
	}
	if len(b) != 0 {
		return r, fmt.Errorf("%w: %d bytes after %d links", ErrMalformed, len(b), n)
	}
	return r, nil
}

// LinkClass is what a link's answer proves about the link (the proxy keeps or releases
// the batch in its WAL on it, never on a guess).
type LinkClass int8

const (
	// LinkAcked: synced in the leader's log at Base, acked (Code 0).
	LinkAcked LinkClass = 0
	// LinkRefused: refused before it got offsets (or its session was fenced): it is
	// not in the leader's log and never will be.
	LinkRefused LinkClass = 1
	// LinkMaybeLogged: it got offsets from Base and was written, but not acked (the
	// sync failed, the fence check failed, or the lease lapsed): it may be in the log,
	// now or after a failover, so its batch must stay until an upload covers it.
	LinkMaybeLogged LinkClass = 2
)

// LinkResult is the leader's answer to one link.
type LinkResult struct {
	Code     int16
	Class    LinkClass
	Base     int64
	LogStart int64
}

const linkResultLen = 2 + 1 + 8 + 8

// AppendLinkResults encodes a link answer.
func AppendLinkResults(b []byte, rs []LinkResult) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(rs)))
	for _, r := range rs {
		b = binary.BigEndian.AppendUint16(b, uint16(r.Code))
		b = append(b, byte(r.Class))
		b = binary.BigEndian.AppendUint64(b, uint64(r.Base))
		b = binary.BigEndian.AppendUint64(b, uint64(r.LogStart))
	}
	return b
}

// DecodeLinkResults parses a link answer of want results. An answer whose class does
// not agree with its code (acked with an error, an error without a class, offsets
// missing where the class needs them) is malformed.
func DecodeLinkResults(b []byte, want int) ([]LinkResult, error) {
	if len(b) < 4 || int(binary.BigEndian.Uint32(b)) != want || len(b) != 4+want*linkResultLen {
		return nil, fmt.Errorf("%w: link answer of %d bytes for %d links", ErrMalformed, len(b), want)
	}
	rs := make([]LinkResult, want)
	for i := range rs {
		p := b[4+i*linkResultLen:]
		r := LinkResult{Code: int16(binary.BigEndian.Uint16(p)), Class: LinkClass(p[2]), Base: int64(binary.BigEndian.Uint64(p[3:])), LogStart: int64(binary.BigEndian.Uint64(p[11:]))}
		ok := false
		switch r.Class {
		case LinkAcked:
			ok = r.Code == 0 && r.Base >= 0
		case LinkRefused:
			ok = r.Code != 0
		case LinkMaybeLogged:
			ok = r.Code != 0 && r.Base >= 0
		}
		if !ok {
			return nil, fmt.Errorf("%w: link answer %d: code %d, class %d, base %d", ErrMalformed, i, r.Code, r.Class, r.Base)
		}
		rs[i] = r
	}
	return rs, nil
}

// FenceRequest asks a leader to fence the link sessions of broker Proxy below
// (Epoch, Session): every session of an earlier registration epoch, and of Epoch those
// numbered below Session. The leader refuses their links from then on, and answers, for
// each partition it leads, its log end (next offset, Offsets.HW) as it was when no link
// of those sessions could be prepared any more: every link of them that is or will ever
// be in its log is below it.
type FenceRequest struct {
	Proxy   int32
	Epoch   int64
	Session uint64
	Parts   []PartitionRef
}

const fenceRequestHdr = 1 + 4 + 8 + 8

// AppendTo encodes the request body (the answer is an OpOffsets answer).
func (r *FenceRequest) AppendTo(b []byte) []byte {
	b = append(b, OpFenceLinks)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Proxy))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Epoch))
	b = binary.BigEndian.AppendUint64(b, r.Session)
	return appendRefs(b, r.Parts)
}

// DecodeFenceRequest parses a body that starts with OpFenceLinks.
func DecodeFenceRequest(b []byte) (FenceRequest, error) {
	var r FenceRequest
	if len(b) < fenceRequestHdr || b[0] != OpFenceLinks {
		return r, fmt.Errorf("%w: fence request of %d bytes", ErrMalformed, len(b))
	}
	r.Proxy = int32(binary.BigEndian.Uint32(b[1:]))
	r.Epoch = int64(binary.BigEndian.Uint64(b[5:]))
	r.Session = binary.BigEndian.Uint64(b[13:])
	ps, err := decodeRefs(b[fenceRequestHdr:])
	r.Parts = ps
	return r, err
}

// PartitionRef names a partition by topic ID.
type PartitionRef struct {
	Topic     metadata.TopicID
	Partition int32
}

// AppendOffsetsRequest encodes an OpOffsets request.
func AppendOffsetsRequest(b []byte, ps []PartitionRef) []byte {
	return appendRefs(append(b, OpOffsets), ps)
}

func appendRefs(b []byte, ps []PartitionRef) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ps)))
	for _, p := range ps {
		b = append(b, p.Topic[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
	}
	return b
}

// DecodeOffsetsRequest parses a body that starts with OpOffsets.
func DecodeOffsetsRequest(b []byte) ([]PartitionRef, error) {
	if len(b) < 5 || b[0] != OpOffsets {
		return nil, fmt.Errorf("%w: offsets request of %d bytes", ErrMalformed, len(b))
	}
	return decodeRefs(b[1:])
}

func decodeRefs(b []byte) ([]PartitionRef, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: partition list of %d bytes", ErrMalformed, len(b))
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 || n > maxItems || len(b) != n*20 {
		return nil, fmt.Errorf("%w: %d partitions in %d bytes", ErrMalformed, n, len(b))
	}
	ps := make([]PartitionRef, n)
	for i := range ps {
		copy(ps[i].Topic[:], b[i*20:])
		ps[i].Partition = int32(binary.BigEndian.Uint32(b[i*20+16:]))
	}
	return ps, nil
}

// Offsets is a leader's answer for one partition.
type Offsets struct {
	Code        int16
	HW          int64
	LogStart    int64
	LeaderEpoch int32
}

const offsetsLen = 2 + 8 + 8 + 4

// AppendOffsets encodes an OpOffsets answer.
func AppendOffsets(b []byte, os []Offsets) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(os)))
	for _, o := range os {
		b = binary.BigEndian.AppendUint16(b, uint16(o.Code))
		b = binary.BigEndian.AppendUint64(b, uint64(o.HW))
		b = binary.BigEndian.AppendUint64(b, uint64(o.LogStart))
		b = binary.BigEndian.AppendUint32(b, uint32(o.LeaderEpoch))
	}
	return b
}

// DecodeOffsets parses an OpOffsets answer of want partitions.
func DecodeOffsets(b []byte, want int) ([]Offsets, error) {
	if len(b) < 4 || int(binary.BigEndian.Uint32(b)) != want || len(b) != 4+want*offsetsLen {
		return nil, fmt.Errorf("%w: offsets answer of %d bytes for %d partitions", ErrMalformed, len(b), want)
	}
	os := make([]Offsets, want)
	for i := range os {
		p := b[4+i*offsetsLen:]
		os[i] = Offsets{Code: int16(binary.BigEndian.Uint16(p)), HW: int64(binary.BigEndian.Uint64(p[2:])),
			LogStart: int64(binary.BigEndian.Uint64(p[10:])), LeaderEpoch: int32(binary.BigEndian.Uint32(p[18:]))}
	}
	return os, nil
}

// FollowRequest is a read replica's request for the index entries of partitions led by
// the broker it asks, from the offsets it holds. The leader answers at once when any
// partition has entries or its state changed, else after MaxWait.
type FollowRequest struct {
	Replica int32
	MaxWait int32 // milliseconds
	Parts   []FollowPart
	Txn     bool // OpFollowTxn: answer with the transactions' state
}

// FollowPart is one partition of a FollowRequest.
type FollowPart struct {
	Topic       metadata.TopicID
	Partition   int32
	From        int64
	LeaderEpoch int32 // the epoch the replica last got (-1: none): a change answers at once
}

const followPartLen = 16 + 4 + 8 + 4

// AppendTo encodes the request body.
func (r *FollowRequest) AppendTo(b []byte) []byte {
	if r.Txn {
		b = append(b, OpFollowTxn)
	} else {
		b = append(b, OpFollow)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(r.Replica))
	b = binary.BigEndian.AppendUint32(b, uint32(r.MaxWait))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Parts)))
	for _, p := range r.Parts {
		b = append(b, p.Topic[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
		b = binary.BigEndian.AppendUint64(b, uint64(p.From))
		b = binary.BigEndian.AppendUint32(b, uint32(p.LeaderEpoch))
	}
	return b
}

// DecodeFollowRequest parses a body that starts with OpFollow or OpFollowTxn.
func DecodeFollowRequest(b []byte) (FollowRequest, error) {
	var r FollowRequest
	if len(b) < 13 || b[0] != OpFollow && b[0] != OpFollowTxn {
		return r, fmt.Errorf("%w: follow request of %d bytes", ErrMalformed, len(b))
	}
	r.Txn = b[0] == OpFollowTxn
	r.Replica = int32(binary.BigEndian.Uint32(b[1:]))
	r.MaxWait = int32(binary.BigEndian.Uint32(b[5:]))
	n := int(binary.BigEndian.Uint32(b[9:]))
	b = b[13:]
	if n < 0 || n > maxItems || len(b) != n*followPartLen || r.MaxWait < 0 {
		return r, fmt.Errorf("%w: %d partitions in %d bytes", ErrMalformed, n, len(b))
	}
	r.Parts = make([]FollowPart, n)
	for i := range r.Parts {
		p := b[i*followPartLen:]
		copy(r.Parts[i].Topic[:], p)
		r.Parts[i].Partition = int32(binary.BigEndian.Uint32(p[16:]))
		r.Parts[i].From = int64(binary.BigEndian.Uint64(p[20:]))
		r.Parts[i].LeaderEpoch = int32(binary.BigEndian.Uint32(p[28:]))
	}
	return r, nil
}

// FollowResult is the leader's answer for one partition.
type FollowResult struct {
	Code    int16
	State   partlog.FollowState
	Entries []partlog.FollowEntry
}

// AppendFollowResults encodes a follow answer; txn (OpFollowTxn) adds to each partition
// its last stable offset and aborted transactions:
// lso int64 | n int32 | n × (producer ID int64 | first int64 | last int64).
func AppendFollowResults(b []byte, rs []FollowResult, txn bool) []byte {
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(len(rs)))
	for i := range rs {
		r := &rs[i]
		b = be.AppendUint16(b, uint16(r.Code))
		b = be.AppendUint32(b, uint32(r.State.LeaderEpoch))
		b = be.AppendUint64(b, uint64(r.State.HW))
		b = be.AppendUint64(b, uint64(r.State.LogStart))
		b = be.AppendUint32(b, uint32(len(r.State.Epochs)))
		for _, e := range r.State.Epochs {
			b = be.AppendUint32(b, uint32(e.Epoch))
			b = be.AppendUint64(b, uint64(e.Start))
		}
		b = be.AppendUint32(b, uint32(len(r.Entries)))
		for j := range r.Entries {
			b = partlog.AppendFollowEntry(b, &r.Entries[j])
		}
		if txn {
			b = be.AppendUint64(b, uint64(r.State.LSO))
			b = be.AppendUint32(b, uint32(len(r.State.Aborted)))
			for _, a := range r.State.Aborted {
				b = be.AppendUint64(b, uint64(a.ProducerID))
				b = be.AppendUint64(b, uint64(a.First))
				b = be.AppendUint64(b, uint64(a.Last))
			}
		}
	}
	return b
}

// DecodeFollowResults parses a follow answer of want partitions (txn: to OpFollowTxn;
// else each partition's LSO is -1, unknown).
func DecodeFollowResults(b []byte, want int, txn bool) ([]FollowResult, error) {
	be := binary.BigEndian
	bad := func(what string) error { return fmt.Errorf("%w: follow answer: %s", ErrMalformed, what) }
	if len(b) < 4 || int(be.Uint32(b)) != want {
		return nil, bad("count")
	}
	b = b[4:]
	rs := make([]FollowResult, want)
	for i := range rs {
		if len(b) < 2+4+8+8+4 {
			return nil, bad("truncated")
		}
		r := &rs[i]
		r.Code = int16(be.Uint16(b))
		r.State.LeaderEpoch = int32(be.Uint32(b[2:]))
		r.State.HW = int64(be.Uint64(b[6:]))
		r.State.LogStart = int64(be.Uint64(b[14:]))
		ne := int(be.Uint32(b[22:]))
		b = b[26:]
		if ne < 0 || ne > maxItems || len(b) < ne*12+4 {
			return nil, bad("epochs")
		}
		for j := 0; j < ne; j++ {
			r.State.Epochs = append(r.State.Epochs, partlog.EpochStart{Epoch: int32(be.Uint32(b[j*12:])), Start: int64(be.Uint64(b[j*12+4:]))})
		}
		b = b[ne*12:]
		n := int(be.Uint32(b))
		b = b[4:]
		if n < 0 || n > maxItems || len(b) < n*partlog.FollowEntryLen {
			return nil, bad("entries")
		}
		r.Entries = make([]partlog.FollowEntry, n)
		for j := range r.Entries {
			e, err := partlog.DecodeFollowEntry(b[j*partlog.FollowEntryLen:])
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			r.Entries[j] = e
		}
		b = b[n*partlog.FollowEntryLen:]
		r.State.LSO = -1
		if txn {
			if len(b) < 12 {
				return nil, bad("truncated")
			}
			r.State.LSO = int64(be.Uint64(b))
			na := int(be.Uint32(b[8:]))
			b = b[12:]
			if na < 0 || na > maxItems || len(b) < na*24 {
				return nil, bad("aborted transactions")
			}
			for j := 0; j < na; j++ {
				r.State.Aborted = append(r.State.Aborted, metadata.AbortedTxn{ProducerID: int64(be.Uint64(b[j*24:])),
					First: int64(be.Uint64(b[j*24+8:])), Last: int64(be.Uint64(b[j*24+16:]))})
			}
			b = b[na*24:]
		}
	}
	if len(b) != 0 {
		return nil, bad("trailing bytes")
	}
	return rs, nil
}

// MoveReadyRequest asks a graceful move's target whether it has preloaded the partition
// for the move Gen (metadata.Partition.MoveGen): read the earlier ranges of its log chain,
// so that at the hand-off only the current leader's range is left to read. The target
// answers once it has (MoveReady), once it cannot (MoveNotReady: the preload failed, the
// move is not one it knows), or after Wait (MoveNotReady). The leader keeps serving the
// partition meanwhile and closes it for the hand-off on any answer. A broker that does
// not know the op answers with an empty body, which the leader takes as not ready.
type MoveReadyRequest struct {
	Part PartitionRef
	Gen  uint64
	Wait time.Duration // milliseconds on the wire
}

// Answers to a MoveReadyRequest.
const (
	MoveNotReady byte = 0
	MoveReady    byte = 1
)

const moveReadyLen = 1 + 16 + 4 + 8 + 4

// AppendTo encodes the request body: op | topic [16] | partition int32 | gen uint64 |
// wait ms uint32. The answer is one byte.
func (r *MoveReadyRequest) AppendTo(b []byte) []byte {
	b = append(b, OpMoveReady)
	b = append(b, r.Part.Topic[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Part.Partition))
	b = binary.BigEndian.AppendUint64(b, r.Gen)
	return binary.BigEndian.AppendUint32(b, uint32(min(max(r.Wait.Milliseconds(), 0), math.MaxUint32)))
}

// DecodeMoveReadyRequest parses an OpMoveReady request.
func DecodeMoveReadyRequest(b []byte) (MoveReadyRequest, error) {
	var r MoveReadyRequest
	if len(b) != moveReadyLen || b[0] != OpMoveReady {
		return r, fmt.Errorf("%w: move-ready request of %d bytes", ErrMalformed, len(b))
	}
	copy(r.Part.Topic[:], b[1:17])
	r.Part.Partition = int32(binary.BigEndian.Uint32(b[17:]))
	r.Gen = binary.BigEndian.Uint64(b[21:])
	r.Wait = time.Duration(binary.BigEndian.Uint32(b[29:])) * time.Millisecond
	return r, nil
}
