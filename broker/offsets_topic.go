package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// Committed offsets live in the internal topic __consumer_offsets, stored like any other
// partition: a group belongs to partition hash(group) mod N, the leader of that partition
// is the group's coordinator, and a commit is one record batch appended to it (key: the
// group, value: JSON of the offsets). So a coordinator moves with its partition and the
// new leader restores the groups from the partition's data.
const offsetsTopic = tier.OffsetsTopic

// coordinatorPartition returns the __consumer_offsets partition of group, creating the
// topic if it does not exist yet.
func (b *Broker) coordinatorPartition(ctx context.Context, g string, create bool) (*metadata.Topic, int32, error) {
	t := b.meta.View().Topics[offsetsTopic]
	if t == nil && create {
		_, err := b.meta.CreateTopic(ctx, metadata.TopicSpec{Name: offsetsTopic, Partitions: b.cfg.OffsetsTopicPartitions, ReplicationFactor: -1,
			Configs: map[string]string{"cleanup.policy": "compact"}}, false)
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			return nil, 0, err
		}
		t = b.meta.View().Topics[offsetsTopic]
	}
	if t == nil || len(t.Partitions) == 0 {
		return nil, 0, metadata.ErrUnknownTopic
	}
	h := fnv.New32a()
	h.Write([]byte(g))
	return t, int32(h.Sum32() % uint32(len(t.Partitions))), nil
}

// A group's coordinator must not serve the group before the commits of its offsets
// partition are replayed: OffsetFetch would answer "no offset" (a consumer with
// auto.offset.reset=latest then skips records) and a commit made meanwhile would be
// overwritten by an older restored one. So an offsets partition led here is Loading from
// the moment it joins the partition set (partlog state Loading, then Ready until its
// restore completes) and Owned only once restoreGroups has applied every commit; the
// coordinator answers COORDINATOR_LOAD_IN_PROGRESS meanwhile (group.Config.Status) and
// offsetStore refuses to append to a partition not restored, so no commit can land
// behind the restore's snapshot of the log. Restored-ness is kept per *Partition: a
// partition lost and gained again is a new object and is restored again.
type groupLoads struct {
	mu       sync.Mutex
	restored map[partlog.Key]*partlog.Partition
}

func (l *groupLoads) done(p *partlog.Partition) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.restored[p.Key()] == p
}

func (l *groupLoads) markDone(p *partlog.Partition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.restored == nil {
		l.restored = map[partlog.Key]*partlog.Partition{}
	}
	l.restored[p.Key()] = p
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
		if b.groupLoads.done(p) {
			return group.Owned
		}
		return group.Loading
	}
	// Closing (moving away: commits can no longer be appended) or Gone.
	return group.NotOwned
}

// groupsLoading is group.Config.Loading: whether an offsets partition led here is not
// restored yet, so ListGroups would be incomplete.
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

// offsetStore makes committed offsets durable in the group's __consumer_offsets partition.
type offsetStore struct{ b *Broker }

func (s offsetStore) CommitOffsets(ctx context.Context, g string, offsets []group.Offset) error {
	b := s.b
	t, idx, err := b.coordinatorPartition(ctx, g, false)
	if err != nil {
		return kerr.NotCoordinator
	}
	p, err := b.lookup(t, idx, true)
	if err != nil {
		return kerr.NotCoordinator
	}
	if !b.groupLoads.done(p) {
		// The coordinator checked before calling, but the partition may have been lost and
		// gained again since: a commit appended now would follow the restore's snapshot
		// and be overwritten by older restored commits.
		return fmt.Errorf("broker: %s/%d not restored yet: %w", offsetsTopic, idx, kerr.CoordinatorLoadInProgress)
	}
	value, err := json.Marshal(offsets)
	if err != nil {
		return err
	}
	batch := recbatch.EncodeSingle([]byte(g), value, b.now().UnixMilli())
	h, err := recbatch.Parse(batch)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	b.appendBatch(p, &h, batch, false, func(_, _, _ int64, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restoreGroups replays the commits stored in an offsets partition into the coordinator,
// off the caller's goroutine (it may wait for object storage), and then marks the
// partition restored: its groups are served from then on. A failed read is retried with
// backoff until it succeeds, the partition is no longer led here, or the broker closes;
// going on with missing commits would serve stale offsets as if they were current.
func (b *Broker) restoreGroups(p *partlog.Partition) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		start := time.Now()
		delay := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			if b.ctx.Err() != nil || b.parts.Get(p.ID(), p.Index()) != p || p.State() == partlog.Gone {
				return
			}
			n, err := b.restoreOnce(p)
			if err == nil {
				b.groupLoads.markDone(p)
				if n > 0 || attempt > 1 {
					b.log.Info("group offsets restored", "partition", p.Index(), "commits", n, "attempts", attempt, "took", time.Since(start))
				}
				return
			}
			b.log.Warn("restoring group offsets failed; its groups answer COORDINATOR_LOAD_IN_PROGRESS until a retry succeeds",
				"partition", p.Index(), "attempt", attempt, "err", err)
			select {
			case <-time.After(delay):
			case <-b.ctx.Done():
				return
			}
			delay = min(2*delay, 2*time.Second)
		}
	}()
}

// errRestoreRead: a commit batch of an offsets partition could not be read.
var errRestoreRead = errors.New("broker: reading committed offsets failed")

// restoreOnce replays every commit of p in log order: those only object storage holds,
// then the index's. Replaying again after a failed attempt is harmless (each commit sets
// or deletes an offset; the last one in the log wins).
func (b *Broker) restoreOnce(p *partlog.Partition) (commits int, err error) {
	locs := p.Batches()
	// Objects are read only below the batches this snapshot indexes: a trim between the
	// snapshot and the object read raises the object span, and those batches would be
	// replayed twice (harmless, since the second pass runs on to the end, but wasted).
	indexed := int64(math.MaxInt64)
	if len(locs) > 0 {
		indexed = locs[0].Base
	}
	apply := func(off int64, data []byte) {
		err := recbatch.DecodeRecords(data, func(key, value []byte) {
			var offs []group.Offset
			if json.Unmarshal(value, &offs) != nil {
				return
			}
			for _, o := range offs {
				b.groups.Restore(string(key), o)
			}
			commits++
		})
		if err != nil {
			// Damaged data does not heal by reading again: skip it, loudly.
			b.log.Error("restoring group offsets: undecodable batch skipped", "partition", p.Index(), "offset", off, "err", err)
		}
	}
	if b.tier != nil {
		err := b.tier.ReadObjectBatches(b.ctx, p, func(off int64, data []byte) {
			if off < indexed {
				apply(off, data)
			}
		})
		if err != nil {
			return commits, fmt.Errorf("%w: %s/%d from objects: %w", errRestoreRead, offsetsTopic, p.Index(), err)
		}
	}
	for _, loc := range locs {
		data := loc.Data
		if data == nil {
			data = make([]byte, loc.Size)
			// A WAL segment trimmed since the snapshot fails here; the retry finds the
			// batch in objects.
			if err := loc.Src.ReadAt(data, loc.Pos); err != nil {
				return commits, fmt.Errorf("%w: %s/%d at offset %d: %w", errRestoreRead, offsetsTopic, p.Index(), loc.Base, err)
			}
		}
		apply(loc.Base, data)
	}
	return commits, nil
}
