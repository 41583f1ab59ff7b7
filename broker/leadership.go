package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// A broker serves the partitions the metadata says it leads. A partition's data may span
// several brokers' WALs (its log chain, metadata.Partition.Logs): after a leadership move
// the new leader reads the older offsets from the previous leaders' WALs on the shared
// file system and appends new ones to its own. Nothing is copied.
//
// Lifecycle on this broker: loading (collecting its batches from the chain's WALs) →
// ready (appends and reads) → closing (a graceful move: no new appends; once every
// prepared batch is synced the broker tells the controller where its range ends) → gone.

// logRange is one link of a partition's log chain: broker's WAL holds offsets
// [start, end); end -1 means open-ended (the current leader's link).
type logRange struct {
	broker     int32
	start, end int64
}

// chainOf returns the log chain of a partition; metadata without one (the single-node
// store) means the leader has written everything.
func chainOf(mp metadata.Partition) []logRange {
	if len(mp.Logs) == 0 {
		return []logRange{{broker: mp.Leader, start: 0, end: -1}}
	}
	out := make([]logRange, len(mp.Logs))
	for i, l := range mp.Logs {
		out[i] = logRange{broker: l.Broker, start: l.StartOffset, end: -1}
		if i > 0 {
			out[i-1].end = l.StartOffset
		}
	}
	return out
}

func (r logRange) holds(offset int64) bool {
	return offset >= r.start && (r.end < 0 || offset < r.end)
}

// mover and leaser are what a cluster metadata store offers beyond metadata.Store.
type mover interface {
	CompleteMove(ctx context.Context, topic metadata.TopicID, partition int32, endOffset int64) error
}

type leaser interface {
	LeaseValid(now time.Time) bool
}

// leaseOK reports whether the broker may ack writes: with a controller, only while its
// lease is valid on its own clock, so it stops acking before the controller can fence it.
func (b *Broker) leaseOK() bool {
	if l, ok := b.meta.(leaser); ok {
		return l.LeaseValid(time.Now())
	}
	return true
}

// walDir is where broker id's WAL lives.
func (b *Broker) walDir(id int32) (string, error) {
	if id == b.cfg.NodeID {
		return b.cfg.WAL.Dir, nil
	}
	if b.cfg.WALRoot == "" {
		return "", fmt.Errorf("broker: no shared WAL root configured to read broker %d's WAL", id)
	}
	return filepath.Join(b.cfg.WALRoot, fmt.Sprintf("broker-%d", id)), nil
}

// syncPartitions applies a metadata view: creates partitions this broker now leads (and
// starts loading them), starts hand-offs for partitions moving away, and drops partitions
// it no longer leads.
func (b *Broker) syncPartitions(v *metadata.View) {
	self := b.cfg.NodeID
	b.mu.Lock()
	var toLoad, toHandoff []*partition
	seen := make(map[metadata.TopicID]bool, len(v.Topics))
	for _, t := range v.Topics {
		seen[t.ID] = true
		ps := b.parts[t.ID]
		for _, mp := range t.Partitions {
			p := ps[mp.Index]
			if mp.Leader != self {
				if p != nil {
					b.dropLocked(p)
				}
				continue
			}
			if p == nil {
				if ps == nil {
					ps = map[int32]*partition{}
					b.parts[t.ID] = ps
				}
				p = newPartition(t.Name, t.ID, mp.Index, mp.LeaderEpoch, mp.LogStartOffset)
				ps[mp.Index] = p
				if !b.starting {
					toLoad = append(toLoad, p)
				}
			}
			p.mu.Lock()
			p.chain = chainOf(mp)
			if mp.LeaderEpoch > p.leaderEpoch {
				p.leaderEpoch = mp.LeaderEpoch
			}
			p.setLogStartLocked(mp.LogStartOffset)
			if b.tiered() {
				p.tier.enabled = true
				p.applyManifestLocked(mp, v)
			}
			switch {
			case mp.Moving && p.state == partReady:
				p.state = partClosing
				toHandoff = append(toHandoff, p)
			case !mp.Moving && p.state == partClosing:
				p.state = partReady // move cancelled
			}
			p.mu.Unlock()
		}
	}
	for id, ps := range b.parts {
		if !seen[id] {
			for _, p := range ps {
				b.dropLocked(p)
			}
		}
	}
	b.mu.Unlock()
	for _, p := range toLoad {
		p.mu.Lock()
		links := len(p.chain)
		p.mu.Unlock()
		if links == 1 {
			b.finishLoad(p) // a new partition, or one always led here: nothing to read
			continue
		}
		b.wg.Add(1)
		go b.loadLoop(p)
	}
	for _, p := range toHandoff {
		b.wg.Add(1)
		go b.handoff(p)
	}
}

func (b *Broker) dropLocked(p *partition) {
	delete(b.parts[p.id], p.index)
	if len(b.parts[p.id]) == 0 {
		delete(b.parts, p.id)
	}
	p.mu.Lock()
	p.state = partGone
	b.pinOnDropLocked(p)
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

// lookup finds the partition of topic t a request addresses. It returns the Kafka
// error for a missing topic/partition or one this broker does not lead (yet).
func (b *Broker) lookup(t *metadata.Topic, index int32, write bool) (*partition, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
	}
	b.mu.RLock()
	p := b.parts[t.ID][index]
	b.mu.RUnlock()
	if p == nil {
		return nil, errNotLeader
	}
	if write {
		p.mu.Lock()
		st := p.state
		p.mu.Unlock()
		if st != partReady {
			return nil, errNotLeader
		}
	}
	return p, nil
}

