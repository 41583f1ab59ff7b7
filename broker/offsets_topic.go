package broker

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"

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

// ownsGroup reports whether this broker leads the group's offsets partition.
func (b *Broker) ownsGroup(g string) bool {
	t, idx, err := b.coordinatorPartition(context.Background(), g, false)
	if err != nil {
		return false
	}
	_, err = b.lookup(t, idx, true)
	return err == nil
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

// restoreGroups replays the commits stored in an offsets partition into the coordinator.
func (b *Broker) restoreGroups(p *partlog.Partition) {
	locs := p.Batches()
	n := 0
	apply := func(off int64, data []byte) {
		err := recbatch.DecodeRecords(data, func(key, value []byte) {
			var offs []group.Offset
			if json.Unmarshal(value, &offs) != nil {
				return
			}
			for _, o := range offs {
				b.groups.Restore(string(key), o)
			}
			n++
		})
		if err != nil {
			b.log.Warn("restoring group offsets: undecodable batch", "partition", p.Index(), "offset", off, "err", err)
		}
	}
	// Older commits first: those only object storage holds, then the index's.
	if b.tier != nil {
		if err := b.tier.ReadObjectBatches(b.ctx, p, apply); err != nil {
			b.log.Error("restoring group offsets: object read failed; older commits are missing", "partition", p.Index(), "err", err)
		}
	}
	for _, loc := range locs {
		data := loc.Data
		if data == nil {
			data = make([]byte, loc.Size)
			if err := loc.Src.ReadAt(data, loc.Pos); err != nil {
				b.log.Error("restoring group offsets: read failed", "partition", p.Index(), "offset", loc.Base, "err", err)
				continue
			}
		}
		apply(loc.Base, data)
	}
	if n > 0 {
		b.log.Info("group offsets restored", "partition", p.Index(), "commits", n)
	}
}
