package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// Failover, on the taker's side. When the controller fences a broker X it gives each of
// X's partitions a new leader, marked Recovering: X's part of the partition ends wherever
// X's WAL ends, and nobody knows where that is until X's WAL can no longer grow. The new
// leader (this broker)
//
//  1. seals X's WAL directories of the fenced registrations (wal.Seal: the fence token
//     stops X from acking anything more, X's files are made durable, read to their end
//     and that end recorded, so every later reader stops at the same place);
//  2. scans them once for every partition it took over from X, collecting the batches
//     of each partition's chain (no byte is copied: batches are served from X's WAL
//     until the uploader moves them to objects);
//  3. tells the controller where X's part ends (CompleteRecovery), which appends this
//     broker's log range to the chain;
//  4. serves.
//
// Until then the partition answers NOT_LEADER_OR_FOLLOWER here and Metadata says
// LEADER_NOT_AVAILABLE, so clients wait instead of retrying at a broker that cannot
// serve yet.

// recSource is a fenced WAL owner: the broker and its last fenced registration.
type recSource struct {
	broker int32
	epoch  int64
}

// startRecovery recovers, in the background, the partitions this broker leads that are
// Recovering: one goroutine per fenced broker, so a WAL is scanned once for all of them.
func (b *Broker) startRecovery(parts []*partlog.Partition) {
	if len(parts) == 0 {
		return
	}
	view := b.meta.View()
	groups := map[recSource][]*partlog.Partition{}
	b.recMu.Lock()
	for _, p := range parts {
		mp, ok := partMeta(view, p)
		if !ok || !mp.Recovering || mp.Leader != b.cfg.NodeID {
			continue
		}
		if e, ok := b.recovering[p.Key()]; ok && e == mp.LeaderEpoch {
			continue // already being recovered
		}
		b.recovering[p.Key()] = mp.LeaderEpoch
		chain := p.Chain()
		src := recSource{broker: chain[len(chain)-1].Broker, epoch: mp.RecoverEpoch}
		groups[src] = append(groups[src], p)
	}
	b.recMu.Unlock()
	for src, ps := range groups {
		b.wg.Add(1)
		go b.recoverLoop(src, ps, time.Now())
	}
}

