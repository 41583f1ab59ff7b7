package share

import (
	"errors"
	"fmt"
	"time"
)

// State is a record's delivery state in a share partition (KIP-932).
type State int8

// The record states. A record at or past the end offset is Available without an entry.
const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge.
type AckType int8

// The acknowledgement types (0 marks an offset the log does not hold).
const (
	AckGap     AckType = 0
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
)

// Errors of the state machine; the front end turns them into Kafka codes.
var (
	// ErrInvalidRecordState: an acknowledgement of offsets not acquired by the member
	// (INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("share: records not acquired by this member")
	// ErrInvalidAck: an acknowledgement type or range the protocol does not allow
	// (INVALID_REQUEST).
	ErrInvalidAck = errors.New("share: invalid acknowledgement")
)

// Limits are the group configuration a share partition applies.
type Limits struct {
	// LockDuration is how long an acquired record stays with its member before it is
	// released (group.share.record.lock.duration.ms).
	LockDuration time.Duration
	// DeliveryLimit is how many times a record is delivered before it is archived
	// (group.share.delivery.count.limit).
	DeliveryLimit int16
	// MaxInFlight bounds the records between the start and the end offset
	// (group.share.partition.max.record.locks): nothing new is acquired past it.
	MaxInFlight int
}

// rec is one in-flight offset.
type rec struct {
	state      State
	deliveries int16
	member     string
	deadline   time.Time
}

// Partition is one share group's view of one topic partition: the share-partition start
// offset (every offset below it is done), the end offset (the first never acquired) and
// the state of every offset between. Not safe for concurrent use: the Manager holds its
// lock around every call.
type Partition struct {
	lim      Limits
	start    int64
	inflight []rec // inflight[i] is offset start+i; len: end - start
	// version counts state changes that must be persisted; a snapshot carries it.
	version uint64
}

// NewPartition returns a share partition starting at start.
func NewPartition(start int64, lim Limits) *Partition {
	return &Partition{lim: lim, start: start}
}

// SetLockDuration sets how long the next acquisitions are locked for (the group's
// share.record.lock.duration.ms, which may change while the partition is loaded).
func (p *Partition) SetLockDuration(d time.Duration) {
	if d > 0 {
		p.lim.LockDuration = d
	}
}

// Start is the share-partition start offset (SPSO).
func (p *Partition) Start() int64 { return p.start }

// End is the share-partition end offset (SPEO): the first offset never acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.inflight)) }

// Version counts the persistent state changes so far.
func (p *Partition) Version() uint64 { return p.version }

// StateOf returns an offset's state and delivery count.
func (p *Partition) StateOf(off int64) (State, int16) {
	if off < p.start {
		return Archived, 0
	}
	i := off - p.start
	if i >= int64(len(p.inflight)) {
		return Available, 0
	}
	r := p.inflight[i]
	return r.state, r.deliveries
}

// NextFetch is the offset a fetch reads from: the first Available offset in flight,
// else the end offset.
func (p *Partition) NextFetch() int64 {
	for i, r := range p.inflight {
		if r.state == Available {
			return p.start + int64(i)
		}
	}
	return p.End()
}

// Span is an inclusive range of offsets.
type Span struct{ First, Last int64 }

// Grant is a range of offsets acquired with one delivery count.
type Grant struct {
	First, Last int64
	Deliveries  int16
}

// Acquire gives member the Available offsets of the batches read (spans: their offset
// ranges, in order; control: whether each holds control records, which are archived,
// never delivered), at most maxRecords (0: no bound) of them, locked until now +
// LockDuration. Offsets past the end offset join the in-flight window while MaxInFlight
// allows. It returns the ranges acquired.
func (p *Partition) Acquire(member string, now time.Time, spans []Span, control []bool, maxRecords int) []Grant {
	var out []Grant
	n := 0
	deadline := now.Add(p.lim.LockDuration)
	changed := false
spans:
	for si, s := range spans {
		for off := max(s.First, p.start); off <= s.Last; off++ {
			if maxRecords > 0 && n >= maxRecords {
				break spans
			}
			i := off - p.start
			if i > int64(len(p.inflight)) {
				// A hole between the window and this batch (offsets no batch holds, as
				// after compaction): nothing to deliver there.
				for int64(len(p.inflight)) < i {
					p.inflight = append(p.inflight, rec{state: Archived})
					changed = true
				}
			}
			if i == int64(len(p.inflight)) {
				if p.lim.MaxInFlight > 0 && len(p.inflight) >= p.lim.MaxInFlight {
					break spans
				}
				p.inflight = append(p.inflight, rec{state: Available})
			}
			r := &p.inflight[i]
			if r.state != Available {
				continue
			}
			if control != nil && control[si] {
				r.state = Archived
				changed = true
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			r.deliveries++
			n++
			if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].Deliveries == r.deliveries {
				out[k].Last = off
			} else {
				out = append(out, Grant{First: off, Last: off, Deliveries: r.deliveries})
			}
		}
	}
	if changed {
		p.version++
		p.advance()
	}
	return out
}