// lookupEpoch is lookup for reads that carry a current leader epoch (-1: unchecked):
// FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH when the client's view differs.
func (b *Broker) lookupEpoch(t *metadata.Topic, index, current int32) (*partition, error) {
	p, err := b.lookup(t, index, false)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkEpochLocked(current); err != nil {
		return nil, err
	}
	return p, nil
}

// loadLoop loads a partition that became this broker's after start-up, retrying while a
// previous leader's WAL cannot be read (e.g. not yet visible on the shared file system).
func (b *Broker) loadLoop(p *partition) {
	defer b.wg.Done()
	delay := 50 * time.Millisecond
	for {
		p.mu.Lock()
		st, chain := p.state, p.chain
		p.mu.Unlock()
		if st != partLoading || b.ctx.Err() != nil {
			return
		}
		start := time.Now()
		// The last link is this broker's own and starts now: nothing to read for it.
		err := b.loadRanges([]*partition{p}, map[*partition][]logRange{p: chain[:len(chain)-1]})
		if err == nil {
			b.finishLoad(p)
			b.log.Info("partition loaded", "topic", p.topic, "partition", p.index, "chain", len(chain), "took", time.Since(start))
			return
		}
		b.log.Warn("loading partition failed; retrying", "topic", p.topic, "partition", p.index, "err", err)
		select {
		case <-time.After(delay):
		case <-b.ctx.Done():
			return
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// loadRanges scans each WAL that holds some of the given ranges once and collects the
// batches that fall in them.
func (b *Broker) loadRanges(parts []*partition, ranges map[*partition][]logRange) error {
	byBroker := map[int32][]*partition{}
	for _, p := range parts {
		for _, r := range ranges[p] {
			byBroker[r.broker] = append(byBroker[r.broker], p)
		}
	}
	for broker, ps := range byBroker {
		ro, err := b.walReader(broker)
		if err != nil {
			return err
		}
		var src logReader = ro
		if broker == b.cfg.NodeID {
			src = b.wal // same positions; reads of our own WAL go through it
		}
		want := map[metadata.TopicID]map[int32]*partition{}
		for _, p := range ps {
			if want[p.id] == nil {
				want[p.id] = map[int32]*partition{}
			}
			want[p.id][p.index] = p
		}
		_, err = ro.Scan(func(typ byte, payload []byte, pos wal.Pos) error {
			if typ != recBatch {
				return nil
			}
			id, idx, batch, err := decodeBatchRec(payload)
			if err != nil {
				return nil // not ours to judge; the owner's replay reports damage
			}
			p := want[id][idx]
			if p == nil {
				return nil
			}
			h, err := parseBatchHeader(batch)
			if err != nil {
				return nil
			}
			for _, r := range ranges[p] {
				if r.broker == broker && r.holds(h.BaseOffset) {
					p.collect(&h, src, pos+batchRecHdr, len(batch))
					break
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// walReader returns a read-only view of broker's WAL, one per broker for the broker's
// lifetime (it picks up new segments by itself), so repeated moves do not pile up open
// files.
func (b *Broker) walReader(broker int32) (*wal.ReadOnly, error) {
	b.foreignMu.Lock()
	defer b.foreignMu.Unlock()
	if ro := b.foreign[broker]; ro != nil {
		return ro, nil
	}
	dir, err := b.walDir(broker)
	if err != nil {
		return nil, err
	}
	ro, err := wal.OpenReadOnly(dir, nil)
	if err != nil {
		return nil, err
	}
	b.foreign[broker] = ro
	return ro, nil
}

// finishLoad indexes what was collected and restores group offsets when the partition is
// one of __consumer_offsets.
func (b *Broker) finishLoad(p *partition) {
	if gaps := p.finishLoad(); len(gaps) > 0 {
		b.log.Error("partition has offsets no WAL holds", "topic", p.topic, "partition", p.index, "gaps", gaps)
	}
	if p.topic == offsetsTopic {
		b.restoreGroups(p)
	}
}

// handoff finishes a graceful move away from this broker: appends are already refused;
// once every prepared batch is synced (or rolled back), the end of this broker's range is
// known and is reported to the controller, which makes the target the leader.
func (b *Broker) handoff(p *partition) {
	defer b.wg.Done()
	wake := make(chan struct{}, 1)
	var end int64
	for {
		p.wait(wake)
		p.mu.Lock()
		st, next, hw := p.state, p.next, p.hw
		p.mu.Unlock()
		if st != partClosing {
			return
		}
		if next == hw {
			end = next
			break
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Millisecond):
		case <-b.ctx.Done():
			return
		}
	}
	m, ok := b.meta.(mover)
	if !ok {
		return
	}
	delay := 20 * time.Millisecond
	for b.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := m.CompleteMove(ctx, p.id, p.index, end)
		cancel()
		if err == nil {
			b.log.Info("partition handed off", "topic", p.topic, "partition", p.index, "end_offset", end)
			return
		}
		p.mu.Lock()
		st := p.state
		p.mu.Unlock()
		if st != partClosing {
			return
		}
		b.log.Warn("completing move failed; retrying", "topic", p.topic, "partition", p.index, "err", err)
		time.Sleep(delay)
		delay = min(delay*2, time.Second)
	}
}
