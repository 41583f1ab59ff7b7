package broker

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objread"
	"github.com/weir-io/weir/wal"
)

// A partition's log is an index of batch locations in the broker's WAL plus a tail cache of
// their bytes. Offsets are assigned by prepare, which the WAL's committer calls in log order,
// so offset order equals WAL order; a batch becomes readable only when its group is synced
// (commit), which advances the high watermark. A failed WAL write rolls the partition back
// (rollback) before any later batch is prepared, so offsets stay dense.

var (
	errNotLeader        = errors.New("broker: not the leader of this partition")
	errOffsetOutOfRange = errors.New("broker: offset out of range")
	errFencedEpoch      = errors.New("broker: fenced leader epoch")
	errUnknownEpoch     = errors.New("broker: unknown leader epoch")
)

// logReader reads batch bytes from a WAL: this broker's own, or another broker's on the
// shared file system for data written before a leadership move.
type logReader interface {
	ReadAt(p []byte, pos wal.Pos) error
}

type batchLoc struct {
	base, last int64
	epoch      int32
	maxTS      int64
	src        logReader
	pos        wal.Pos // position of the batch bytes in src (valid once synced)
	size       int32
	data       []byte // tail cache; nil once evicted
	synced     bool
	at         int64 // when it was synced or loaded (unix ns): upload lag
	// producer fields kept for state rebuilding and rollback
	pid    int64
	pepoch int16
	pseq   int32
}

type epochStart struct {
	epoch int32
	start int64
}

// partState is where a partition is in its life on this broker.
type partState int

const (
	partLoading partState = iota // reading its data from the WALs of its log chain
	partReady                    // leading: appends and reads served
	partClosing                  // handing off to another broker: no new appends
	partGone                     // no longer led here
)

type partition struct {
	topic string
	id    metadata.TopicID
	index int32

	mu          sync.Mutex
	state       partState
	chain       []logRange  // where this partition's data lives, oldest first
	loaded      []*batchLoc // collected while loading, indexed by finishLoad
	batches     []*batchLoc // ascending offsets; the tail may hold unsynced batches
	logStart    int64
	next        int64 // next offset to assign
	hw          int64 // every offset below is synced and readable
	leaderEpoch int32
	epochs      []epochStart
	producers   map[int64]*producerState
	waiters     []chan struct{}
	tier        tierState // what object storage holds (partition_tier.go)
}

func newPartition(topic string, id metadata.TopicID, index int32, epoch int32, logStart int64) *partition {
	return &partition{topic: topic, id: id, index: index, leaderEpoch: epoch, logStart: logStart, next: logStart, hw: logStart, producers: map[int64]*producerState{}, state: partLoading, tier: tierState{uploaded: -1}}
}

// prepareResult is what prepare decided about one batch.
type prepareResult struct {
	loc *batchLoc
	dup *errDuplicate
}

// prepare assigns offsets to batch (rewriting it in place) or recognises an idempotent
// retry. Called by the WAL committer in log order.
func (p *partition) prepare(h *batchHeader, batch []byte, logAppendTimeMs int64) (prepareResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != partReady {
		return prepareResult{}, errNotLeader
	}
	var ps *producerState
	if h.idempotent() {
		ps = p.producers[h.ProducerID]
		if err := checkSequence(ps, h); err != nil {
			var dup *errDuplicate
			if errors.As(err, &dup) {
				return prepareResult{dup: dup}, nil
			}
			return prepareResult{}, err
		}
	}
	base := p.next
	setBatchOffsetEpoch(batch, base, p.leaderEpoch)
	maxTS := h.MaxTimestamp
	if logAppendTimeMs >= 0 {
		setLogAppendTime(batch, logAppendTimeMs)
		maxTS = logAppendTimeMs
	}
	loc := &batchLoc{base: base, last: base + int64(h.LastOffsetDelta), epoch: p.leaderEpoch, maxTS: maxTS, size: int32(len(batch)), data: batch, pid: -1}
	// src is set at commit, when the position is known.
	p.noteEpoch(p.leaderEpoch, base)
	if h.idempotent() {
		if ps == nil {
			ps = &producerState{epoch: h.ProducerEpoch}
			p.producers[h.ProducerID] = ps
		}
		ps.record(h, base)
		loc.pid = h.ProducerID
	}
	p.batches = append(p.batches, loc)
	p.next = loc.last + 1
	return prepareResult{loc: loc}, nil
}

