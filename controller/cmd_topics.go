package controller

import (
	"fmt"
	"slices"

	"github.com/weir-io/weir/metadata"
)

// createTopicCmd adds a topic whose UUID and partition leaders the leader already chose.
// Creating a topic that exists with the same UUID succeeds without change: that is a
// client retrying a create whose first answer it never got.
type createTopicCmd struct {
	Topic metadata.Topic `json:"topic"`
}

func (*createTopicCmd) kind() cmdType { return cmdCreateTopic }

func (c *createTopicCmd) apply(m *machine) (any, bool, error) {
	if old, ok := m.st.Topics[c.Topic.Name]; ok {
		if old.ID == c.Topic.ID {
			return old, false, nil
		}
		return nil, false, fmt.Errorf("%w: %q", metadata.ErrTopicExists, c.Topic.Name)
	}
	if c.Topic.ID.IsZero() || m.topicByID(c.Topic.ID) != nil {
		return nil, false, fmt.Errorf("%w: topic id %s in use", metadata.ErrTopicExists, c.Topic.ID)
	}
	if c.Topic.Name == "" || len(c.Topic.Partitions) == 0 {
		return nil, false, fmt.Errorf("%w: topic %q with %d partitions", metadata.ErrInvalidPartitions, c.Topic.Name, len(c.Topic.Partitions))
	}
	t := &metadata.Topic{Name: c.Topic.Name, ID: c.Topic.ID, Configs: map[string]string{}}
	for k, v := range c.Topic.Configs {
		t.Configs[k] = v
	}
	t.Partitions = make([]metadata.Partition, len(c.Topic.Partitions))
	for i, p := range c.Topic.Partitions {
		t.Partitions[i] = newPartition(int32(i), p.Leader)
	}
	m.putTopic(t)
	return t, true, nil
}

// deleteTopicCmd removes a topic by name (and UUID, when given).
type deleteTopicCmd struct {
	Name string           `json:"name"`
	ID   metadata.TopicID `json:"id"`
}

func (*deleteTopicCmd) kind() cmdType { return cmdDeleteTopic }

func (c *deleteTopicCmd) apply(m *machine) (any, bool, error) {
	t, ok := m.st.Topics[c.Name]
	if !ok || (!c.ID.IsZero() && t.ID != c.ID) {
		return nil, false, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, c.Name)
	}
	m.removeTopic(t)
	m.st.TopicTombstones = append(slices.Clip(m.st.TopicTombstones), t.ID)
	return t, true, nil
}

// createPartitionsCmd appends partitions (leaders chosen by the leader). The first new
// index must be the topic's current partition count, so a stale plan is refused.
type createPartitionsCmd struct {
	Name       string               `json:"name"`
	ID         metadata.TopicID     `json:"id"`
	Partitions []metadata.Partition `json:"partitions"`
}

func (*createPartitionsCmd) kind() cmdType { return cmdCreatePartitions }

func (c *createPartitionsCmd) apply(m *machine) (any, bool, error) {
	t, ok := m.st.Topics[c.Name]
	if !ok || (!c.ID.IsZero() && t.ID != c.ID) {
		return nil, false, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, c.Name)
	}
	if len(c.Partitions) == 0 {
		return nil, false, fmt.Errorf("%w: no partitions to add to %q", metadata.ErrInvalidPartitions, c.Name)
	}
	have := int32(len(t.Partitions))
	for i, p := range c.Partitions {
		if p.Index != have+int32(i) {
			return nil, false, fmt.Errorf("%w: topic %q has %d partitions, plan adds index %d", metadata.ErrInvalidPartitions, c.Name, have, p.Index)
		}
	}
	nt := cloneTopic(t)
	for _, p := range c.Partitions {
		nt.Partitions = append(nt.Partitions, newPartition(p.Index, p.Leader))
	}
	m.putTopic(nt)
	return nt, true, nil
}

// alterTopicConfigsCmd replaces a topic's explicit configs with the full new map the
// leader computed (and validated) from the incremental ops.
type alterTopicConfigsCmd struct {
	Name    string            `json:"name"`
	ID      metadata.TopicID  `json:"id"`
	Configs map[string]string `json:"configs"`
}

func (*alterTopicConfigsCmd) kind() cmdType { return cmdAlterTopicConfigs }

func (c *alterTopicConfigsCmd) apply(m *machine) (any, bool, error) {
	t, ok := m.st.Topics[c.Name]
	if !ok || (!c.ID.IsZero() && t.ID != c.ID) {
		return nil, false, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, c.Name)
	}
	nt := cloneTopic(t)
	nt.Configs = make(map[string]string, len(c.Configs))
	for k, v := range c.Configs {
		nt.Configs[k] = v
	}
	m.putTopic(nt)
	return nil, true, nil
}

// setLogStartOffsetCmd raises a partition's log start offset; it never moves back. The
// manifest's front ranges wholly below the new log start are dropped
// (metadata.TrimManifest), and with them the partition's entries in the reference index.
type setLogStartOffsetCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	Offset    int64            `json:"offset"`
}

func (*setLogStartOffsetCmd) kind() cmdType { return cmdSetLogStartOffset }

func (c *setLogStartOffsetCmd) apply(m *machine) (any, bool, error) {
	if c.Offset < 0 {
		return nil, false, fmt.Errorf("%w: %d", metadata.ErrInvalidOffset, c.Offset)
	}
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	if c.Offset <= p.LogStartOffset {
		return p.LogStartOffset, false, nil
	}
	p.LogStartOffset = c.Offset
	var dropped []uint64
	p.Objects, dropped = metadata.TrimManifest(p.Objects, c.Offset)
	for _, id := range dropped {
		m.dropRef(id, metadata.PartitionRef{Topic: t.ID, Partition: c.Partition})
	}
	m.putTopic(t)
	return c.Offset, true, nil
}
