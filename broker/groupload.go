package broker

// groupload.go keeps the group coordinator's groups in step with the __consumer_offsets
// partitions this broker leads: a partition that becomes Ready here is loaded (its records
// replayed into the coordinator, group.Coordinator.Load) before its groups are served; a
// partition that stops being Ready here (a graceful move begins, it is dropped, the
// broker is fenced) has its groups unloaded at once, so nothing of an earlier tenure is
// ever served again; and a served partition whose log has grown is compacted (each group's
// whole state written again, then the log start raised past the older records), which
// bounds both its size and the time the next coordinator takes to load it.
//
// One worker goroutine per partition index does all of this, so the load, unload and
// compaction of a partition never overlap; syncPartitions only wakes it (kick). Until the
// worker has loaded the current Ready partition object, groupStatus answers Loading:
//
//	partition here?  state     served == p   groupStatus
//	no               -         -             NotOwned
//	yes              Loading   -             Loading
//	yes              Ready     no            Loading   (the worker is loading it)
//	yes              Ready     yes           Owned
//	yes              Closing   -             NotOwned  (the worker unloads it)
//
// A group write appended while its partition is not loaded would follow the load's
// snapshot of the log and be overwritten in memory by older records, so offsetStore
// refuses it (the coordinator checks Status before writing too).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// groupParts holds one groupPart per __consumer_offsets partition index.
type groupParts struct {
	mu    sync.Mutex
	parts map[int32]*groupPart
}

// groupPart is one __consumer_offsets partition index on this broker.
type groupPart struct {
	idx  int32
	kick chan struct{} // wakes the worker (buffered 1: kicks coalesce)
	// served is the partition object whose groups the coordinator holds now (nil: none).
	// Set by the worker after a load, cleared by syncGroupLoads as soon as the partition
	// is seen leaving Ready (so a move cancelled before the worker ran still reloads).
	served atomic.Pointer[partlog.Partition]
	// logBytes approximates the bytes of the served partition above its log start: what
	// the load read plus what was appended since. fullBytes is what the last compaction
	// wrote. Compaction runs when logBytes passes max(OffsetsCompactBytes, 2×fullBytes).
	logBytes, fullBytes atomic.Int64
	compacting          atomic.Bool // Full records written now count in fullBytes
}

// part returns the groupPart of index idx, starting its worker the first time.
func (b *Broker) groupPart(idx int32) *groupPart {
	gs := &b.groupParts
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.parts == nil {
		gs.parts = map[int32]*groupPart{}
	}
	gp := gs.parts[idx]
	if gp == nil {
		gp = &groupPart{idx: idx, kick: make(chan struct{}, 1)}
		gs.parts[idx] = gp
		// No worker once Close began: its wg.Wait must not race a new Add (Close takes
		// this lock after cancelling, so a caller that saw the broker open has added).
		if b.ctx.Err() == nil {
			b.wg.Add(1)
			go b.groupWorker(gp)
		}
	}
	return gp
}

func (gp *groupPart) wake() {
	select {
	case gp.kick <- struct{}{}:
	default:
	}
}

// groupStatus is group.Config.Status: where this broker stands for the group's offsets
// partition.
func (b *Broker) groupStatus(g string) group.OwnStatus {
	t, idx, err := b.coordinatorPartition(context.Background(), g, false)
	if err != nil {
		return group.NotOwned
	}
	return b.offsetsStatus(b.parts.Get(t.ID, idx))
}

func (b *Broker) offsetsStatus(p *partlog.Partition) group.OwnStatus {
	if p == nil {
		return group.NotOwned
	}
	switch p.State() {
	case partlog.Loading:
		return group.Loading
	case partlog.Ready:
		if b.groupPart(p.Index()).served.Load() == p {
			return group.Owned
		}
		return group.Loading
	}
	// Closing (moving away: nothing can be appended) or Gone.
	return group.NotOwned
}

// groupsLoading is group.Config.Loading: whether an offsets partition led here is not
// loaded yet, so ListGroups would be incomplete.
func (b *Broker) groupsLoading() bool {
	t := b.meta.View().Topics[offsetsTopic]
	if t == nil {
		return false
	}
	for i := range t.Partitions {
		if b.offsetsStatus(b.parts.Get(t.ID, int32(i))) == group.Loading {
			return true
		}
	}
	return false
}

// syncGroupLoads wakes the worker of every offsets partition that is led here or was
// served here, after a metadata view was applied or a load finished. A partition served
// but no longer Ready here stops being served at once.
func (b *Broker) syncGroupLoads(v *metadata.View) {
	if v == nil {
		return
	}
	t := v.Topics[offsetsTopic]
	b.groupParts.mu.Lock()
	var gps []*groupPart
	for _, gp := range b.groupParts.parts {
		gps = append(gps, gp)
	}
	b.groupParts.mu.Unlock()
	seen := map[int32]bool{}
	for _, gp := range gps {
		seen[gp.idx] = true
		if p := gp.served.Load(); p != nil && (t == nil || b.parts.Get(t.ID, gp.idx) != p || p.State() != partlog.Ready) {
			gp.served.CompareAndSwap(p, nil)
		}
		gp.wake()
	}
	if t == nil {
		return
	}
	for i := range t.Partitions {
		if !seen[int32(i)] && b.parts.Get(t.ID, int32(i)) != nil {
			b.groupPart(int32(i)).wake()
		}
	}
}

