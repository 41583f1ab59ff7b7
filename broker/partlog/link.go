package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// Zone routing writes a batch where the client is and links it into the log where the
// leader is. A proxy broker P appends the client's batch, offsets unassigned, to its own
// WAL (RecProxyBatch) and sends the leader L a Link naming it; L assigns the offsets and
// appends the Link to its own WAL (RecLink). The batch's bytes stay in P's WAL: whoever
// reads the partition (L, a later leader, a read replica, the uploader) reads them there
// through a linkReader, which writes the base offset and leader epoch the link assigned
// into what it read (the batch CRC does not cover those two fields) and checks every
// other byte (recbatch.CheckStored: the CRC the link recorded, and the length and magic
// the CRC does not cover), so a stale read of the shared file system is caught and
// retried, never served.

// LinkLenV1 and LinkLenV2 are the encoded sizes of a Link by version (a RecLink
// payload, and one link on the wire; the layouts are drawn in doc.go). AppendLink
// writes the oldest version that says the link: v1 for one without attributes (a
// non-transactional batch), byte for byte what brokers before v2 write and read, so
// they keep linking such batches in a cluster being upgraded; v2 for a transactional
// one. A v1 link reads as attributes 0: not transactional.
const (
	LinkLenV1 = 1 + 16 + 4 + 4 + 8 + 8 + 4 + 4 + 4 + 8 + 8 + 2 + 4 + 8 + 4
	LinkLenV2 = LinkLenV1 + 2
	// MaxLinkLen is the longest encoding (an encode buffer's capacity).
	MaxLinkLen = LinkLenV2
)

// linkAttrs are the batch attributes a link carries: the transactional bit, which the
// leader's transaction state needs (the batch bytes hold all of them anyway). A control
// batch is never linked: markers are the leader's own (its coordinator writes them
// there), never a client's.
const linkAttrs = recbatch.AttrTransactional

// ErrStaleRead: the bytes read from another broker's WAL did not match the CRC their
// link recorded, even after reopening the file (a shared file system serving stale
// pages for longer than the retries wait).
var ErrStaleRead = errors.New("partlog: batch read from a shared WAL does not match its link")

// Link names a batch in a proxy's WAL and, once the leader took it, the offsets it got.
type Link struct {
	Topic     metadata.TopicID
	Partition int32
	// Proxy and ProxyEpoch name the WAL directory holding the batch (the proxy's
	// registration epoch); Pos is the position of the batch bytes in it.
	Proxy      int32
	ProxyEpoch int64
	Pos        wal.Pos
	Size       int32
	CRC        uint32 // the batch's own CRC field
	// From the batch header: what the leader's index and producer state need.
	LastOffsetDelta int32
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	// Attributes are the batch's attributes the leader acts on (linkAttrs: the
	// transactional bit); the others are left out.
	Attributes int16
	// Set by the leader: the base offset and the leader epoch the batch got (-1 before).
	Base        int64
	LeaderEpoch int32
}

// LinkOf describes batch (validated, stamped if it uses LogAppendTime) as written at pos
// of the proxy's WAL. A control batch is refused (ErrControlLink).
func LinkOf(id metadata.TopicID, partition int32, proxy int32, proxyEpoch int64, pos wal.Pos, h *recbatch.Header, batch []byte) (Link, error) {
	if h.Control() {
		return Link{}, ErrControlLink
	}
	return Link{Topic: id, Partition: partition, Proxy: proxy, ProxyEpoch: proxyEpoch, Pos: pos, Size: int32(len(batch)),
		CRC: binary.BigEndian.Uint32(batch[17:]), LastOffsetDelta: h.LastOffsetDelta, MaxTimestamp: int64(binary.BigEndian.Uint64(batch[35:])),
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence, Attributes: h.Attributes & linkAttrs,
		Base: -1, LeaderEpoch: -1}, nil
}

