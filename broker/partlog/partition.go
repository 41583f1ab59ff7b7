package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objread"
	"github.com/weir-io/weir/wal"
)

// Reader reads batch bytes from a WAL: this broker's own, or another broker's on the
// shared file system for data written before a leadership move.
type Reader interface {
	ReadAt(p []byte, pos wal.Pos) error
}

type batchLoc struct {
	base, last int64
	epoch      int32
	maxTS      int64
	src        Reader
	pos        wal.Pos // position of the batch bytes in src (valid once synced)
	// A linked batch's bytes are in a proxy's WAL (src reads them there); its link
	// record, which a later load needs, is at recPos of recSrc.
	recSrc Reader
	recPos wal.Pos
	// from names the WAL directory the batch bytes are in, and crc is the batch's CRC:
	// what a read replica needs to read and check them itself (replica.go).
	from   SourceID
	crc    uint32
	size   int32
	data   []byte // tail cache; nil once evicted
	synced bool
	at     int64 // when it was synced or loaded (unix ns): upload lag
	// producer fields kept for state rebuilding and rollback
	pid    int64
	pepoch int16
	pseq   int32
	// kind is the batch's part in transactions, txnPrev its producer's open transaction
	// before it (-1: none; txn.go).
	kind    txnKind
	txnPrev int64
}

type epochStart struct {
	epoch int32
	start int64
}

// State is where a partition is in its life on this broker.
type State int

const (
	Loading State = iota // reading its data from the WALs of its log chain
	Ready                // leading: appends and reads served
	Closing              // handing off to another broker: no new appends
	Gone                 // no longer led here
)

// Key names a partition independently of its topic's name.
type Key struct {
	ID    metadata.TopicID
	Index int32
}

// Partition is one partition's log on this broker.
type Partition struct {
	topic string
	id    metadata.TopicID
	index int32

	mu          sync.Mutex
	state       State
	chain       []LogRange  // where this partition's data lives, oldest first
	loaded      []*batchLoc // collected while loading, indexed by FinishLoad
	batches     []*batchLoc // ascending offsets; the tail may hold unsynced batches
	logStart    int64
	next        int64 // next offset to assign
	hw          int64 // every offset below is synced and readable
	leaderEpoch int32
	epochs      []epochStart
	producers   map[int64]*producerState
	txns        map[int64]int64       // open transactions: producer ID → first offset (txn.go)
	aborted     []metadata.AbortedTxn // by marker offset, from the log start on
	abortSpan   int64                 // the largest Last-First in aborted
	followLSO   int64                 // a read replica's last stable offset from its leader (-1: its high watermark)
	waiters     []chan struct{}
	tier        tierState // what object storage holds (tier.go)
	own         Reader    // this broker's current WAL (UseOwn); batches elsewhere are foreign
	ownID       SourceID
	appended    atomic.Int64
	moveGen     uint64 // the graceful move being handed off (Closing)
}

// UseOwn tells the partition which WAL is this broker's own: batches indexed in any other
// (an earlier leader's, an earlier process's) are dropped from the index as soon as object
// storage holds them, since their WAL may then be trimmed or deleted by its owner or by
// garbage collection.
func (p *Partition) UseOwn(own Reader, id SourceID) {
	p.mu.Lock()
	p.own, p.ownID = own, id
	p.mu.Unlock()
}

// SourceID names a WAL directory: a broker's WAL of one registration epoch.
type SourceID struct {
	Broker int32
	Epoch  int64
}

// New returns a partition in state Loading.
func New(topic string, id metadata.TopicID, index int32, epoch int32, logStart int64) *Partition {
	return &Partition{topic: topic, id: id, index: index, leaderEpoch: epoch, logStart: logStart, next: logStart, hw: logStart,
		state: Loading, tier: tierState{uploaded: -1}, followLSO: -1}
}

// setProducer records a producer's state. The map is made on first use: most of a
// large topic's partitions never see an idempotent producer on a given broker, and an
// empty map costs a few hundred bytes per idle partition.
func (p *Partition) setProducer(id int64, s *producerState) {
	if p.producers == nil {
		p.producers = map[int64]*producerState{}
	}
	p.producers[id] = s
}

