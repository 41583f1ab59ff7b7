package broker

import (
	"context"
	"errors"
	"hash/fnv"

	"github.com/weir-io/weir/metadata"
)

// Groups live in the internal topic __consumer_offsets, stored like any other partition:
// a group belongs to partition hash(group) mod N, the leader of that partition is the
// group's coordinator, and each durable change of a group (group.Record: offsets, the
// membership of a generation, a deletion, a compaction's whole state) is one record batch
// appended to it (key: the group). So a coordinator moves with its partition, and the new
// leader loads the groups from the partition's data and resumes them without a rebalance.
const offsetsTopic = metadata.OffsetsTopic

// coordinatorPartition returns the __consumer_offsets partition of group, creating the
// topic if it does not exist yet.
func (b *Broker) coordinatorPartition(ctx context.Context, g string, create bool) (*metadata.Topic, int32, error) {
	t, err := b.internalTopic(ctx, offsetsTopic, b.cfg.OffsetsTopicPartitions, create)
	if err != nil {
		return nil, 0, err
	}
	return t, groupIndex(g, len(t.Partitions)), nil
}

// internalTopic returns a coordinator's internal topic (__consumer_offsets,
// __transaction_state), creating it compacted with partitions partitions if it does not
// exist yet and create is set.
func (b *Broker) internalTopic(ctx context.Context, name string, partitions int32, create bool) (*metadata.Topic, error) {
	t := b.meta.View().Topics[name]
	if t == nil && create {
		_, err := b.meta.CreateTopic(ctx, metadata.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: -1,
			Configs: map[string]string{"cleanup.policy": "compact"}}, false)
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			return nil, err
		}
		t = b.meta.View().Topics[name]
	}
	if t == nil || len(t.Partitions) == 0 {
		return nil, metadata.ErrUnknownTopic
	}
	return t, nil
}

// groupIndex is the __consumer_offsets partition of group g when the topic has n
// partitions.
func groupIndex(g string, n int) int32 {
	h := fnv.New32a()
	h.Write([]byte(g))
	return int32(h.Sum32() % uint32(n))
}