// Header is the part of a batch header the link carries (producer state and
// transaction checks).
func (l *Link) Header() recbatch.Header {
	return recbatch.Header{BaseOffset: l.Base, LeaderEpoch: l.LeaderEpoch, Attributes: l.Attributes, LastOffsetDelta: l.LastOffsetDelta,
		MaxTimestamp: l.MaxTimestamp, ProducerID: l.ProducerID, ProducerEpoch: l.ProducerEpoch, BaseSequence: l.BaseSequence}
}

// Transactional reports whether the linked batch is transactional.
func (l *Link) Transactional() bool { return l.Attributes&recbatch.AttrTransactional != 0 }

// Key is the linked partition's key.
func (l *Link) Key() Key { return Key{l.Topic, l.Partition} }

// Last is the offset of the batch's last record (valid once Base is set).
func (l *Link) Last() int64 { return l.Base + int64(l.LastOffsetDelta) }

// AppendLink appends the encoding of l to b: v1 without attributes, else v2.
func AppendLink(b []byte, l *Link) []byte {
	v := byte(1)
	if l.Attributes != 0 {
		v = 2
	}
	b = append(b, v)
	b = append(b, l.Topic[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(l.Partition))
	b = binary.BigEndian.AppendUint32(b, uint32(l.Proxy))
	b = binary.BigEndian.AppendUint64(b, uint64(l.ProxyEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(l.Pos))
	b = binary.BigEndian.AppendUint32(b, uint32(l.Size))
	b = binary.BigEndian.AppendUint32(b, l.CRC)
	b = binary.BigEndian.AppendUint32(b, uint32(l.LastOffsetDelta))
	b = binary.BigEndian.AppendUint64(b, uint64(l.MaxTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(l.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(l.ProducerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(l.BaseSequence))
	b = binary.BigEndian.AppendUint64(b, uint64(l.Base))
	b = binary.BigEndian.AppendUint32(b, uint32(l.LeaderEpoch))
	if v >= 2 {
		b = binary.BigEndian.AppendUint16(b, uint16(l.Attributes))
	}
	return b
}

// DecodeLink reads one Link from the start of p and returns it with the length of its
// encoding (by its version: LinkLenV1 or LinkLenV2).
func DecodeLink(p []byte) (Link, int, error) {
	var l Link
	if len(p) < 1 {
		return l, 0, errors.New("partlog: empty link")
	}
	var n int
	switch p[0] {
	case 1:
		n = LinkLenV1
	case 2:
		n = LinkLenV2
	default:
		return l, 0, fmt.Errorf("partlog: link version %d is not supported", p[0])
	}
	if len(p) < n {
		return l, 0, fmt.Errorf("partlog: link v%d of %d bytes is too short", p[0], len(p))
	}
	be := binary.BigEndian
	copy(l.Topic[:], p[1:17])
	l.Partition = int32(be.Uint32(p[17:]))
	l.Proxy = int32(be.Uint32(p[21:]))
	l.ProxyEpoch = int64(be.Uint64(p[25:]))
	l.Pos = wal.Pos(be.Uint64(p[33:]))
	l.Size = int32(be.Uint32(p[41:]))
	l.CRC = be.Uint32(p[45:])
	l.LastOffsetDelta = int32(be.Uint32(p[49:]))
	l.MaxTimestamp = int64(be.Uint64(p[53:]))
	l.ProducerID = int64(be.Uint64(p[61:]))
	l.ProducerEpoch = int16(be.Uint16(p[69:]))
	l.BaseSequence = int32(be.Uint32(p[71:]))
	l.Base = int64(be.Uint64(p[75:]))
	l.LeaderEpoch = int32(be.Uint32(p[83:]))
	if n >= LinkLenV2 {
		l.Attributes = int16(be.Uint16(p[87:]))
		if l.Attributes == 0 {
			// AppendLink writes v1 for it: one encoding per link.
			return l, 0, fmt.Errorf("partlog: link v2 of %v/%d without attributes", l.Topic, l.Partition)
		}
	}
	if l.Size < recbatch.HeaderLen || l.LastOffsetDelta < 0 || l.Pos < 0 {
		return l, 0, fmt.Errorf("partlog: link of %v/%d with size %d, last offset delta %d at %d is invalid", l.Topic, l.Partition, l.Size, l.LastOffsetDelta, l.Pos)
	}
	if l.Attributes&^linkAttrs != 0 || l.Transactional() && l.ProducerID < 0 {
		// Only a link's own bits, and no transaction without a producer: what LinkOf of
		// a validated batch gives.
		return l, 0, fmt.Errorf("partlog: link of %v/%d with attributes %#x, producer %d is invalid", l.Topic, l.Partition, l.Attributes, l.ProducerID)
	}
	return l, n, nil
}

// revalidator is a Reader that can drop what it cached of the file holding pos
// (wal.ReadOnly: a fresh open, which on NFS revalidates the client's cache).
type revalidator interface {
	Revalidate(pos wal.Pos) error
}

// linkReader reads a linked batch from the proxy's WAL: it checks the batch against the
// CRC of the link and writes the offset and epoch the link assigned into it.
type linkReader struct {
	in        Reader
	base      int64
	epoch     int32
	crc       uint32
	lastDelta int32
}

// staleRetries and staleWait bound how long a read waits for a shared file system to
// serve the synced bytes.
const (
	staleRetries = 4
	staleWait    = 20 * time.Millisecond
)

func (r *linkReader) ReadAt(p []byte, pos wal.Pos) error {
	for try := 0; ; try++ {
		if err := r.in.ReadAt(p, pos); err != nil {
			return err
		}
		err := recbatch.CheckStored(p, r.crc, r.lastDelta)
		if err == nil {
			recbatch.SetOffsetEpoch(p, r.base, r.epoch)
			return nil
		}
		if try == staleRetries {
			return fmt.Errorf("%w: %d bytes at %d: %w", ErrStaleRead, len(p), pos, err)
		}
		if rv, ok := r.in.(revalidator); ok {
			if err := rv.Revalidate(pos); err != nil {
				return err
			}
		}
		time.Sleep(staleWait << try)
	}
}

// linkLoc is the index entry of a linked batch.
func linkLoc(l *Link, src Reader) *batchLoc {
	loc := &batchLoc{base: l.Base, last: l.Last(), epoch: l.LeaderEpoch, maxTS: l.MaxTimestamp, size: l.Size, pos: l.Pos, pid: -1,
		src: &linkReader{in: src, base: l.Base, epoch: l.LeaderEpoch, crc: l.CRC, lastDelta: l.LastOffsetDelta}, from: SourceID{l.Proxy, l.ProxyEpoch}, crc: l.CRC}
	if l.ProducerID >= 0 {
		loc.pid, loc.pepoch, loc.pseq = l.ProducerID, l.ProducerEpoch, l.BaseSequence
		if l.Transactional() {
			loc.kind = txnData // as for a batch appended here: opens, or belongs to, its producer's transaction
		}
	}
	return loc
}

// PrepareLink assigns offsets to a linked batch (setting l.Base and l.LeaderEpoch) or
// recognises an idempotent retry, as Prepare does for a batch; src reads the proxy's WAL.
// The WAL committer calls it in log order, and Commit makes it readable.
func (p *Partition) PrepareLink(l *Link, src Reader) (Prepared, error) {
	return p.PrepareLinkData(l, src, nil)
}

// PrepareLinkData is PrepareLink with the batch's bytes as the leader read them back
// (VerifyLink), or nil: they get the link's offsets written in and serve reads and the
// upload from memory until the tail cache lets them go (Cache.Add once committed), so
// the proxy's WAL is not read again for them meanwhile.
func (p *Partition) PrepareLinkData(l *Link, src Reader, data []byte) (Prepared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Ready {
		return Prepared{}, ErrNotLeader
	}
	h := l.Header()
	if h.Control() {
		return Prepared{}, ErrControlLink
	}
	if h.Transactional() && !h.Idempotent() {
		return Prepared{}, fmt.Errorf("%w: a transactional link without a producer", ErrInvalidTxnState)
	}
	var ps *producerState
	if h.Idempotent() {
		ps = p.producers[h.ProducerID]
		if err := checkSequence(ps, &h); err != nil {
			var dup *DuplicateError
			if errors.As(err, &dup) {
				return Prepared{Dup: dup}, nil
			}
			return Prepared{}, err
		}
		// The link's attributes say whether its batch is transactional: the same check
		// as Prepare's.
		if err := p.checkTxnLocked(&h); err != nil {
			return Prepared{}, err
		}
	}
	l.Base, l.LeaderEpoch = p.next, p.leaderEpoch
	loc := linkLoc(l, src)
	loc.synced = false
	if len(data) == int(l.Size) {
		recbatch.SetOffsetEpoch(data, l.Base, l.LeaderEpoch)
		loc.data = data
	}
	p.noteEpoch(p.leaderEpoch, l.Base)
	if h.Idempotent() {
		if ps == nil {
			ps = &producerState{epoch: h.ProducerEpoch}
			p.setProducer(h.ProducerID, ps)
		}
		h.BaseOffset = l.Base
		ps.record(&h, l.Base)
		loc.pid = h.ProducerID
		if loc.kind == txnData {
			p.beginTxnLocked(loc)
		}
	}
	p.batches = append(p.batches, loc)
	p.next = loc.last + 1
	return Prepared{loc: loc, linked: true}, nil
}

// CollectLink records a link found at recPos of recSrc while the partition loads (see
// Collect); src reads the proxy's WAL.
func (p *Partition) CollectLink(l *Link, src, recSrc Reader, recPos wal.Pos) {
	loc := linkLoc(l, src)
	loc.recSrc, loc.recPos = recSrc, recPos
	loc.synced = true
	loc.at = time.Now().UnixNano()
	p.mu.Lock()
	p.loaded = append(p.loaded, loc)
	p.mu.Unlock()
}

// VerifyLink reads the batch l names through src (linkReader: the CRC the link recorded,
// the header bytes it does not cover, stale pages revalidated and retried) before a
// leader takes the link into its log: a link to bytes that cannot be read back would
// be acked and then fail every read and upload for good. It returns the batch's bytes.
func VerifyLink(l *Link, src Reader) ([]byte, error) {
	if l.Size <= 0 || l.Size > maxLinkedBatch {
		return nil, fmt.Errorf("%w: link of %d bytes", ErrStaleRead, l.Size)
	}
	buf := make([]byte, l.Size)
	r := linkReader{in: src, base: l.Base, epoch: l.LeaderEpoch, crc: l.CRC, lastDelta: l.LastOffsetDelta}
	if err := r.ReadAt(buf, l.Pos); err != nil {
		return nil, err
	}
	return buf, nil
}

// maxLinkedBatch bounds the buffer a link from the network may make VerifyLink allocate
// (a WAL record is smaller).
const maxLinkedBatch = 256 << 20

// reopeningReader reads a proxy's WAL directory through what open returns, asking again
// after any failure: a directory not yet visible, or a view that failed to open, must
// not stay cached as a failing reader in the index entries of the batches it holds.
type reopeningReader struct {
	open func() (Reader, error)
	mu   sync.Mutex
	r    Reader
}

func (r *reopeningReader) get() (Reader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.r != nil {
		return r.r, nil
	}
	in, err := r.open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	r.r = in
	return in, nil
}

func (r *reopeningReader) ReadAt(p []byte, pos wal.Pos) error {
	in, err := r.get()
	if err != nil {
		return err
	}
	return in.ReadAt(p, pos)
}

// Revalidate passes on to the reader it opened (a read-only view's fresh open).
func (r *reopeningReader) Revalidate(pos wal.Pos) error {
	in, err := r.get()
	if err != nil {
		return err
	}
	if rv, ok := in.(revalidator); ok {
		return rv.Revalidate(pos)
	}
	return nil
}
