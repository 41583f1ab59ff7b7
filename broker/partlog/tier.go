package partlog

import (
	"slices"
	"sort"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objread"
	"github.com/weir-io/weir/wal"
)

// A partition's data lives in three places, newest first: the tail cache, the WALs of its
// log chain (the batch index), and object storage (its manifest). The uploader moves
// synced batches into objects and commits them to the manifest; the WAL is trimmed only
// below batches every partition has uploaded, and index entries are dropped only when
// their WAL bytes may disappear. Reads below the first indexed batch go to objects.
//
//	offsets:  logStart ........ uploaded ............. next
//	objects:  [========= manifest =====)
//	index:               [====== batches (WAL) ==========)
//
// The two overlap until the WAL is trimmed; the index wins where both hold an offset.

// tierState is a partition's object-storage side, guarded by Partition.mu.
type tierState struct {
	enabled  bool      // the broker has an object store
	uploaded int64     // first offset object storage does not hold; -1: it holds none
	objs     []TierObj // the manifest, ascending and contiguous (gaps only below logStart)
	// snap is the producer snapshot the manifest carries (as of uploaded when current),
	// from the view that set objs; a load starts from it (restoreProducersLocked).
	snap *metadata.ProducerSnapshot
	// abortedThrough: the aborted transactions of the manifest's ranges below it are
	// in the partition's index (mergeAbortedLocked).
	abortedThrough int64
}

// TierObj is one object range of a partition's manifest.
type TierObj struct {
	id    uint64
	ref   objread.ObjectRef
	maxTS int64
	bytes int64
}

// Ref is where the range lives, for objread.
func (o TierObj) Ref() objread.ObjectRef { return o.ref }

// applyManifestLocked takes the manifest from a metadata view. A view older than this
// broker's own last commit (the watch lags the commit) only drops what retention removed.
func (p *Partition) applyManifestLocked(mp metadata.Partition, v *metadata.View) {
	through := mp.UploadedThrough()
	if through >= p.tier.uploaded {
		objs := make([]TierObj, 0, len(mp.Objects))
		for _, r := range mp.Objects {
			objs = append(objs, tierObjOf(r, v))
		}
		p.tier.objs, p.tier.uploaded, p.tier.snap = objs, through, mp.Producers
		if compacted(mp.Objects) {
			p.resetAbortedBelowLocked(through)
		}
		p.mergeAbortedLocked(mp.Objects)
		if p.state != Loading {
			p.dropUploadedLocked(-1, p.own) // an earlier leader uploaded them
		}
		return
	}
	i := 0
	for i < len(p.tier.objs) && p.tier.objs[i].ref.LastOffset < mp.LogStartOffset {
		i++
	}
	p.tier.objs = p.tier.objs[i:]
}

// compacted reports whether the log cleaner rewrote any of the ranges.
func compacted(objs []metadata.ObjectRange) bool {
	for _, r := range objs {
		if r.Compacted {
			return true
		}
	}
	return false
}

// resetAbortedBelowLocked forgets the aborted transactions whose markers lie below end
// so that the manifest's ranges (mergeAbortedLocked) set them again: the log cleaner
// removes abort markers, and an entry whose marker is gone would make read_committed
// consumers skip the producer's later transactions (they drop its batches until they
// see its abort marker).
func (p *Partition) resetAbortedBelowLocked(end int64) {
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last >= end })
	p.aborted = slices.Delete(p.aborted, 0, i)
	p.tier.abortedThrough = 0
}

func tierObjOf(r metadata.ObjectRange, v *metadata.View) TierObj {
	key, size := metadata.ObjectKey(r.Object), int64(0)
	if o, ok := v.Object(r.Object); ok {
		key, size = o.Key, o.Size
	}
	return NewTierObj(r, key, size)
}

// NewTierObj describes a committed object range of key (size bytes).
func NewTierObj(r metadata.ObjectRange, key string, size int64) TierObj {
	return TierObj{id: r.Object, maxTS: r.MaxTimestamp, bytes: r.Bytes,
		ref: objread.ObjectRef{Key: key, Size: size, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset}}
}

// MaxObjectRefs bounds the manifest slice handed to one read (readahead looks this far).
const MaxObjectRefs = 4

// objectsForLocked returns the manifest from the object holding offset on, when offset is
// in object storage only (below the first indexed batch); nil when the index serves it.
func (p *Partition) objectsForLocked(offset int64) []objread.ObjectRef {
	if !p.tier.enabled || offset >= p.tier.uploaded {
		return nil
	}
	if len(p.batches) > 0 && p.batches[0].base <= offset {
		return nil
	}
	objs := p.tier.objs
	i := sort.Search(len(objs), func(i int) bool { return objs[i].ref.LastOffset >= offset })
	if i == len(objs) || objs[i].ref.FirstOffset > offset {
		return nil
	}
	out := make([]objread.ObjectRef, 0, min(len(objs)-i, MaxObjectRefs))
	for _, o := range objs[i:min(len(objs), i+MaxObjectRefs)] {
		out = append(out, o.ref)
	}
	return out
}

// UpPiece is one batch to upload, copied out of the index under the partition lock.
type UpPiece struct {
	Base, Last, MaxTS int64
	Src               Reader
	Pos               wal.Pos
	Size              int32
	Data              []byte
	At                int64 // when it was synced (unix ns)
	Abort             bool  // an abort marker that ended a transaction (one of the range's Aborted)
}