// Topic is the topic's name (as of the partition's creation here).
func (p *Partition) Topic() string { return p.topic }

// ID is the topic's ID.
func (p *Partition) ID() metadata.TopicID { return p.id }

// Index is the partition's number.
func (p *Partition) Index() int32 { return p.index }

// Key is (topic ID, index).
func (p *Partition) Key() Key { return Key{p.id, p.index} }

// State returns the partition's state.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Chain returns the partition's log chain as last applied.
func (p *Partition) Chain() []LogRange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.chain
}

// Apply takes the partition's metadata: its chain, leader epoch, log start, object
// manifest (when tiered) and whether it is moving away. It reports whether a graceful
// hand-off starts now: the partition went from Ready to Closing, or the move it is
// closing for was replaced by another.
func (p *Partition) Apply(mp metadata.Partition, v *metadata.View, tiered bool) (handoff bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.chain = ChainOf(mp)
	if mp.LeaderEpoch > p.leaderEpoch {
		p.leaderEpoch = mp.LeaderEpoch
	}
	p.setLogStartLocked(mp.LogStartOffset)
	if tiered {
		p.tier.enabled = true
		p.applyManifestLocked(mp, v)
	}
	switch {
	case mp.Moving && p.state == Ready:
		p.state, p.moveGen = Closing, mp.MoveGen
		return true
	case mp.Moving && p.state == Closing && mp.MoveGen != p.moveGen:
		// The move was cancelled and another begun, seen in one view: the hand-off of
		// the old one will be refused, so this one needs its own.
		p.moveGen = mp.MoveGen
		return true
	case !mp.Moving && p.state == Closing:
		p.state = Ready // move cancelled
	}
	return false
}

// Drop marks the partition Gone and wakes its waiters. When own is not nil it returns the
// position of the first batch in own (this broker's WAL) that object storage does not
// hold yet, and the partition's next offset: the new leader reads that range from own
// until it has uploaded it, so own must keep it (a pin).
func (p *Partition) Drop(own Reader) (pos wal.Pos, end int64, pin bool) {
	p.mu.Lock()
	p.state = Gone
	if own != nil {
		up := p.tier.uploaded
		for _, bl := range p.batches {
			if bl.last < up || !bl.synced {
				continue
			}
			if at, ok := bl.ownPos(own); ok {
				pos, end, pin = at, p.next, true
				break
			}
		}
	}
	w := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	wake(w)
	return pos, end, pin
}

// ownPos is where the batch's record is in own: the batch itself, or its link record.
func (b *batchLoc) ownPos(own Reader) (wal.Pos, bool) {
	switch {
	case b.src == own:
		return b.pos, true
	case b.recSrc != nil && b.recSrc == own:
		return b.recPos, true
	}
	return 0, false
}

