package tier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// The uploader moves synced batches out of the WAL into objects: when the pending bytes
// of the partitions this broker leads reach TargetObjectBytes, or the oldest pending batch
// is MaxUploadDelay old, or the WAL nears its bound. An object gathers many partitions,
// largest first, up to MaxObjectBytes (a partition with that much pending fills one
// alone); S3 bills per request, so few large objects beat one per partition
// (uploadOnce). Each object is
//
//	PrepareObject (an ID and key under this broker's epoch) → PUT → CommitObject (one
//	range per partition, each continuing its manifest) → trim the WAL
//
// Every PUT attempt of the uploader gets a key of its own: a failed PUT abandons its
// prepared ID, and the data stays in the WAL for the next object, prepared anew. A key is
// never reused once a PUT to it may have been sent: a request that timed out after its
// body was sent can still land at the server later, and had the next, different object
// gone to the same key, that late PUT would replace bytes a committed manifest names
// (with the WAL trimmed, the records would exist nowhere else). Retrying's own retries
// of one Put resend the same bytes to the same key, which is harmless.
//
// Before the commit the uploader checks the stored object (objectstore.Verify: HEAD,
// and its size); the s3 store sends Content-MD5, so the server refuses a body that
// differs from the one written. A mismatch is a failed PUT: the key is abandoned.
//
// An abandoned prepared ID is garbage: no upload uses it (it leaves Tier.inflight), so
// the broker's own collection forgets it and deletes its key (forgetOwnPrepared, after
// two collections); a late PUT that lands after that is a stray key, which
// sweepStrayKeys deletes (its ID is below a newer one). A refused commit leaves a
// prepared object that is collected the same way. Nothing is dropped from the WAL
// before its commit.
//
// Each range carries the partition's idempotent producer state as of its last offset
// (partlog.Partition.ProducerSnapshot): once the WAL is trimmed, that snapshot is all a
// later leader has to recognise a retried batch. Likewise each range carries the aborted
// transactions whose markers it holds (partlog.Partition.AbortedIn), for read_committed
// reads once the WAL is gone. Snapshots and aborted transactions count towards a
// commit's bound (metadata.CommitWeight), so partitions with many producers share
// objects with fewer others.

// upPart is one partition's share of an object.
type upPart struct {
	p      *partlog.Partition
	pieces []partlog.UpPiece
	bytes  int64
	// weight bounds the range's metadata.PartitionRange.Weight: its snapshot is taken
	// later, as of an offset no higher, when no producer can have gained a batch at or
	// below it, so it holds no more producers than one taken now.
	weight int
}

// maxUploadBackoff bounds the wait after failed uploads: the longest an upload may lag
// once object storage is back.
const maxUploadBackoff = 5 * time.Second

// UploadRound uploads until nothing is due, trimming after each object. After a failed
// upload the next rounds wait, doubling from CheckInterval up to maxUploadBackoff: each
// attempt prepares a new object ID (a controller write, and a record GC deletes later),
// and an object store that refuses every PUT (credentials, a missing bucket) must not
// make that five a second.
func (t *Tier) UploadRound() {
	if t.d.Now().Before(t.upNotBefore) {
		t.updateGauges()
		return
	}
	for t.ctx.Err() == nil {
		more, err := t.uploadOnce()
		if err != nil {
			t.metrics.uploadFailures.Inc()
			t.upBackoff = min(max(2*t.upBackoff, t.cfg.CheckInterval), maxUploadBackoff)
			t.upNotBefore = t.d.Now().Add(t.upBackoff)
			t.log.Warn("upload failed; the WAL keeps the data, retrying", "in", t.upBackoff, "err", err)
			break
		}
		t.upBackoff = 0
		t.Trim()
		if !more {
			break
		}
	}
	t.updateGauges()
}