// recoverLoop recovers parts from src's WAL, retrying what fails until each partition is
// served, stops being led here or stops being Recovering.
func (b *Broker) recoverLoop(src recSource, parts []*partlog.Partition, seen time.Time) {
	defer b.wg.Done()
	defer func() {
		b.recMu.Lock()
		for _, p := range parts {
			delete(b.recovering, p.Key())
		}
		b.recMu.Unlock()
	}()
	delay := 50 * time.Millisecond
	for b.ctx.Err() == nil {
		parts = b.stillRecovering(parts)
		if len(parts) == 0 {
			return
		}
		parts = b.recoverOnce(src, parts, seen)
		if len(parts) == 0 {
			return
		}
		select {
		case <-time.After(delay):
		case <-b.ctx.Done():
			return
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// stillRecovering keeps the partitions this broker still leads, still Recovering and
// still loading.
func (b *Broker) stillRecovering(parts []*partlog.Partition) []*partlog.Partition {
	view := b.meta.View()
	out := parts[:0]
	for _, p := range parts {
		mp, ok := partMeta(view, p)
		if ok && mp.Recovering && mp.Leader == b.cfg.NodeID && p.State() == partlog.Loading && b.parts.Get(p.ID(), p.Index()) == p {
			out = append(out, p)
		}
	}
	return out
}

// recoverOnce runs the four steps once and returns the partitions left to retry.
func (b *Broker) recoverOnce(src recSource, parts []*partlog.Partition, seen time.Time) []*partlog.Partition {
	t0 := time.Now()
	if err := b.sealUpTo(src.broker, src.epoch); err != nil {
		b.log.Warn("recovery: sealing the fenced broker's WAL failed; retrying", "fenced", src.broker, "epoch", src.epoch, "err", err)
		return parts
	}
	t1 := time.Now()
	ranges := make(map[*partlog.Partition][]partlog.LogRange, len(parts))
	for _, p := range parts {
		ranges[p] = p.Chain()
	}
	st, err := b.loader.Load(parts, ranges, partlog.LoadOptions{AcceptCorruption: b.cfg.AcceptWALLoss, MaxEpoch: map[int32]int64{src.broker: src.epoch}})
	if err != nil {
		b.log.Warn("recovery: reading the fenced broker's WAL failed; retrying", "fenced", src.broker, "err", err)
		return parts
	}
	t2 := time.Now()
	b.metrics.recoveryPhase("seal", t1.Sub(t0))
	b.metrics.recoveryPhase("scan", t2.Sub(t1))
	b.metrics.recoveryRead.Add(float64(st.Bytes))

	view := b.meta.View()
	type done struct {
		p     *partlog.Partition
		epoch int32
		end   int64
	}
	var ready []done
	var retry []*partlog.Partition
	for _, p := range parts {
		mp, ok := partMeta(view, p)
		if !ok {
			continue
		}
		if _, err := p.FinishLoad(-1, b.cfg.AcceptWALLoss, false); err != nil {
			b.log.Error("recovery: the fenced broker's WAL misses data of a partition; it stays unavailable", "topic", p.Topic(), "partition", p.Index(), "err", err)
			retry = append(retry, p)
			continue
		}
		ready = append(ready, done{p, mp.LeaderEpoch, p.End()})
	}
	t3 := time.Now()
	finish := func(d done, err error) {
		switch {
		case err == nil:
			d.p.Serve()
			b.coordinatorsServe(d.p)
			b.metrics.recovered.Inc()
			b.metrics.recoveryPhase("total", time.Since(seen))
			b.log.Debug("partition recovered", "topic", d.p.Topic(), "partition", d.p.Index(), "from", src.broker, "end_offset", d.end, "took", time.Since(seen))
		case errors.Is(err, metadata.ErrRecoveryRefused), errors.Is(err, metadata.ErrFenced):
			// Someone else leads it now, or this registration is over: nothing to do.
			b.log.Info("recovery: completion refused", "topic", d.p.Topic(), "partition", d.p.Index(), "err", err)
		default:
			b.log.Warn("recovery: completing failed; retrying", "topic", d.p.Topic(), "partition", d.p.Index(), "err", err)
			retry = append(retry, d.p)
		}
	}
	if batch, ok := b.meta.(metadata.BatchRecoverer); ok && len(ready) > 0 {
		// One round trip (one Raft entry) for all of them: with one commit per
		// partition the last of 300 partitions waited half a second for the others.
		items := make([]metadata.Recovered, len(ready))
		for i, d := range ready {
			items[i] = metadata.Recovered{Topic: d.p.ID(), Partition: d.p.Index(), LeaderEpoch: d.epoch, EndOffset: d.end}
		}
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		errs, err := batch.CompleteRecoveries(ctx, items)
		cancel()
		t4 := time.Now()
		for i, d := range ready {
			if err == nil {
				finish(d, errs[i])
			} else {
				finish(d, err)
			}
		}
		b.metrics.recoveryPhase("complete", time.Since(t2))
		if len(ready) > len(retry) {
			b.log.Info("partitions recovered", "from", src.broker, "epoch", src.epoch, "partitions", len(ready)-len(retry),
				"retry", len(retry), "seal", t1.Sub(t0), "scan", t2.Sub(t1), "finish_load", t3.Sub(t2), "controller", t4.Sub(t3), "complete", time.Since(t2), "took", time.Since(seen))
		}
		return retry
	}
	rec, ok := b.meta.(metadata.Recoverer)
	if !ok { // a store without leases (Start refuses a cluster's without it: checkStore)
		b.log.Error("recovery: the metadata store cannot complete recoveries")
		return retry
	}
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, d := range ready {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			err := rec.CompleteRecovery(ctx, d.p.ID(), d.p.Index(), d.epoch, d.end)
			cancel()
			mu.Lock()
			finish(d, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.metrics.recoveryPhase("complete", time.Since(t2))
	return retry
}
