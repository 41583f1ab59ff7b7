package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// State is the replicated metadata. Apply changes it copy-on-write: a *metadata.Topic
// stored in Topics is never modified after it was stored (a change stores a modified
// clone), so published Views and snapshots share topics with the live state safely.
type State struct {
	// ClusterID is set once, by the first command the first leader proposes.
	ClusterID string `json:"cluster_id"`
	// Version is bumped by every applied command that changes the state.
	Version uint64 `json:"version"`
	// NextProducerID is the first producer ID not handed out yet.
	NextProducerID int64                      `json:"next_producer_id"`
	Brokers        map[int32]metadata.Broker  `json:"brokers"`
	Topics         map[string]*metadata.Topic `json:"topics"`
	// NextObjectID is the next object ID to hand out (0 in a state that never had
	// objects: the first ID is 1, so 0 never names an object).
	NextObjectID uint64 `json:"next_object_id,omitempty"`
	// Objects holds the prepared and committed objects by ID; deleted ones are dropped.
	// Like Topics it is copy-on-write: a command that changes an object stores a new
	// map, so Views and snapshots share it safely. The per-partition ranges live in the
	// partitions (metadata.Partition.Objects). Manifests grow with objects × partitions:
	// compaction and a sparse index are planned (ARCHITECTURE.md).
	Objects map[uint64]metadata.Object `json:"objects,omitempty"`
	// Scram holds the users' SCRAM credentials (cmd_scram.go); copy-on-write like
	// Objects. Absent from snapshots without credentials.
	Scram metadata.ScramUsers `json:"scram,omitempty"`
	// ACLs are the ACL bindings, sorted (cmd_acls.go); copy-on-write like Objects.
	// Absent from snapshots written before ACLs existed: none.
	ACLs []acl.Binding `json:"acls,omitempty"`
	// TopicTombstones are the IDs of deleted topics, in deletion order: a View tells a
	// deleted topic (gone for good: IDs are never reused) from one it does not know yet
	// (metadata.View.TopicDeleted), which the WAL directory GC needs. Copy-on-write (a
	// deletion stores a new slice). Absent from snapshots written before it existed.
	TopicTombstones []metadata.TopicID `json:"topic_tombstones,omitempty"`
}

// UnmarshalJSON decodes a State. The "objects" field was reserved (and never written)
// before object manifests existed: an absent, null or empty value ({}, [], "") decodes
// as no objects. A "format_version" (see snapshotFile) other than SnapshotFormatVersion
// is refused with ErrSnapshotVersion; an absent one is version 1.
func (s *State) UnmarshalJSON(b []byte) error {
	type plain State
	aux := struct {
		*plain
		FormatVersion *uint32         `json:"format_version"`
		Objects       json.RawMessage `json:"objects"`
	}{plain: (*plain)(s)}
	err := json.Unmarshal(b, &aux)
	// Checked before err: a newer format may well not decode, and its version is the
	// reason to report. Unmarshal fills the fields it can despite type errors.
	if v := aux.FormatVersion; v != nil && *v != SnapshotFormatVersion {
		return fmt.Errorf("%w %d (this build reads %d)", ErrSnapshotVersion, *v, SnapshotFormatVersion)
	}
	if err != nil {
		return err
	}
	s.Objects = nil
	switch string(bytes.TrimSpace(aux.Objects)) {
	case "", "null", "{}", "[]", `""`:
		return nil
	}
	var objs map[uint64]metadata.Object
	if err := json.Unmarshal(aux.Objects, &objs); err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	for id, o := range objs {
		if o.ID != id || id == 0 {
			return fmt.Errorf("objects: entry %d is inconsistent", id)
		}
	}
	s.Objects = objs
	return nil
}

func newState() State {
	return State{Brokers: map[int32]metadata.Broker{}, Topics: map[string]*metadata.Topic{}}
}

// shallowCopy copies the maps (topics and the object table are immutable, brokers are
// values).
func (s *State) shallowCopy() State {
	c := *s
	c.Brokers = make(map[int32]metadata.Broker, len(s.Brokers))
	for k, v := range s.Brokers {
		c.Brokers[k] = v
	}
	c.Topics = make(map[string]*metadata.Topic, len(s.Topics))
	for k, v := range s.Topics {
		c.Topics[k] = v
	}
	return c
}

// topicByID finds a topic by UUID (linear; callers with many lookups use the FSM index).
func (s *State) topicByID(id metadata.TopicID) *metadata.Topic {
	for _, t := range s.Topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// view builds the immutable View of the state. It shares the (immutable) topics.
func (s *State) view() *metadata.View {
	brokers := make([]metadata.Broker, 0, len(s.Brokers))
	for _, b := range s.Brokers {
		brokers = append(brokers, b)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].ID < brokers[j].ID })
	topics := make(map[string]*metadata.Topic, len(s.Topics))
	for k, v := range s.Topics {
		topics[k] = v
	}
	v := metadata.NewViewWithObjects(s.Version, s.ClusterID, -1, brokers, topics, s.Objects)
	v.Scram = s.Scram
	v.ACLs = acl.NewSet(s.ACLs)
	v.SetTopicTombstones(s.TopicTombstones)
	return v
}

// cloneTopic returns a deep copy of t that a command may modify before storing it. The
// object manifests are shared, clipped so that an append copies: a command replaces a
// manifest slice, it never writes into one.
func cloneTopic(t *metadata.Topic) *metadata.Topic {
	c := *t
	c.Partitions = make([]metadata.Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		p.Logs = append([]metadata.LogRange(nil), p.Logs...)
		p.Objects = slices.Clip(p.Objects)
		c.Partitions[i] = p
	}
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	return &c
}

// newPartition is a partition as it is born: led by leader from offset 0, epoch 0.
func newPartition(index, leader int32) metadata.Partition {
	return metadata.Partition{
		Index:    index,
		Leader:   leader,
		Logs:     []metadata.LogRange{{Broker: leader, StartOffset: 0}},
		MovingTo: -1,
	}
}