func wake(w []chan struct{}) {
	for _, c := range w {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Prepared is what Prepare decided about one batch: a new location, or (Dup) a retry.
type Prepared struct {
	loc    *batchLoc
	linked bool // a linked batch (PrepareLink): its bytes are in the proxy's WAL
	Dup    *DuplicateError
}

// Linked reports whether the batch was prepared from a Link.
func (pr Prepared) Linked() bool { return pr.linked }

// Base is the base offset Prepare assigned (valid when Dup is nil).
func (pr Prepared) Base() int64 {
	if pr.loc == nil {
		return -1
	}
	return pr.loc.base
}

// Prepare assigns offsets to batch (rewriting it in place) or recognises an idempotent
// retry. The WAL committer calls it in log order. logAppendTimeMs >= 0 stamps the batch
// with that LogAppendTime.
func (p *Partition) Prepare(h *recbatch.Header, batch []byte, logAppendTimeMs int64) (Prepared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Ready {
		return Prepared{}, ErrNotLeader
	}
	if h.Control() {
		return p.prepareMarkerLocked(h, batch, logAppendTimeMs)
	}
	var ps *producerState
	if h.Idempotent() {
		ps = p.producers[h.ProducerID]
		if err := checkSequence(ps, h); err != nil {
			var dup *DuplicateError
			if errors.As(err, &dup) {
				return Prepared{Dup: dup}, nil
			}
			return Prepared{}, err
		}
		if err := p.checkTxnLocked(h); err != nil {
			return Prepared{}, err
		}
	}
	loc := p.newLocLocked(h, batch, logAppendTimeMs)
	if h.Idempotent() {
		if ps == nil {
			ps = &producerState{epoch: h.ProducerEpoch}
			p.setProducer(h.ProducerID, ps)
		}
		ps.record(h, loc.base)
		loc.pid = h.ProducerID
		if h.Transactional() {
			loc.kind = txnData
			p.beginTxnLocked(loc)
		}
	}
	p.batches = append(p.batches, loc)
	p.next = loc.last + 1
	return Prepared{loc: loc}, nil
}

// newLocLocked assigns batch the next offsets (in place), stamps it with logAppendTimeMs
// (>= 0) and returns its unsynced index entry; src is set at commit, when the position
// is known.
func (p *Partition) newLocLocked(h *recbatch.Header, batch []byte, logAppendTimeMs int64) *batchLoc {
	base := p.next
	recbatch.SetOffsetEpoch(batch, base, p.leaderEpoch)
	maxTS := h.MaxTimestamp
	if logAppendTimeMs >= 0 {
		recbatch.SetLogAppendTime(batch, logAppendTimeMs)
		maxTS = logAppendTimeMs
	}
	p.noteEpoch(p.leaderEpoch, base)
	return &batchLoc{base: base, last: base + int64(h.LastOffsetDelta), epoch: p.leaderEpoch, maxTS: maxTS, size: int32(len(batch)), data: batch, pid: -1,
		from: p.ownID, crc: binary.BigEndian.Uint32(batch[17:]), txnPrev: -1}
}

func (p *Partition) noteEpoch(epoch int32, start int64) {
	if n := len(p.epochs); n == 0 || p.epochs[n-1].epoch < epoch {
		p.epochs = append(p.epochs, epochStart{epoch: epoch, start: start})
	}
}

// Commit makes a prepared batch readable once its WAL group is synced at pos in src (for
// a linked batch: once its link record is synced; src and pos are then unused, the
// batch stays where the link says).
func (p *Partition) Commit(pr Prepared, src Reader, pos wal.Pos) {
	loc := pr.loc
	p.appended.Add(int64(loc.size))
	p.mu.Lock()
	if pr.linked {
		loc.recSrc, loc.recPos = src, pos
	} else {
		loc.src, loc.pos = src, pos
	}
	loc.synced = true
	loc.at = time.Now().UnixNano()
	if loc.last+1 > p.hw {
		p.hw = loc.last + 1
	}
	w := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	wake(w)
}

// AppendedBytes is the record batch bytes this partition appended here (load reports).
func (p *Partition) AppendedBytes() int64 { return p.appended.Load() }

// Rollback forgets every unsynced batch from base on (its WAL group failed).
func (p *Partition) Rollback(base int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].base >= base })
	if i == len(p.batches) {
		return
	}
	for j := len(p.batches) - 1; j >= i; j-- {
		p.undoTxnLocked(p.batches[j])
	}
	for _, b := range p.batches[i:] {
		if b.pid >= 0 {
			if ps := p.producers[b.pid]; ps != nil && ps.forget(base) {
				delete(p.producers, b.pid)
			}
		}
	}
	p.batches = p.batches[:i]
	p.next = base
	for n := len(p.epochs); n > 0 && p.epochs[n-1].start >= base && n > 1; n-- {
		p.epochs = p.epochs[:n-1]
	}
}

// Collect records a batch found in a WAL while the partition loads; FinishLoad indexes
// the collected batches in offset order. A control batch (a transaction marker) is read
// through src to tell a commit from an abort; one that cannot be read counts as no
// marker, which leaves its transaction open (the last stable offset held, nothing of
// it shown).
func (p *Partition) Collect(h *recbatch.Header, src Reader, pos wal.Pos, size int) {
	var batch []byte
	if h.Control() {
		batch = make([]byte, size)
		if src.ReadAt(batch, pos) != nil {
			batch = nil
		}
	}
	p.collect(h, batch, src, SourceID{}, pos, size)
}

