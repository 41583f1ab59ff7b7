package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objfmt"
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

// tierState is a partition's object-storage side, guarded by partition.mu.
type tierState struct {
	enabled  bool      // the broker has an object store
	uploaded int64     // first offset object storage does not hold; -1: it holds none
	objs     []tierObj // the manifest, ascending and contiguous (gaps only below logStart)
}

type tierObj struct {
	id    uint64
	ref   objread.ObjectRef
	maxTS int64
	bytes int64
}

// applyManifestLocked takes the manifest from a metadata view. A view older than this
// broker's own last commit (the watch lags the commit) only drops what retention removed.
func (p *partition) applyManifestLocked(mp metadata.Partition, v *metadata.View) {
	through := mp.UploadedThrough()
	if through >= p.tier.uploaded {
		objs := make([]tierObj, 0, len(mp.Objects))
		for _, r := range mp.Objects {
			objs = append(objs, tierObjOf(r, v))
		}
		p.tier.objs, p.tier.uploaded = objs, through
		return
	}
	i := 0
	for i < len(p.tier.objs) && p.tier.objs[i].ref.LastOffset < mp.LogStartOffset {
		i++
	}
	p.tier.objs = p.tier.objs[i:]
}

func tierObjOf(r metadata.ObjectRange, v *metadata.View) tierObj {
	key, size := metadata.ObjectKey(r.Object), int64(0)
	if o, ok := v.Object(r.Object); ok {
		key, size = o.Key, o.Size
	}
	return newTierObj(r, key, size)
}

func newTierObj(r metadata.ObjectRange, key string, size int64) tierObj {
	return tierObj{id: r.Object, maxTS: r.MaxTimestamp, bytes: r.Bytes,
		ref: objread.ObjectRef{Key: key, Size: size, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset}}
}

// maxObjectRefs bounds the manifest slice handed to one read (readahead looks this far).
const maxObjectRefs = 4

// objectsForLocked returns the manifest from the object holding offset on, when offset is
// in object storage only (below the first indexed batch); nil when the index serves it.
func (p *partition) objectsForLocked(offset int64) []objread.ObjectRef {
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
	out := make([]objread.ObjectRef, 0, min(len(objs)-i, maxObjectRefs))
	for _, o := range objs[i:min(len(objs), i+maxObjectRefs)] {
		out = append(out, o.ref)
	}
	return out
}

// upPiece is one batch to upload, copied out of the index under the partition lock.
type upPiece struct {
	base, last, maxTS int64
	src               logReader
	pos               wal.Pos
	size              int32
	data              []byte
	at                int64 // when it was synced (unix ns)
}

// pendingUpload returns the synced batches not in object storage yet, dense from where
// the manifest ends, up to maxBytes (at least one batch). None while the partition is
// loading or gone: its index is incomplete.
func (p *partition) pendingUpload(maxBytes int64) (pieces []upPiece, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != partReady && p.state != partClosing {
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
	for _, b := range p.batches[i:] {
		if !b.synced || b.base >= p.hw || b.base != next {
			break
		}
		if bytes > 0 && bytes+int64(b.size) > maxBytes {
			break
		}
		pieces = append(pieces, upPiece{base: b.base, last: b.last, maxTS: b.maxTS, src: b.src, pos: b.pos, size: b.size, data: b.data, at: b.at})
		bytes += int64(b.size)
		next = b.last + 1
	}
	return pieces, bytes
}

// pendingLocked returns the bytes of synced batches not in object storage yet and when
// the oldest of them was synced (zero: none).
func (p *partition) pendingLocked() (bytes int64, oldest time.Time) {
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

// markUploaded records a committed object range and drops index entries of other
// brokers' WALs below it (their owners may trim them from now on).
func (p *partition) markUploaded(o tierObj, own logReader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.ref.LastOffset < p.tier.uploaded {
		return // the view got here first
	}
	p.tier.objs = append(p.tier.objs, o)
	p.tier.uploaded = o.ref.LastOffset + 1
	p.dropUploadedLocked(-1, own)
}

// dropUploadedLocked drops the index prefix that object storage holds and whose WAL
// bytes may go: batches of other brokers' WALs, and of our own below trimAt.
func (p *partition) dropUploadedLocked(trimAt wal.Pos, own logReader) {
	n := 0
	for _, b := range p.batches {
		if b.last >= p.tier.uploaded || !b.synced || (b.src == own && b.pos >= trimAt) {
			break
		}
		n++
	}
	if n > 0 {
		p.batches = append([]*batchLoc(nil), p.batches[n:]...)
	}
}

// walNeed is the lowest position of this broker's WAL that the partition still needs:
// its first batch there that object storage does not hold. ok is false when it needs
// none.
func (p *partition) walNeed(own logReader) (pos wal.Pos, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := p.tier.uploaded
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= up })
	for _, b := range p.batches[i:] {
		if !b.synced {
			break // unsynced batches lie past the WAL's end
		}
		if b.src == own {
			return b.pos, true
		}
	}
	return 0, false
}

// offsetForTime is partition.offsetForTime over objects too: the first object whose
// newest batch is at or after ts is searched through its index (block granularity, so
// the answer may be a little early, never late).
func (b *Broker) offsetForTime(p *partition, ts int64) (offset, batchTS int64, ok bool) {
	p.mu.Lock()
	var refs []objread.ObjectRef
	for i, o := range p.tier.objs {
		if len(p.batches) > 0 && o.ref.FirstOffset >= p.batches[0].base {
			break // the index has it with per-batch timestamps
		}
		if o.maxTS >= ts && o.ref.LastOffset >= p.logStart {
			for _, r := range p.tier.objs[i:min(len(p.tier.objs), i+maxObjectRefs)] {
				refs = append(refs, r.ref)
			}
			break
		}
	}
	logStart := p.logStart
	p.mu.Unlock()
	if refs != nil {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		off, mts, found, err := b.objReader.OffsetForTimestamp(ctx, p.id, p.index, ts, refs)
		cancel()
		if err == nil && found {
			return max(off, logStart), mts, true
		}
		if err != nil {
			b.log.Warn("offset for timestamp: object index read failed", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
	return p.offsetForTime(ts)
}

// readObjectBatches calls fn, in offset order, for each batch of p that only object
// storage holds (from the log start to the first indexed batch).
func (b *Broker) readObjectBatches(p *partition, fn func(base int64, batch []byte)) error {
	p.mu.Lock()
	offset, end := p.logStart, p.tier.uploaded
	if len(p.batches) > 0 {
		end = min(end, p.batches[0].base)
	}
	var all []objread.ObjectRef
	for _, o := range p.tier.objs {
		all = append(all, o.ref)
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	for offset < end {
		i := sort.Search(len(all), func(i int) bool { return all[i].LastOffset >= offset })
		if i == len(all) {
			return nil
		}
		offset = max(offset, all[i].FirstOffset)
		data, err := b.objReader.Read(ctx, p.id, p.index, offset, 8<<20, all[i:min(len(all), i+maxObjectRefs)])
		if err != nil {
			return err
		}
		batches, err := objfmt.SplitBatches(data)
		if err != nil {
			return fmt.Errorf("broker: object data at offset %d: %w", offset, err)
		}
		for _, bt := range batches {
			if bt.LastOffset >= offset && bt.BaseOffset < end {
				fn(bt.BaseOffset, bt.Data)
			}
			offset = max(offset, bt.LastOffset+1)
		}
	}
	return nil
}
