package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/objread"
	"github.com/weir-io/weir/wal"
)

// backend is the front end's view of this broker: its own partitions, appended to this
// broker's WAL and read from the WALs of their chains and from objects.
type backend struct{ b *Broker }

var _ kafka.Backend = backend{}

func (be backend) Writer(t *metadata.Topic, index int32, zone string) (kafka.Writer, error) {
	p, err := be.b.lookup(t, index, true)
	if errors.Is(err, partlog.ErrNotLeader) && be.b.parts.Get(t.ID, index) == nil && be.b.routedHere(t, index, zone) {
		if w, ok := be.b.proxyFor(t, index); ok {
			if !be.b.leaseOK() {
				return nil, partlog.ErrNotLeader
			}
			return w, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if !be.b.leaseOK() {
		return nil, partlog.ErrNotLeader
	}
	return localPartition{be.b, p}, nil
}

func (be backend) Reader(t *metadata.Topic, index int32, currentEpoch int32, zone string) (kafka.Reader, error) {
	p, err := be.b.lookup(t, index, false)
	if errors.Is(err, partlog.ErrNotLeader) && be.b.parts.Get(t.ID, index) == nil && be.b.routedHere(t, index, zone) {
		// Led in another zone: read here as its read replica.
		if rp, ok := be.b.replicaFor(t, index); ok {
			p, err = rp, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if st := p.State(); st == partlog.Loading || st == partlog.Gone {
		// Its index is not complete yet (a move or a failover is loading it): its offsets
		// and epochs would be wrong (an OffsetForLeaderEpoch answer of 0 makes a consumer
		// believe the log was truncated and read it all again).
		return nil, partlog.ErrNotLeader
	}
	if err := p.CheckEpoch(currentEpoch); err != nil {
		return nil, err
	}
	return localPartition{be.b, p}, nil
}

func (be backend) Refresh() { be.b.syncPartitions(be.b.meta.View()) }

func (be backend) Admit() (time.Duration, error) {
	if be.b.tier == nil {
		return 0, nil
	}
	return be.b.tier.Admit()
}

func (be backend) CoordinatorPartition(ctx context.Context, group string, create bool) (*metadata.Topic, int32, error) {
	return be.b.coordinatorPartition(ctx, group, create)
}

// localPartition is a partition this broker leads: kafka.Writer and kafka.Reader.
type localPartition struct {
	b *Broker
	p *partlog.Partition
}

func (lp localPartition) Topic() string { return lp.p.Topic() }

func (lp localPartition) Append(h *recbatch.Header, batch []byte, logAppendTime bool, done func(kafka.AppendResult)) {
	lp.b.appendBatch(lp.p, h, batch, logAppendTime, func(base, logStart, stamped int64, err error) {
		done(kafka.AppendResult{Base: base, LogStart: logStart, AppendTime: stamped, Err: err})
	})
}

func (lp localPartition) Offsets() (logStart, hw int64) { return lp.p.Offsets() }

func (lp localPartition) SetLogStart(ctx context.Context, offset int64) error {
	if err := lp.b.meta.SetLogStartOffset(ctx, lp.p.ID(), lp.p.Index(), offset); err != nil {
		return err
	}
	lp.p.SetLogStart(offset)
	return nil
}

func (lp localPartition) LogInfo() (logStart, hw int64, leaderEpoch int32) {
	logStart, hw = lp.p.Offsets()
	return logStart, hw, lp.p.LeaderEpoch()
}

func (lp localPartition) Wait(c chan struct{})   { lp.p.Wait(c) }
func (lp localPartition) Unwait(c chan struct{}) { lp.p.Unwait(c) }

func (lp localPartition) MaxTimestamp() (int64, int64) { return lp.p.MaxTimestamp() }

func (lp localPartition) EndOffsetForEpoch(e int32) (int32, int64) { return lp.p.EndOffsetForEpoch(e) }

func (lp localPartition) OffsetForTime(ctx context.Context, ts int64) (int64, int64, bool) {
	if lp.b.tier == nil {
		return lp.p.OffsetForTime(ts)
	}
	return lp.b.tier.OffsetForTime(ctx, lp.p, ts)
}

// Cold reports whether a read at offset is likely to go to object storage: the offset is
// uploaded (it may still be in the WAL too; then the read is merely not slow). The fetch
// reads cold partitions concurrently.
func (lp localPartition) Cold(offset int64) bool {
	return lp.b.tier != nil && offset < lp.p.Uploaded()
}

// Read locates the batches in the partition's index and reads them from the tail cache,
// the WALs of its chain or objects. A second try covers a read that raced with a WAL
// trim: the index then sends it to object storage.
func (lp localPartition) Read(ctx context.Context, offset int64, maxBytes int, first bool, currentEpoch int32) (data []byte, hw, logStart int64, err error) {
	for try := 0; try < 2; try++ {
		var pieces []partlog.Piece
		pieces, hw, logStart, err = lp.p.Read(offset, maxBytes, first, currentEpoch)
		if err != nil {
			return nil, hw, logStart, err
		}
		if data, err = lp.readPieces(ctx, offset, pieces, maxBytes, first); err == nil {
			return data, hw, logStart, nil
		}
	}
	return nil, hw, logStart, err
}

// ReadCommitted is Read for a read_committed consumer: the index stops at the last
// stable offset, and what objects return is cut there (an open transaction's data may
// be uploaded); the aborted transactions listed are those the returned batches overlap.
func (lp localPartition) ReadCommitted(ctx context.Context, offset int64, maxBytes int, first bool, currentEpoch int32) (kafka.CommittedRead, error) {
	var cr kafka.CommittedRead
	var err error
	for try := 0; try < 2; try++ {
		var pieces []partlog.Piece
		pieces, cr.HW, cr.LSO, cr.LogStart, err = lp.p.ReadCommitted(offset, maxBytes, first, currentEpoch)
		if err != nil {
			return cr, err
		}
		if cr.Data, err = lp.readPieces(ctx, offset, pieces, maxBytes, first); err == nil {
			cr.Data = recbatch.Below(cr.Data, cr.LSO)
			if last := recbatch.LastOffsetOf(cr.Data); last >= 0 {
				cr.Aborted = lp.p.Aborted(offset, last)
			}
			return cr, nil
		}
	}
	return cr, err
}

// LastStable is the partition's last stable offset.
func (lp localPartition) LastStable() int64 { return lp.p.LastStable() }

// readPieces reads what Partition.Read located: cached bytes, WAL ranges, or objects.
// A WAL read failure after some bytes returns those (the consumer asks again from there).
func (lp localPartition) readPieces(ctx context.Context, offset int64, pieces []partlog.Piece, limit int, first bool) ([]byte, error) {
	b, p := lp.b, lp.p
	if len(pieces) == 1 && pieces[0].Objs != nil {
		if !first && limit <= 0 {
			return nil, nil // nothing fits; no GET for bytes that would be dropped
		}
		// Readahead started by this read lives as long as the client's connection.
		ctx, cancel := context.WithTimeout(objread.ReadaheadContext(ctx, ctx), 30*time.Second)
		defer cancel()
		data, err := b.tier.Read(ctx, p, offset, limit, pieces[0].Objs)
		if err != nil {
			b.log.Warn("fetch: object read failed", "topic", p.Topic(), "partition", p.Index(), "offset", offset, "err", err)
			return nil, fmt.Errorf("%w: %w", partlog.ErrStorage, err)
		}
		if !first && len(data) > limit {
			return nil, nil // only the first partition may exceed its limit (KIP-74)
		}
		return data, nil
	}
	n := 0
	for _, pc := range pieces {
		n += int(pc.Size)
	}
	buf := make([]byte, 0, n)
	fill := b.cache.Fills(p)
	for _, pc := range pieces {
		if pc.Data != nil {
			buf = append(buf, pc.Data...)
			continue
		}
		start := len(buf)
		var err error
		if fill {
			// A read replica's batch is read once for every consumer of the zone that
			// wants it now, and kept for the next ones.
			var data []byte
			if data, err = b.cache.Load(p, pc, func(dst []byte) error { return pc.Src.ReadAt(dst, pc.Pos) }); err == nil {
				buf = append(buf, data...)
			}
		} else {
			buf = buf[:start+int(pc.Size)]
			err = pc.Src.ReadAt(buf[start:], pc.Pos)
		}
		if err != nil {
			b.log.Warn("fetch: WAL read failed", "topic", p.Topic(), "partition", p.Index(), "pos", pc.Pos, "err", err)
			if start == 0 {
				return nil, fmt.Errorf("%w: %w", partlog.ErrStorage, err)
			}
			return buf[:start], nil
		}
	}
	return buf, nil
}

// appendRecord makes one record (key, value) durable in p, an internal topic's partition
// (the group, transaction and share-state stores), and returns the batch's size. It
// gives up waiting when ctx ends (the append may still land).
func (b *Broker) appendRecord(ctx context.Context, p *partlog.Partition, key, value []byte) (int, error) {
	batch := recbatch.EncodeSingle(key, value, b.now().UnixMilli())
	h, err := recbatch.Parse(batch)
	if err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	b.appendBatch(p, &h, batch, false, func(_, _, _ int64, err error) { done <- err })
	select {
	case err := <-done:
		return len(batch), err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// appendBatch queues batch on the WAL for p; done runs on the WAL committer once the batch
// is durable (or failed), with the base offset it got. stamped is the LogAppendTime
// given to the batch, or -1.
func (b *Broker) appendBatch(p *partlog.Partition, h *recbatch.Header, batch []byte, logAppendTime bool, done func(base, logStart, stamped int64, err error)) {
	var res partlog.Prepared
	stamped := int64(-1)
	// The batch is a piece of the request, which stays unchanged until its answer is sent
	// (after Done): the WAL copies it once, into its group buffer, and the partition's
	// index and tail cache keep it (offsets assigned in place by Prepare).
	b.wal.Append(wal.Entry{
		Type:    partlog.RecBatch,
		Head:    partlog.BatchRecHead(p.ID(), p.Index()),
		Payload: batch,
		Prepare: func(pl []byte) error {
			if logAppendTime {
				stamped = b.now().UnixMilli()
			}
			var err error
			res, err = p.Prepare(h, pl, stamped)
			if err == nil && res.Dup != nil {
				return res.Dup // nothing to write
			}
			return err
		},
		Done: func(pos wal.Pos, err error) {
			b.finishAppend(p, res, pos+partlog.BatchRecHdr, err, int64(len(batch)), func() { b.cache.Add(p, res) },
				func(base, logStart int64, err error) { done(base, logStart, stamped, err) })
		},
	})
}

// finishAppend ends an append of a batch or a link of p once its WAL group is done (err
// nil: synced at pos, the fence token still this broker's). A duplicate is answered with
// its original's offset once that is durable; a fenced WAL marks the broker fenced. The
// ack needs a valid lease: a fenced broker must not confirm an offset a taker may not
// have seen, even if the record is durable. committed (may be nil) runs once the batch
// is readable.
func (b *Broker) finishAppend(p *partlog.Partition, res partlog.Prepared, pos wal.Pos, err error, size int64, committed func(), done func(base, logStart int64, err error)) {
	var dup *partlog.DuplicateError
	switch {
	case errors.As(err, &dup):
		// The original was prepared earlier in log order, so by now it is either
		// synced or rolled back.
		logStart, hw := p.Offsets()
		switch {
		case dup.Offset >= hw:
			done(0, 0, wal.ErrFailed)
		case !b.leaseOK():
			go func() { // rare: off the WAL's completion path
				if b.awaitLease(b.ctx) {
					done(dup.Offset, logStart, nil)
				} else {
					done(0, 0, partlog.ErrNotLeader)
				}
			}()
		default:
			done(dup.Offset, logStart, nil)
		}
	case errors.Is(err, wal.ErrFenced):
		// Another process sealed this WAL: this broker's registration is over.
		if base := res.Base(); base >= 0 {
			p.Rollback(base)
		}
		b.markFenced(err.Error())
		done(0, 0, partlog.ErrNotLeader)
	case err != nil:
		if base := res.Base(); base >= 0 {
			p.Rollback(base)
		}
		if errors.Is(err, wal.ErrFailed) {
			b.markStorageFailed(err)
		}
		done(0, 0, err)
	default:
		p.Commit(res, b.wal, pos)
		if committed != nil {
			committed()
		}
		b.metrics.bytesIn.WithLabelValues(p.Topic()).Add(float64(size))
		if !b.leaseOK() {
			// Durable, but this broker may already be fenced: no ack unless the lease
			// is renewed (awaitLease); otherwise the client retries at the leader the
			// metadata names. Rare: off the WAL's completion path.
			go func() {
				if b.awaitLease(b.ctx) {
					logStart, _ := p.Offsets()
					done(res.Base(), logStart, nil)
				} else {
					done(0, 0, partlog.ErrNotLeader)
				}
			}()
			return
		}
		logStart, _ := p.Offsets()
		done(res.Base(), logStart, nil)
	}
}