// collect is Collect with the batch's bytes when the caller has them (needed only for a
// control batch).
func (p *Partition) collect(h *recbatch.Header, batch []byte, src Reader, from SourceID, pos wal.Pos, size int) {
	loc := &batchLoc{base: h.BaseOffset, last: h.LastOffset(), epoch: h.LeaderEpoch, maxTS: h.MaxTimestamp, src: src, pos: pos, size: int32(size), synced: true, pid: -1, at: time.Now().UnixNano(),
		from: from, crc: h.CRC, txnPrev: -1}
	loc.kind = txnKindOf(h, batch)
	if h.Idempotent() && (!h.Control() || loc.kind.marker()) {
		loc.pid = h.ProducerID
		loc.pepoch, loc.pseq = h.ProducerEpoch, h.BaseSequence
	}
	p.mu.Lock()
	p.loaded = append(p.loaded, loc)
	p.mu.Unlock()
}

// FinishLoad indexes the collected batches in offset order, rebuilds producer state (on
// top of the manifest's producer snapshot: restoreProducersLocked) and epochs, and
// starts serving.
//
// The collected batches must cover every offset the partition still needs from WALs —
// from the highest of the log start, what object storage holds and the chain's first
// range, up to wantEnd — without a gap. wantEnd is where the ranges read end: the start
// of the range this broker appends to (a graceful move's recorded end), or -1 when the
// end is whatever the WALs hold (a restart reading its own older WALs, or a recovery
// that is determining the end). A scan that came up short (a stale read of a shared
// file system, a damaged record) would otherwise let the partition assign offsets an
// earlier range already holds, so the partition stays Loading, forgets what it collected
// (the caller loads again) and the error says which offsets are missing. acceptGaps is
// an operator's decision to serve despite lost data (the gaps are still returned).
// Without serve the partition stays Loading with its index built (a recovery must first
// record the end it found with the controller); Serve then starts serving.
func (p *Partition) FinishLoad(wantEnd int64, acceptGaps, serve bool) (gaps []string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sort.Slice(p.loaded, func(i, j int) bool { return p.loaded[i].base < p.loaded[j].base })
	// Offsets below need are held by object storage or gone by retention.
	need := max(p.logStart, p.tier.uploaded)
	if len(p.chain) > 0 {
		need = max(need, p.chain[0].Start)
	}
	next := need
	for _, loc := range p.loaded {
		if loc.last < next {
			continue
		}
		if loc.base > next {
			gaps = append(gaps, fmt.Sprintf("[%d, %d)", next, loc.base))
		}
		next = loc.last + 1
	}
	if wantEnd >= 0 && next < wantEnd {
		gaps = append(gaps, fmt.Sprintf("[%d, %d)", next, wantEnd))
	}
	if len(gaps) > 0 && !acceptGaps {
		p.loaded = nil
		return gaps, fmt.Errorf("%w: offsets %v of the chain's WALs are missing", ErrLoadIncomplete, gaps)
	}
	for _, loc := range p.loaded {
		if loc.last < p.next {
			continue // never let offsets move backwards (a batch holding next, e.g. the log start, stays)
		}
		if wantEnd >= 0 && loc.base >= wantEnd {
			break // a later range's offsets, or a fenced writer's unacked tail
		}
		p.addLoc(loc)
	}
	p.restoreProducersLocked(need)
	p.loaded = nil
	if end := max(p.tier.uploaded, wantEnd); end > p.next {
		p.next, p.hw = end, end
	}
	p.dropUploadedLocked(-1, p.own)
	if serve && p.state == Loading {
		p.state = Ready
	}
	return gaps, nil
}

// Serve makes a loaded partition Ready (see FinishLoad).
func (p *Partition) Serve() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Loading {
		p.state = Ready
	}
}