// Ack applies one acknowledgement batch of member: types has one type for the whole
// range or one per offset. Every offset must be Acquired by member (a gap too), else
// nothing changes and ErrInvalidRecordState is returned.
func (p *Partition) Ack(member string, first, last int64, types []AckType) error {
	if last < first || len(types) == 0 || (len(types) != 1 && int64(len(types)) != last-first+1) {
		return fmt.Errorf("%w: range %d-%d with %d types", ErrInvalidAck, first, last, len(types))
	}
	for _, t := range types {
		if t < AckGap || t > AckReject {
			return fmt.Errorf("%w: type %d", ErrInvalidAck, t)
		}
	}
	for off := first; off <= last; off++ {
		i := off - p.start
		if i < 0 || i >= int64(len(p.inflight)) || p.inflight[i].state != Acquired || p.inflight[i].member != member {
			return fmt.Errorf("%w: offset %d", ErrInvalidRecordState, off)
		}
	}
	for off := first; off <= last; off++ {
		t := types[0]
		if len(types) > 1 {
			t = types[off-first]
		}
		r := &p.inflight[off-p.start]
		switch t {
		case AckAccept:
			r.state = Acknowledged
		case AckRelease:
			p.release(r)
		default: // reject, gap
			r.state = Archived
		}
		r.member, r.deadline = "", time.Time{}
	}
	p.version++
	p.advance()
	return nil
}

// release makes an acquired record Available again, or Archived once it was delivered
// DeliveryLimit times.
func (p *Partition) release(r *rec) {
	r.member, r.deadline = "", time.Time{}
	if p.lim.DeliveryLimit > 0 && r.deliveries >= p.lim.DeliveryLimit {
		r.state = Archived
		return
	}
	r.state = Available
}

// ReleaseMember releases every record member holds (its share session ended). It
// reports whether anything changed.
func (p *Partition) ReleaseMember(member string) bool {
	changed := false
	for i := range p.inflight {
		if r := &p.inflight[i]; r.state == Acquired && r.member == member {
			p.release(r)
			changed = true
		}
	}
	if changed {
		p.version++
		p.advance()
	}
	return changed
}

// Expire releases the records whose acquisition lock ran out by now. It reports whether
// anything changed.
func (p *Partition) Expire(now time.Time) bool {
	changed := false
	for i := range p.inflight {
		if r := &p.inflight[i]; r.state == Acquired && !now.Before(r.deadline) {
			p.release(r)
			changed = true
		}
	}
	if changed {
		p.version++
		p.advance()
	}
	return changed
}

// NextDeadline is the earliest acquisition lock deadline (zero: none).
func (p *Partition) NextDeadline() time.Time {
	var d time.Time
	for _, r := range p.inflight {
		if r.state == Acquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d
}

// AdvanceTo moves the start offset up to off (the log start passed it: retention,
// DeleteRecords, or an administrator's reset); what lies below is dropped.
func (p *Partition) AdvanceTo(off int64) {
	if off <= p.start {
		return
	}
	drop := off - p.start
	if drop >= int64(len(p.inflight)) {
		p.inflight = p.inflight[:0]
	} else {
		p.inflight = append(p.inflight[:0], p.inflight[drop:]...)
	}
	p.start = off
	p.version++
}

// advance moves the start offset over the leading Acknowledged and Archived records.
func (p *Partition) advance() {
	k := 0
	for k < len(p.inflight) && (p.inflight[k].state == Acknowledged || p.inflight[k].state == Archived) {
		k++
	}
	if k > 0 {
		p.inflight = append(p.inflight[:0], p.inflight[k:]...)
		p.start += int64(k)
	}
}