func (p *partition) noteEpoch(epoch int32, start int64) {
	if n := len(p.epochs); n == 0 || p.epochs[n-1].epoch < epoch {
		p.epochs = append(p.epochs, epochStart{epoch: epoch, start: start})
	}
}

// commit makes a prepared batch readable once its WAL group is synced.
func (p *partition) commit(loc *batchLoc, src logReader, pos wal.Pos) {
	p.mu.Lock()
	loc.src, loc.pos = src, pos
	loc.synced = true
	loc.at = time.Now().UnixNano()
	if loc.last+1 > p.hw {
		p.hw = loc.last + 1
	}
	w := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	for _, c := range w {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// rollback forgets every unsynced batch from base on (its WAL group failed).
func (p *partition) rollback(base int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].base >= base })
	if i == len(p.batches) {
		return
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

// collect records a batch found in a WAL while the partition loads; finishLoad indexes
// the collected batches in offset order.
func (p *partition) collect(h *batchHeader, src logReader, pos wal.Pos, size int) {
	loc := &batchLoc{base: h.BaseOffset, last: h.BaseOffset + int64(h.LastOffsetDelta), epoch: h.LeaderEpoch, maxTS: h.MaxTimestamp, src: src, pos: pos, size: int32(size), synced: true, pid: -1, at: time.Now().UnixNano()}
	if h.idempotent() {
		loc.pid = h.ProducerID
		loc.pepoch, loc.pseq = h.ProducerEpoch, h.BaseSequence
	}
	p.mu.Lock()
	p.loaded = append(p.loaded, loc)
	p.mu.Unlock()
}

// finishLoad indexes the collected batches in offset order, rebuilds producer state and
// epochs, and starts serving. It returns the gaps found (offsets no WAL had), which only
// a lost or damaged WAL can cause.
func (p *partition) finishLoad() (gaps []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sort.Slice(p.loaded, func(i, j int) bool { return p.loaded[i].base < p.loaded[j].base })
	for _, loc := range p.loaded {
		if loc.base < p.next {
			continue // never let offsets move backwards
		}
		// Offsets below what object storage holds need not be in any WAL.
		if loc.base > p.next && loc.base > p.logStart && loc.base > p.tier.uploaded {
			gaps = append(gaps, fmt.Sprintf("[%d, %d)", max(p.next, p.tier.uploaded), loc.base))
		}
		p.addLoc(loc)
	}
	p.loaded = nil
	if p.tier.uploaded > p.next {
		p.next, p.hw = p.tier.uploaded, p.tier.uploaded
	}
	if p.state == partLoading {
		p.state = partReady
	}
	return gaps
}

func (p *partition) addLoc(loc *batchLoc) {
	p.noteEpoch(loc.epoch, loc.base)
	if loc.pid >= 0 {
		h := batchHeader{ProducerID: loc.pid, ProducerEpoch: loc.pepoch, BaseSequence: loc.pseq, LastOffsetDelta: int32(loc.last - loc.base)}
		ps := p.producers[loc.pid]
		if ps == nil {
			ps = &producerState{epoch: loc.pepoch}
			p.producers[loc.pid] = ps
		}
		ps.record(&h, loc.base)
	}
	if loc.last >= p.logStart {
		p.batches = append(p.batches, loc)
	}
	p.next = loc.last + 1
	p.hw = p.next
}

// setLogStart drops index entries wholly below offset.
func (p *partition) setLogStart(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLogStartLocked(offset)
}

func (p *partition) setLogStartLocked(offset int64) {
	if offset <= p.logStart {
		return
	}
	p.logStart = offset
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= offset })
	p.batches = append([]*batchLoc(nil), p.batches[i:]...)
	if p.next < offset {
		// DeleteRecords never goes past the high watermark; this guards a metadata store
		// that knows more than the local log (e.g. after the WAL was cut at a torn record).
		p.next, p.hw = offset, offset
	}
}