// End is the next offset the partition would assign (after a load: the end of what the
// WALs and objects hold).
func (p *Partition) End() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func (p *Partition) addLoc(loc *batchLoc) {
	p.noteEpoch(loc.epoch, loc.base)
	switch {
	case loc.pid >= 0 && loc.kind.marker():
		p.endTxnLocked(loc)
	case loc.pid >= 0:
		h := recbatch.Header{ProducerID: loc.pid, ProducerEpoch: loc.pepoch, BaseSequence: loc.pseq, LastOffsetDelta: int32(loc.last - loc.base)}
		ps := p.producers[loc.pid]
		if ps == nil {
			ps = &producerState{epoch: loc.pepoch}
			p.setProducer(loc.pid, ps)
		}
		ps.record(&h, loc.base)
		if loc.kind == txnData {
			p.beginTxnLocked(loc)
		}
	}
	if loc.last >= p.logStart {
		p.batches = append(p.batches, loc)
	}
	p.next = loc.last + 1
	p.hw = p.next
}

// SetLogStart drops index entries wholly below offset.
func (p *Partition) SetLogStart(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLogStartLocked(offset)
}

func (p *Partition) setLogStartLocked(offset int64) {
	if offset <= p.logStart {
		return
	}
	p.logStart = offset
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= offset })
	p.batches = append([]*batchLoc(nil), p.batches[i:]...)
	p.pruneAbortedLocked()
	if p.next < offset {
		// DeleteRecords never goes past the high watermark; this guards a metadata store
		// that knows more than the local log (e.g. after the WAL was cut at a torn record).
		p.next, p.hw = offset, offset
	}
}

// checkEpochLocked validates a request's current leader epoch (-1 means "don't check").
func (p *Partition) checkEpochLocked(current int32) error {
	switch {
	case current < 0 || current == p.leaderEpoch:
		return nil
	case current < p.leaderEpoch:
		return ErrFencedEpoch
	default:
		return ErrUnknownEpoch
	}
}

// CheckEpoch validates a request's current leader epoch (-1 means "don't check"):
// ErrFencedEpoch or ErrUnknownEpoch when the client's view differs.
func (p *Partition) CheckEpoch(current int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkEpochLocked(current)
}

// Offsets returns the log start and the high watermark.
func (p *Partition) Offsets() (logStart, hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logStart, p.hw
}

// Progress returns the state, the next offset to assign and the high watermark: a
// hand-off may report its end once next == hw (every prepared batch synced or rolled
// back).
func (p *Partition) Progress() (st State, next, hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.next, p.hw
}

// LeaderEpoch returns the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderEpoch
}

// Wait registers c to be signalled at the next high-watermark advance (or drop).
func (p *Partition) Wait(c chan struct{}) {
	p.mu.Lock()
	p.waiters = append(p.waiters, c)
	p.mu.Unlock()
}

// Unwait removes c from the waiters, so idle partitions do not accumulate stale channels
// from repeated long polls.
func (p *Partition) Unwait(c chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.waiters {
		if w == c {
			p.waiters[i] = p.waiters[len(p.waiters)-1]
			p.waiters = p.waiters[:len(p.waiters)-1]
			return
		}
	}
}

// Piece is one part of a read: cached bytes, or Size bytes at Pos in Src. When Objs is
// set it is the only piece: the offset lives in object storage only, in Objs[0] (and the
// partition continues in the rest).
type Piece struct {
	Data []byte
	Src  Reader
	Pos  wal.Pos
	Size int32
	Objs []objread.ObjectRef
	loc  *batchLoc // for Cache.Fill
}

// Read locates the synced batches from offset on (the batch that contains it first), up
// to maxBytes but at least one batch when minOne (KIP-74). current is the request's
// leader epoch (-1: unchecked).
func (p *Partition) Read(offset int64, maxBytes int, minOne bool, current int32) (pieces []Piece, hw, logStart int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pieces, err = p.readLocked(offset, maxBytes, minOne, current, p.hw)
	return pieces, p.hw, p.logStart, err
}

// ReadCommitted is Read for a read_committed consumer: no batch at or above the last
// stable offset, which it returns too. Objects may hold batches past it (an open
// transaction's data is uploaded like any other): what they return must be cut there
// (recbatch.Below). The aborted transactions to list with the batches are Aborted's.
func (p *Partition) ReadCommitted(offset int64, maxBytes int, minOne bool, current int32) (pieces []Piece, hw, lso, logStart int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lso = p.lsoLocked()
	pieces, err = p.readLocked(offset, maxBytes, minOne, current, lso)
	return pieces, p.hw, lso, p.logStart, err
}