// uploadOnce uploads one object if one is due; more reports that more may be due right
// away (UploadRound calls it again after trimming).
//
// The object gathers the pending data of many partitions, largest first, up to
// MaxObjectBytes (and metadata.MaxCommitRanges of commit weight); the partition that
// does not fit whole is cut at a batch boundary, its rest left for the next object. So
// objects approach MaxObjectBytes whatever the partition count: S3 bills requests per
// object, and 12 partitions of 5 MiB make one PUT, not 12. An object that is not full
// waits, unless the oldest pending batch is MaxUploadDelay old or the WAL is under
// pressure: then it goes as it is (MaxUploadDelay bounds how long data waits).
func (t *Tier) uploadOnce() (more bool, err error) {
	cfg := t.cfg
	led := t.d.Led()
	if !t.uploadDue(led) {
		return false, nil
	}
	var parts []upPart
	var total int64
	var oldest time.Time
	for _, p := range led {
		pieces, n := p.PendingUpload(cfg.MaxObjectBytes)
		if n == 0 {
			continue
		}
		parts = append(parts, upPart{p: p, pieces: pieces, bytes: n})
		total += n
		if at := time.Unix(0, pieces[0].At); oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if !t.due(total, oldest) {
		return false, nil
	}
	slices.SortFunc(parts, func(a, c upPart) int { return cmp.Compare(c.bytes, a.bytes) })
	obj, objBytes, full := packObject(parts, cfg.MaxObjectBytes)
	if !full && objBytes < cfg.TargetObjectBytes && !t.overdue(oldest) {
		return false, nil // due by the total, yet no object worth a PUT: wait for more
	}
	n, err := t.uploadObject(obj)
	if err != nil {
		return false, err
	}
	return n > 0 && (full || total > objBytes), nil
}

// packObject takes the next object's share of each of parts (sorted largest first): whole
// partitions while they fit in maxBytes and metadata.MaxCommitRanges, then a prefix of the
// first one that does not fit. full: something was left out for lack of room.
func packObject(parts []upPart, maxBytes int64) (obj []upPart, bytes int64, full bool) {
	weight := 0
	for _, up := range parts {
		room := maxBytes - bytes
		if up.bytes > room && len(obj) > 0 {
			up.pieces, up.bytes = piecesWithin(up.pieces, room)
			full = true
		} else if up.bytes >= maxBytes {
			full = true // a partition with an object's worth (or one larger batch) pending
		}
		if up.bytes == 0 {
			break
		}
		up.weight = 1 + 2*up.p.SnapshotProducers(up.pieces[len(up.pieces)-1].Last)
		for _, pc := range up.pieces {
			if pc.Abort {
				up.weight++ // one of the range's aborted transactions
			}
		}
		if len(obj) > 0 && weight+up.weight > metadata.MaxCommitRanges {
			return obj, bytes, true
		}
		obj = append(obj, up)
		bytes += up.bytes
		weight += up.weight
		if full {
			break
		}
	}
	return obj, bytes, full
}

// piecesWithin is the longest prefix of pieces within room bytes (maybe none).
func piecesWithin(pieces []partlog.UpPiece, room int64) ([]partlog.UpPiece, int64) {
	var n int64
	for i, pc := range pieces {
		if n+int64(pc.Size) > room {
			return pieces[:i], n
		}
		n += int64(pc.Size)
	}
	return pieces, n
}

// uploadDue tells whether an upload is due, without building any upload: this runs
// every CheckInterval over every led partition, and building each partition's pieces
// (most rounds upload nothing) allocated megabytes per round at 10,000 partitions.
func (t *Tier) uploadDue(led []*partlog.Partition) bool {
	var total int64
	var oldest time.Time
	for _, p := range led {
		n, at := p.Pending()
		if n == 0 {
			continue
		}
		total += n
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	return t.due(total, oldest)
}

// due: total pending bytes, the oldest synced at oldest, make an object now (enough
// for one, old enough, or the WAL half full).
func (t *Tier) due(total int64, oldest time.Time) bool {
	return total > 0 && (total >= t.cfg.TargetObjectBytes || t.overdue(oldest))
}

// overdue: the oldest pending batch, synced at oldest, must go now whatever the object's
// size (MaxUploadDelay), or the WAL is more than half full.
func (t *Tier) overdue(oldest time.Time) bool {
	pressure := t.cfg.WALMaxBytes > 0 && t.WALHeld() > t.cfg.WALMaxBytes/2
	return time.Since(oldest) >= t.cfg.MaxUploadDelay || pressure
}

// uploadObject writes, PUTs and commits one object holding parts; n is the partition
// ranges it committed (0: none could be read, nothing was uploaded).
func (t *Tier) uploadObject(parts []upPart) (n int, err error) {
	ctx, cancel := context.WithTimeout(t.ctx, 2*time.Minute)
	defer cancel()
	var want int64
	for _, up := range parts {
		want += up.bytes
	}
	buf := bytes.NewBuffer(t.objectBuffer(int(want + want/32 + 64<<10)))
	w := objfmt.NewWriter(buf, objfmt.Options{BlockSize: t.cfg.BlockSize})
	var ranges []metadata.PartitionRange
	var kept []upPart
	for _, up := range parts {
		r, n, err := t.writeRun(w, up)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			continue
		}
		ranges = append(ranges, r)
		kept = append(kept, up)
	}
	if len(ranges) == 0 {
		return 0, nil
	}
	if _, err := w.Close(); err != nil {
		return 0, fmt.Errorf("tier: writing object: %w", err)
	}
	obj, err := t.prepareObject(ctx)
	if err != nil {
		return 0, err
	}
	size := int64(buf.Len())
	if err := t.objects.Put(ctx, obj.Key, bytes.NewReader(buf.Bytes()), size); err != nil {
		t.abandon(obj.ID)
		return 0, fmt.Errorf("tier: put %s (its key is abandoned): %w", obj.Key, err)
	}
	// Kept only after a PUT that succeeded: after a failed one an HTTP transport may
	// still be reading the body, which must not change under it.
	t.keepObjectBuffer(buf.Bytes())
	if err := objectstore.Verify(ctx, t.objects, obj.Key, size); err != nil {
		t.abandon(obj.ID)
		return 0, fmt.Errorf("tier: object %s not committed (its key is abandoned): %w", obj.Key, err)
	}
	if err := t.commitObject(ctx, obj, size, ranges); err != nil {
		t.abandon(obj.ID)
		return 0, err
	}
	for i, up := range kept {
		r := ranges[i]
		up.p.MarkUploaded(partlog.NewTierObj(r.ObjectRange(obj.ID), obj.Key, size), t.d.WAL)
	}
	t.abandon(obj.ID) // committed: no longer the uploader's to keep from collection
	t.metrics.objects.Inc()
	t.metrics.bytes.Add(float64(size))
	t.log.Debug("object uploaded", "key", obj.Key, "bytes", size, "partitions", len(ranges))
	return len(ranges), nil
}

// objectBuffer returns an empty buffer of at least n bytes' capacity: the previous
// object's if it is big enough. Sized once, not grown by doubling (that copied and
// zeroed each object several times over: half the broker's allocations under produce
// load). Reused because a fresh 8-64 MiB buffer is zeroed and faulted in page by page
// while its goroutine keeps a CPU: with a GC worker on the other of two cores, that
// held every produce goroutine up to 57 ms (docs/PERFORMANCE.md).
func (t *Tier) objectBuffer(n int) []byte {
	t.upMu.Lock()
	b := t.objBuf
	t.objBuf = nil
	t.upMu.Unlock()
	if cap(b) >= n {
		return b[:0]
	}
	return make([]byte, 0, n)
}

// keepObjectBuffer keeps b for the next object unless it is larger than objects
// usually are (one oversized upload should not pin its buffer for good).
func (t *Tier) keepObjectBuffer(b []byte) {
	if int64(cap(b)) > 2*t.cfg.TargetObjectBytes+1<<20 {
		return
	}
	t.upMu.Lock()
	t.objBuf = b[:0]
	t.upMu.Unlock()
}

// writeRun adds a partition's pieces to the object. A batch that cannot be read ends the
// run there (the rest waits for the next object); n is the batches written.
func (t *Tier) writeRun(w *objfmt.Writer, up upPart) (metadata.PartitionRange, int, error) {
	p := up.p
	r := metadata.PartitionRange{Topic: p.ID(), Partition: p.Index(), MaxTimestamp: -1}
	n := 0
	for _, pc := range up.pieces {
		data := pc.Data
		if data == nil {
			data = make([]byte, pc.Size)
			if err := pc.Src.ReadAt(data, pc.Pos); err != nil {
				t.log.Warn("upload: reading a batch from the WAL failed", "topic", p.Topic(), "partition", p.Index(), "offset", pc.Base, "err", err)
				break
			}
		}
		if err := w.Add(p.ID(), p.Index(), pc.Base, pc.Last, pc.MaxTS, data); err != nil {
			return r, 0, fmt.Errorf("tier: object of %s/%d at %d: %w", p.Topic(), p.Index(), pc.Base, err)
		}
		if n == 0 {
			r.FirstOffset = pc.Base
		}
		r.LastOffset, r.MaxTimestamp = pc.Last, max(r.MaxTimestamp, pc.MaxTS)
		r.Bytes += int64(pc.Size)
		n++
	}
	if n > 0 {
		r.Producers = p.ProducerSnapshot(r.LastOffset)
		r.Aborted = p.AbortedIn(r.FirstOffset, r.LastOffset)
	}
	return r, n, nil
}

// prepareObject prepares a new object ID and key, marked in use until abandon. Never
// one used before: see the top of this file.
func (t *Tier) prepareObject(ctx context.Context) (metadata.Object, error) {
	// The prepared object can be in the view before PrepareObject returns and the ID is
	// marked in use: collection skips its own prepared objects meanwhile (preparing), or
	// two quick rounds could take it for an abandoned one and delete it under the upload.
	t.upMu.Lock()
	t.preparing++
	t.upMu.Unlock()
	obj, err := t.manifest.PrepareObject(ctx)
	t.upMu.Lock()
	t.preparing--
	if err == nil {
		t.inflight[obj.ID] = true
	}
	t.upMu.Unlock()
	if err != nil {
		return metadata.Object{}, fmt.Errorf("tier: prepare object: %w", err)
	}
	return obj, nil
}

// abandon ends the upload's use of a prepared object: committed, or garbage that
// collection forgets (ownStalePrepared).
func (t *Tier) abandon(id uint64) {
	t.upMu.Lock()
	delete(t.inflight, id)
	t.upMu.Unlock()
}

// commitObject commits, retrying while the controller is unreachable; a refusal is final.
func (t *Tier) commitObject(ctx context.Context, obj metadata.Object, size int64, ranges []metadata.PartitionRange) error {
	delay := 50 * time.Millisecond
	for {
		err := t.manifest.CommitObject(ctx, obj.ID, size, ranges)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, metadata.ErrObjectRejected):
			t.metrics.rejected.Inc()
			return fmt.Errorf("tier: commit of %s refused (it becomes garbage): %w", obj.Key, err)
		}
		t.log.Warn("committing an object failed; retrying", "key", obj.Key, "err", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("tier: commit of %s: %w", obj.Key, err)
		}
		delay = min(2*delay, 2*time.Second)
	}
}