// PendingUpload returns the synced batches not in object storage yet, dense from where
// the manifest ends, up to maxBytes (at least one batch) and metadata.MaxRangeAborted
// abort markers. None while the partition is loading or gone: its index is incomplete.
func (p *Partition) PendingUpload(maxBytes int64) (pieces []UpPiece, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Ready && p.state != Closing {
		return nil, 0
	}
	up := p.tier.uploaded
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= up })
	if i == len(p.batches) {
		return nil, 0
	}
	// The manifest must continue: at `uploaded`, or anywhere up to the log start (offsets
	// below it need not be stored anywhere).
	first := p.batches[i].base
	if up >= 0 && first != up && first > p.logStart || up < 0 && first > max(0, p.logStart) {
		return nil, 0
	}
	next := first
	aborts := 0
	for _, b := range p.batches[i:] {
		if !b.synced || b.base >= p.hw || b.base != next {
			break
		}
		if bytes > 0 && bytes+int64(b.size) > maxBytes {
			break
		}
		abort := b.kind == txnAbort && b.txnPrev >= 0
		if abort {
			if aborts == metadata.MaxRangeAborted {
				break
			}
			aborts++
		}
		pieces = append(pieces, UpPiece{Base: b.base, Last: b.last, MaxTS: b.maxTS, Src: b.src, Pos: b.pos, Size: b.size, Data: b.data, At: b.at, Abort: abort})
		bytes += int64(b.size)
		next = b.last + 1
	}
	return pieces, bytes
}

// Pending returns the bytes of synced batches not in object storage yet and when the
// oldest of them was synced (zero: none).
func (p *Partition) Pending() (bytes int64, oldest time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingLocked()
}

func (p *Partition) pendingLocked() (bytes int64, oldest time.Time) {
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= p.tier.uploaded })
	for _, b := range p.batches[i:] {
		if !b.synced {
			break
		}
		if bytes == 0 {
			oldest = time.Unix(0, b.at)
		}
		bytes += int64(b.size)
	}
	return bytes, oldest
}

// Uploaded is the first offset object storage does not hold (-1: it holds none).
func (p *Partition) Uploaded() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tier.uploaded
}

// MarkUploaded records a committed object range and drops index entries of other
// brokers' WALs below it (their owners may trim them from now on). own is this broker's
// WAL.
func (p *Partition) MarkUploaded(o TierObj, own Reader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.ref.LastOffset < p.tier.uploaded {
		return // the view got here first
	}
	p.tier.objs = append(p.tier.objs, o)
	p.tier.uploaded = o.ref.LastOffset + 1
	p.dropUploadedLocked(-1, own)
}

// DropUploaded drops the index prefix that object storage holds and whose WAL bytes may
// go: batches of other brokers' WALs, and of own below trimAt.
func (p *Partition) DropUploaded(trimAt wal.Pos, own Reader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropUploadedLocked(trimAt, own)
}

func (p *Partition) dropUploadedLocked(trimAt wal.Pos, own Reader) {
	n := 0
	for _, b := range p.batches {
		if b.last >= p.tier.uploaded || !b.synced {
			break
		}
		// Only batch bytes in this broker's WAL stay indexed until it trims them; a linked
		// batch's entry goes once uploaded (its link record in this WAL is not read
		// again, and the proxy may let the bytes go).
		if b.src == own && b.pos >= trimAt {
			break
		}
		n++
	}
	if n > 0 {
		p.batches = append([]*batchLoc(nil), p.batches[n:]...)
	}
}

// WALNeed is the lowest position of own (this broker's WAL) that the partition still
// needs: its first batch there that object storage does not hold. ok is false when it
// needs none.
func (p *Partition) WALNeed(own Reader) (pos wal.Pos, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := p.tier.uploaded
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= up })
	for _, b := range p.batches[i:] {
		if !b.synced {
			break // unsynced batches lie past the WAL's end
		}
		if at, ok := b.ownPos(own); ok {
			return at, true
		}
	}
	return 0, false
}

// ObjectsForTime returns the manifest slice to search for the first batch at or after
// ts when the index cannot answer it (the data is in objects only), and the log start.
func (p *Partition) ObjectsForTime(ts int64) (refs []objread.ObjectRef, logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.tier.objs {
		if len(p.batches) > 0 && o.ref.FirstOffset >= p.batches[0].base {
			break // the index has it with per-batch timestamps
		}
		if o.maxTS >= ts && o.ref.LastOffset >= p.logStart {
			for _, r := range p.tier.objs[i:min(len(p.tier.objs), i+MaxObjectRefs)] {
				refs = append(refs, r.ref)
			}
			break
		}
	}
	return refs, p.logStart
}

// ObjectSpan returns the offsets only object storage holds, [from, end) (from the log
// start to the first indexed batch), and the whole manifest.
func (p *Partition) ObjectSpan() (from, end int64, refs []objread.ObjectRef) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from, end = p.logStart, p.tier.uploaded
	if len(p.batches) > 0 {
		end = min(end, p.batches[0].base)
	}
	for _, o := range p.tier.objs {
		refs = append(refs, o.ref)
	}
	return from, end, refs
}

// RetentionStart returns the new log start retention asks for (retention.ms ms,
// retention.bytes limit; -1 each: none), or 0 for none. It acts on whole object ranges
// and never on data still only in the WAL.
func (p *Partition) RetentionStart(nowMs, ms, limit int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Ready {
		return 0
	}
	var start int64
	if ms >= 0 {
		for _, o := range p.tier.objs {
			if o.maxTS < 0 || o.maxTS >= nowMs-ms {
				break
			}
			start = o.ref.LastOffset + 1
		}
	}
	if limit >= 0 {
		size, _ := p.pendingLocked()
		for _, o := range p.tier.objs {
			size += o.bytes
		}
		for _, o := range p.tier.objs {
			if size-o.bytes < limit {
				break
			}
			size -= o.bytes
			start = max(start, o.ref.LastOffset+1)
		}
	}
	if start <= p.logStart {
		return 0
	}
	return start
}