// readLocked is Read's work, with no batch from end on.
func (p *Partition) readLocked(offset int64, maxBytes int, minOne bool, current int32, end int64) (pieces []Piece, err error) {
	if p.state == Loading || p.state == Gone {
		return nil, ErrNotLeader
	}
	if err := p.checkEpochLocked(current); err != nil {
		return nil, err
	}
	if offset > p.hw && offset >= p.logStart && p.state == Following {
		return nil, ErrReplicaBehind
	}
	if offset < p.logStart || offset > p.hw {
		return nil, ErrOffsetOutOfRange
	}
	if offset >= end {
		return nil, nil
	}
	if refs := p.objectsForLocked(offset); refs != nil {
		return []Piece{{Objs: refs}}, nil
	}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= offset })
	total := 0
	for ; i < len(p.batches); i++ {
		b := p.batches[i]
		if !b.synced || b.base >= end {
			break
		}
		if total+int(b.size) > maxBytes && !(minOne && total == 0) {
			break
		}
		pieces = append(pieces, Piece{Data: b.data, Src: b.src, Pos: b.pos, Size: b.size, loc: b})
		total += int(b.size)
	}
	return pieces, nil
}

// Batch is a copy of one index entry, for reading a partition's whole indexed log.
type Batch struct {
	Base int64
	Data []byte // cached bytes, or nil: read Size bytes at Pos from Src
	Src  Reader
	Pos  wal.Pos
	Size int32
}

// Batches returns the synced batches the index holds, in offset order.
func (p *Partition) Batches() []Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Batch, 0, len(p.batches))
	for _, b := range p.batches {
		if !b.synced {
			break
		}
		out = append(out, Batch{Base: b.base, Data: b.data, Src: b.src, Pos: b.pos, Size: b.size})
	}
	return out
}

// OffsetForTime finds the first indexed batch whose max timestamp is >= ts. Timestamps
// are kept per batch, so the answer is the batch's base offset: it may be a few records
// early, never late, so a consumer seeking by time misses nothing.
func (p *Partition) OffsetForTime(ts int64) (offset int64, batchTS int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.batches {
		if !b.synced || b.base >= p.hw {
			break
		}
		if b.maxTS >= ts {
			off := b.base
			if off < p.logStart {
				off = p.logStart
			}
			return off, b.maxTS, true
		}
	}
	return -1, -1, false
}

// MaxTimestamp returns the offset and timestamp of the batch with the largest max
// timestamp (per object for data only objects hold: the range's last offset).
func (p *Partition) MaxTimestamp() (int64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ts := int64(-1), int64(-1)
	for _, o := range p.tier.objs {
		if o.maxTS > ts && o.ref.LastOffset >= p.logStart {
			off, ts = o.ref.LastOffset, o.maxTS
		}
	}
	for _, b := range p.batches {
		if !b.synced || b.base >= p.hw {
			break
		}
		if b.maxTS > ts {
			off, ts = b.last, b.maxTS
		}
	}
	return off, ts
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= e and the offset
// where the next epoch begins (or the log end for the latest one).
func (p *Partition) EndOffsetForEpoch(e int32) (int32, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e > p.leaderEpoch {
		return -1, -1
	}
	if e == p.leaderEpoch {
		return e, p.hw
	}
	idx := -1
	for i, es := range p.epochs {
		if es.epoch <= e {
			idx = i
		}
	}
	if idx < 0 {
		// Older than anything we hold: Kafka answers with the requested epoch and the
		// first offset we have.
		if len(p.epochs) == 0 {
			// Nothing indexed (all of it in objects): the epoch ended at or below the
			// high watermark, and Weir never truncates, so the end is not understated.
			return e, p.hw
		}
		return e, p.epochs[0].start
	}
	if idx == len(p.epochs)-1 {
		return p.epochs[idx].epoch, p.hw
	}
	return p.epochs[idx].epoch, p.epochs[idx+1].start
}
