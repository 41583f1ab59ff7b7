package broker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// The uploader moves synced batches out of the WAL into objects: when the pending bytes
// of the partitions this broker leads reach TargetObjectBytes, or the oldest pending batch
// is MaxUploadDelay old, or the WAL nears its bound. A partition with TargetObjectBytes
// pending gets an object of its own; the others share one. Each object is
//
//	PrepareObject (an ID and key under this broker's epoch) → PUT → CommitObject (one
//	range per partition, each continuing its manifest) → trim the WAL
//
// A failed PUT keeps the prepared ID for the next attempt (the key is overwritten) and the
// data stays in the WAL; a refused commit leaves a prepared object that garbage
// collection deletes. Nothing is dropped from the WAL before its commit.

// upPart is one partition's share of an object.
type upPart struct {
	p      *partition
	pieces []upPiece
	bytes  int64
}

// uploadRound uploads until nothing is due, trimming after each object.
func (b *Broker) uploadRound() {
	for b.ctx.Err() == nil {
		more, err := b.uploadOnce()
		if err != nil {
			b.metrics.tier.uploadFailures.Inc()
			b.log.Warn("upload failed; the WAL keeps the data, retrying", "err", err)
			break
		}
		b.trimWAL()
		if !more {
			break
		}
	}
	b.updateTierGauges()
}

// uploadOnce uploads what is due; more reports that more is pending right away.
func (b *Broker) uploadOnce() (more bool, err error) {
	cfg := b.cfg.Tier
	var parts []upPart
	var total int64
	var oldest time.Time
	for _, p := range b.ledPartitions() {
		pieces, n := p.pendingUpload(cfg.MaxObjectBytes)
		if n == 0 {
			continue
		}
		parts = append(parts, upPart{p: p, pieces: pieces, bytes: n})
		total += n
		if at := time.Unix(0, pieces[0].at); oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	pressure := cfg.WALMaxBytes > 0 && b.walHeld() > cfg.WALMaxBytes/2
	if total == 0 || total < cfg.TargetObjectBytes && time.Since(oldest) < cfg.MaxUploadDelay && !pressure {
		return false, nil
	}
	slices.SortFunc(parts, func(a, c upPart) int { return cmp.Compare(c.bytes, a.bytes) })
	var shared []upPart
	var sharedBytes int64
	flush := func() error {
		if len(shared) == 0 {
			return nil
		}
		err := b.uploadObject(shared)
		shared, sharedBytes = nil, 0
		return err
	}
	for _, up := range parts {
		if up.bytes >= cfg.TargetObjectBytes {
			more = more || up.bytes >= cfg.MaxObjectBytes
			if err := b.uploadObject([]upPart{up}); err != nil {
				return false, err
			}
			continue
		}
		if sharedBytes+up.bytes > cfg.MaxObjectBytes || len(shared) == metadata.MaxCommitRanges {
			if err := flush(); err != nil {
				return false, err
			}
		}
		shared = append(shared, up)
		sharedBytes += up.bytes
	}
	return more, flush()
}

// uploadObject writes, PUTs and commits one object holding parts.
func (b *Broker) uploadObject(parts []upPart) error {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	var buf bytes.Buffer
	w := objfmt.NewWriter(&buf, objfmt.Options{BlockSize: b.cfg.Tier.BlockSize})
	var ranges []metadata.PartitionRange
	var kept []upPart
	for _, up := range parts {
		r, n, err := b.writeRun(w, up)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		ranges = append(ranges, r)
		kept = append(kept, up)
	}
	if len(ranges) == 0 {
		return nil
	}
	if _, err := w.Close(); err != nil {
		return fmt.Errorf("broker: writing object: %w", err)
	}
	obj, err := b.preparedObject(ctx)
	if err != nil {
		return err
	}
	size := int64(buf.Len())
	if err := b.objects.Put(ctx, obj.Key, bytes.NewReader(buf.Bytes()), size); err != nil {
		return fmt.Errorf("broker: put %s: %w", obj.Key, err) // the prepared ID is kept for the retry
	}
	b.upMu.Lock()
	b.spare = nil
	b.upMu.Unlock()
	if err := b.commitObject(ctx, obj, size, ranges); err != nil {
		b.upMu.Lock()
		delete(b.inflight, obj.ID)
		b.upMu.Unlock()
		return err
	}
	for i, up := range kept {
		r := ranges[i]
		up.p.markUploaded(newTierObj(r.ObjectRange(obj.ID), obj.Key, size), b.wal)
	}
	b.upMu.Lock()
	delete(b.inflight, obj.ID)
	b.upMu.Unlock()
	b.metrics.tier.objects.Inc()
	b.metrics.tier.bytes.Add(float64(size))
	b.log.Debug("object uploaded", "key", obj.Key, "bytes", size, "partitions", len(ranges))
	return nil
}

// writeRun adds a partition's pieces to the object. A batch that cannot be read ends the
// run there (the rest waits for the next object); n is the batches written.
func (b *Broker) writeRun(w *objfmt.Writer, up upPart) (metadata.PartitionRange, int, error) {
	r := metadata.PartitionRange{Topic: up.p.id, Partition: up.p.index, MaxTimestamp: -1}
	n := 0
	for _, pc := range up.pieces {
		data := pc.data
		if data == nil {
			data = make([]byte, pc.size)
			if err := pc.src.ReadAt(data, pc.pos); err != nil {
				b.log.Warn("upload: reading a batch from the WAL failed", "topic", up.p.topic, "partition", up.p.index, "offset", pc.base, "err", err)
				break
			}
		}
		if err := w.Add(up.p.id, up.p.index, pc.base, pc.last, pc.maxTS, data); err != nil {
			return r, 0, fmt.Errorf("broker: object of %s/%d at %d: %w", up.p.topic, up.p.index, pc.base, err)
		}
		if n == 0 {
			r.FirstOffset = pc.base
		}
		r.LastOffset, r.MaxTimestamp = pc.last, max(r.MaxTimestamp, pc.maxTS)
		r.Bytes += int64(pc.size)
		n++
	}
	return r, n, nil
}

// preparedObject returns the object ID kept from a failed PUT, or prepares a new one.
func (b *Broker) preparedObject(ctx context.Context) (metadata.Object, error) {
	b.upMu.Lock()
	defer b.upMu.Unlock()
	if b.spare != nil {
		return *b.spare, nil
	}
	obj, err := b.manifest.PrepareObject(ctx)
	if err != nil {
		return metadata.Object{}, fmt.Errorf("broker: prepare object: %w", err)
	}
	b.spare = &obj
	b.inflight[obj.ID] = true
	return obj, nil
}

// commitObject commits, retrying while the controller is unreachable; a refusal is final.
func (b *Broker) commitObject(ctx context.Context, obj metadata.Object, size int64, ranges []metadata.PartitionRange) error {
	delay := 50 * time.Millisecond
	for {
		err := b.manifest.CommitObject(ctx, obj.ID, size, ranges)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, metadata.ErrObjectRejected):
			b.metrics.tier.rejected.Inc()
			return fmt.Errorf("broker: commit of %s refused (it becomes garbage): %w", obj.Key, err)
		}
		b.log.Warn("committing an object failed; retrying", "key", obj.Key, "err", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("broker: commit of %s: %w", obj.Key, err)
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// ledPartitions returns the partitions led here, in no particular order.
func (b *Broker) ledPartitions() []*partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []*partition
	for _, ps := range b.parts {
		for _, p := range ps {
			out = append(out, p)
		}
	}
	return out
}