// restoreGroups asks the worker of p's index to load it (p just became Ready here).
func (b *Broker) restoreGroups(p *partlog.Partition) { b.groupPart(p.Index()).wake() }

// belongsTo selects the groups of offsets partition idx (of n).
func belongsTo(idx int32, n int) func(string) bool {
	return func(g string) bool { return groupIndex(g, n) == idx }
}

// groupWorker loads, unloads and compacts one offsets partition index (see the file
// comment) until the broker closes.
func (b *Broker) groupWorker(gp *groupPart) {
	defer b.wg.Done()
	var (
		loaded   bool // the coordinator holds groups of this index
		failures int  // consecutive failed loads of the current partition
	)
	tick := time.NewTicker(b.cfg.OffsetsCompactCheck)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	lastN := 0 // the topic's partition count when last seen, to unload after it is gone
	for {
		compact := false
		select {
		case <-b.ctx.Done():
			return
		case <-gp.kick:
		case <-retry.C:
		case <-tick.C:
			compact = true
		}
		t := b.meta.View().Topics[offsetsTopic]
		var p *partlog.Partition
		n := 0
		if t != nil {
			p, n = b.parts.Get(t.ID, gp.idx), len(t.Partitions)
			lastN = n
		}
		ready := p != nil && p.State() == partlog.Ready
		served := gp.served.Load()
		switch {
		case !ready:
			gp.served.Store(nil)
			failures = 0
			if loaded && lastN > 0 {
				dropped := b.groups.Unload(belongsTo(gp.idx, lastN))
				b.log.Info("groups unloaded: their offsets partition is no longer served here", "partition", gp.idx, "groups", dropped)
			}
			loaded = false
		case served != p:
			start := time.Now()
			st, bytes, err := b.loadGroups(p, n)
			loaded = true // Load may have unloaded what was there
			if err != nil {
				failures++
				delay := min(50*time.Millisecond<<min(failures-1, 6), 2*time.Second)
				b.log.Warn("loading groups failed; they answer COORDINATOR_LOAD_IN_PROGRESS until a retry succeeds",
					"partition", gp.idx, "attempt", failures, "retry_in", delay, "err", err)
				retry.Reset(delay)
				continue
			}
			failures = 0
			gp.logBytes.Store(bytes)
			gp.fullBytes.Store(0)
			// Served only if p is still Ready here; otherwise the next kick (queued by
			// the view change that took it) unloads it.
			if b.parts.Get(p.ID(), p.Index()) == p && p.State() == partlog.Ready {
				gp.served.Store(p)
			}
			gp.wake()
			b.metrics.groupLoad(time.Since(start))
			if st.Records > 0 {
				b.log.Info("groups loaded", "partition", gp.idx, "records", st.Records, "bytes", bytes, "groups", st.Groups, "members", st.Members, "took", time.Since(start))
			}
		case compact:
			if b.shouldCompactGroups(gp) {
				if err := b.compactGroups(p, n, gp); err != nil {
					b.log.Warn("compacting group records failed; retried at the next check", "partition", gp.idx, "err", err)
				}
			}
		}
	}
}

// errGroupRead: a group record batch of an offsets partition could not be read.
var errGroupRead = errors.New("broker: reading group records failed")

// loadGroups replays every group record of p in log order (replayPartition) into the
// coordinator, replacing the groups of p's index. It returns the bytes read.
func (b *Broker) loadGroups(p *partlog.Partition, n int) (group.LoadStats, int64, error) {
	var bytes int64
	st, err := b.groups.Load(belongsTo(p.Index(), n), func(apply func(string, group.Record)) error {
		var err error
		bytes, err = b.replayPartition(p, offsetsTopic, errGroupRead, func(off int64, data []byte) {
			if h, err := recbatch.Parse(data); err == nil && h.Control() {
				// A transaction marker holds no group record: a transaction's end in a
				// group is the group's own record (group.Record.TxnEnds, CompleteTxn).
				return
			}
			err := recbatch.DecodeRecords(data, func(key, value []byte) {
				rec, err := group.DecodeRecord(value)
				if err != nil {
					b.log.Error("loading groups: undecodable record skipped", "partition", p.Index(), "offset", off, "group", string(key), "err", err)
					return
				}
				apply(string(key), rec)
			})
			if err != nil {
				// Damaged data does not heal by reading again: skip it, loudly.
				b.log.Error("loading groups: undecodable batch skipped", "partition", p.Index(), "offset", off, "err", err)
			}
		})
		return err
	})
	return st, bytes, err
}