// checkEpoch validates a request's current leader epoch (-1 means "don't check").
func (p *partition) checkEpochLocked(current int32) error {
	switch {
	case current < 0 || current == p.leaderEpoch:
		return nil
	case current < p.leaderEpoch:
		return errFencedEpoch
	default:
		return errUnknownEpoch
	}
}

// offsets returns log start, high watermark and the next offset.
func (p *partition) offsets() (logStart, hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logStart, p.hw
}

// wait registers c to be signalled at the next high-watermark advance.
func (p *partition) wait(c chan struct{}) {
	p.mu.Lock()
	p.waiters = append(p.waiters, c)
	p.mu.Unlock()
}

// readSpan collects the synced batches from offset on, up to maxBytes (but at least one
// batch when minOne). It returns copies of cached data or locations to read from the WAL.
type readPiece struct {
	data []byte // cached bytes, or nil: read size bytes at pos from src
	src  logReader
	pos  wal.Pos
	size int32
	// objs, when set, is the only piece: the offset lives in object storage only, in
	// objs[0] (and the partition continues in the rest).
	objs []objread.ObjectRef
}

func (p *partition) read(offset int64, maxBytes int, minOne bool, current int32) (pieces []readPiece, hw, logStart int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hw, logStart = p.hw, p.logStart
	if p.state == partLoading || p.state == partGone {
		return nil, hw, logStart, errNotLeader
	}
	if err := p.checkEpochLocked(current); err != nil {
		return nil, hw, logStart, err
	}
	if offset < p.logStart || offset > p.hw {
		return nil, hw, logStart, errOffsetOutOfRange
	}
	if refs := p.objectsForLocked(offset); refs != nil {
		return []readPiece{{objs: refs}}, hw, logStart, nil
	}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= offset })
	total := 0
	for ; i < len(p.batches); i++ {
		b := p.batches[i]
		if !b.synced || b.base >= p.hw {
			break
		}
		if total+int(b.size) > maxBytes && !(minOne && total == 0) {
			break
		}
		pieces = append(pieces, readPiece{data: b.data, src: b.src, pos: b.pos, size: b.size})
		total += int(b.size)
	}
	return pieces, hw, logStart, nil
}

// offsetForTime finds the first batch whose max timestamp is >= ts. Timestamps are kept
// per batch, so the answer is the batch's base offset: it may be a few records early,
// never late, so a consumer seeking by time misses nothing.
func (p *partition) offsetForTime(ts int64) (offset int64, batchTS int64, ok bool) {
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

// maxTimestamp returns the offset and timestamp of the batch with the largest max timestamp.
func (p *partition) maxTimestamp() (int64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ts := int64(-1), int64(-1)
	for _, o := range p.tier.objs {
		if o.maxTS > ts && o.ref.LastOffset >= p.logStart {
			off, ts = o.ref.LastOffset, o.maxTS // per object: the range's last offset
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

// endOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <= e and the offset
// where the next epoch begins (or the log end for the latest one).
func (p *partition) endOffsetForEpoch(e int32) (int32, int64) {
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
			return p.leaderEpoch, p.hw
		}
		return e, p.epochs[0].start
	}
	if idx == len(p.epochs)-1 {
		return p.epochs[idx].epoch, p.hw
	}
	return p.epochs[idx].epoch, p.epochs[idx+1].start
}