// replayPartition calls one with every batch of p in log order (those only object
// storage holds, then the index's) and returns the bytes read: how a coordinator loads
// the state its internal partition holds. A failed read fails the whole replay (going
// on with missing records would serve stale state as if it were current), wrapping
// readErr.
func (b *Broker) replayPartition(p *partlog.Partition, topic string, readErr error, one func(off int64, data []byte)) (int64, error) {
	var bytes int64
	locs := p.Batches()
	// Objects are read only below the batches this snapshot indexes: a trim between the
	// snapshot and the object read raises the object span, and those batches would be
	// replayed twice (harmless for state whose later records win, but wasted).
	indexed := int64(math.MaxInt64)
	if len(locs) > 0 {
		indexed = locs[0].Base
	}
	if b.tier != nil {
		err := b.tier.ReadObjectBatches(b.ctx, p, func(off int64, data []byte) {
			if off < indexed {
				bytes += int64(len(data))
				one(off, data)
			}
		})
		if err != nil {
			return bytes, fmt.Errorf("%w: %s/%d from objects: %w", readErr, topic, p.Index(), err)
		}
	}
	for _, loc := range locs {
		data := loc.Data
		if data == nil {
			data = make([]byte, loc.Size)
			// A WAL segment trimmed since the snapshot fails here; the retry finds the
			// batch in objects.
			if err := loc.Src.ReadAt(data, loc.Pos); err != nil {
				return bytes, fmt.Errorf("%w: %s/%d at offset %d: %w", readErr, topic, p.Index(), loc.Base, err)
			}
		}
		bytes += int64(len(data))
		one(loc.Base, data)
	}
	return bytes, nil
}

// shouldCompactGroups: the served log has grown past max(OffsetsCompactBytes, twice what
// the last compaction wrote), so that compaction work stays proportional to the growth.
func (b *Broker) shouldCompactGroups(gp *groupPart) bool {
	if b.cfg.OffsetsCompactBytes <= 0 {
		return false
	}
	return gp.logBytes.Load() > max(b.cfg.OffsetsCompactBytes, 2*gp.fullBytes.Load())
}

// compactGroups writes every group's whole state of p again and then raises p's log
// start to the end p had before: every record below it is superseded (group.Compact).
func (b *Broker) compactGroups(p *partlog.Partition, n int, gp *groupPart) error {
	if gp.served.Load() != p {
		return nil
	}
	start := time.Now()
	before := gp.logBytes.Load()
	end := p.End()
	gp.fullBytes.Store(0)
	gp.compacting.Store(true)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	written, err := b.groups.Compact(ctx, belongsTo(p.Index(), n))
	gp.compacting.Store(false)
	if err != nil {
		return err
	}
	if gp.served.Load() != p {
		return nil
	}
	if err := b.meta.SetLogStartOffset(ctx, p.ID(), p.Index(), end); err != nil {
		return fmt.Errorf("raising the log start to %d: %w", end, err)
	}
	p.SetLogStart(end) // at once, as DeleteRecords does; the view follows
	full := gp.fullBytes.Load()
	gp.logBytes.Add(-before) // what is left: the Full records and what came meanwhile
	b.metrics.groupCompactions.Inc()
	b.log.Info("group records compacted", "partition", p.Index(), "groups", written, "bytes_before", before, "bytes_written", full, "log_start", end, "took", time.Since(start))
	return nil
}

// offsetStore makes group records durable in the group's __consumer_offsets partition.
type offsetStore struct{ b *Broker }

func (s offsetStore) Write(ctx context.Context, g string, rec group.Record) error {
	b := s.b
	t, idx, err := b.coordinatorPartition(ctx, g, false)
	if err != nil {
		return fmt.Errorf("%w: %v", group.ErrNotOwned, err)
	}
	p, err := b.lookup(t, idx, true)
	if err != nil {
		return fmt.Errorf("%w: %v", group.ErrNotOwned, err)
	}
	gp := b.groupPart(idx)
	if gp.served.Load() != p {
		// The coordinator checked before calling, but the partition may have been lost
		// and gained again since: a record appended now would follow the load's
		// snapshot of the log and be overwritten by older loaded records.
		return fmt.Errorf("broker: %s/%d not loaded yet: %w", offsetsTopic, idx, group.ErrLoading)
	}
	value, err := group.EncodeRecord(rec)
	if err != nil {
		return err
	}
	n, err := b.appendRecord(ctx, p, []byte(g), value)
	if err == nil {
		gp.logBytes.Add(int64(n))
		if rec.Full && gp.compacting.Load() {
			gp.fullBytes.Add(int64(n))
		}
	}
	return err
}

// expireOffsetsLoop removes expired offsets and those of deleted topics every
// OffsetsRetentionCheck (group.Coordinator.Expire).
func (b *Broker) expireOffsetsLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.OffsetsRetentionCheck)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		if n := b.groups.Expire(ctx); n > 0 {
			b.log.Info("expired committed offsets removed", "offsets", n)
		}
		cancel()
	}
}
