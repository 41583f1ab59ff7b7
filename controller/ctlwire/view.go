package ctlwire

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// The metadata watch's answers (GET /v1/metadata): a full View, or with delta=1 a delta
// from the version the client has (the controller's delta.go decides which and builds
// it). Applied to the View at DeltaFrom a delta gives exactly the View a full fetch
// would.

// ViewJSON is the body of GET /v1/metadata: the whole metadata at one version.
type ViewJSON struct {
	Version      uint64                     `json:"version"`
	ClusterID    string                     `json:"cluster_id"`
	ControllerID int32                      `json:"controller_id"`
	Brokers      []metadata.Broker          `json:"brokers"`
	Topics       map[string]*metadata.Topic `json:"topics"`
	// Objects: the prepared and committed objects, by ID (a JSON object keyed by the
	// decimal ID).
	Objects map[uint64]metadata.Object `json:"objects,omitempty"`
	// Scram: the users' SCRAM credentials (salts and keys, never passwords), which
	// brokers check SASL logins against.
	Scram metadata.ScramUsers `json:"scram,omitempty"`
	// ACLs: the ACL bindings (absent: none).
	ACLs []acl.Binding `json:"acls,omitempty"`

	// A delta (asked for with delta=1; the controller's delta.go builds it) has
	// DeltaFrom, the version it applies to. Then Brokers is whole, Topics holds only
	// created or replaced topics and TopicParts changed partitions of others, Objects
	// only changed objects; Scram and ACLs count only when ScramSet and ACLsSet.
	DeltaFrom      uint64                    `json:"delta_from,omitempty"`
	TopicParts     map[string]TopicPartsJSON `json:"topic_parts,omitempty"`
	DeletedTopics  []string                  `json:"deleted_topics,omitempty"`
	DeletedObjects []uint64                  `json:"deleted_objects,omitempty"`
	ScramSet       bool                      `json:"scram_set,omitempty"`
	ACLsSet        bool                      `json:"acls_set,omitempty"`
	// TopicTombstones: the IDs of every deleted topic (View.TopicDeleted), whole in a
	// delta too; absent in a delta: unchanged (tombstones are only ever added).
	TopicTombstones []metadata.TopicID `json:"topic_tombstones,omitempty"`
}

// FromView is the full View v as a controller answers it.
func FromView(v *metadata.View) ViewJSON {
	return ViewJSON{Version: v.Version, ClusterID: v.ClusterID, ControllerID: v.ControllerID, Brokers: v.Brokers, Topics: v.Topics, Objects: v.Objects, Scram: v.Scram, ACLs: v.ACLSet().Bindings(), TopicTombstones: v.TopicTombstones()}
}

// TopicPartsJSON is a delta's change to a topic that kept its name, ID and partition
// count: its configs and the changed partitions, each with its position (At).
type TopicPartsJSON struct {
	ID         metadata.TopicID     `json:"id"`
	Count      int                  `json:"count"`
	Configs    map[string]string    `json:"configs,omitempty"`
	Partitions []metadata.Partition `json:"partitions"`
	// At is each of Partitions' position in the topic's partition list.
	At []int32 `json:"at"`
}

// ToView is the full View vj (DeltaFrom 0) with controllerID as its ControllerID (a
// broker's client puts its own ID there).
func ToView(vj *ViewJSON, controllerID int32) *metadata.View {
	v := metadata.NewViewWithObjects(vj.Version, vj.ClusterID, controllerID, vj.Brokers, vj.Topics, vj.Objects)
	v.Scram = vj.Scram
	v.ACLs = acl.NewSet(vj.ACLs)
	v.SetTopicTombstones(vj.TopicTombstones)
	return v
}

// ErrStaleDelta: a delta does not fit the client's View (another base version, or a
// topic that differs); the client fetches a full View instead.
var ErrStaleDelta = errors.New("ctlwire: delta does not fit the view")

// ApplyDelta returns the View that delta vj (DeltaFrom == base.Version) makes of base,
// sharing base's unchanged topics, or an error when vj does not fit base.
func ApplyDelta(base *metadata.View, vj *ViewJSON, controllerID int32) (*metadata.View, error) {
	if base == nil {
		return nil, fmt.Errorf("%w: delta from version %d, have no view", ErrStaleDelta, vj.DeltaFrom)
	}
	if base.Version != vj.DeltaFrom {
		return nil, fmt.Errorf("%w: delta from version %d, have %d", ErrStaleDelta, vj.DeltaFrom, base.Version)
	}
	topics := make(map[string]*metadata.Topic, len(base.Topics)+len(vj.Topics))
	for name, t := range base.Topics {
		topics[name] = t
	}
	for _, name := range vj.DeletedTopics {
		delete(topics, name)
	}
	for name, t := range vj.Topics {
		topics[name] = t
	}
	for name, tp := range vj.TopicParts {
		o := topics[name]
		if o == nil || o.ID != tp.ID || len(o.Partitions) != tp.Count {
			return nil, fmt.Errorf("%w: topic %q does not match the base", ErrStaleDelta, name)
		}
		if len(tp.Partitions) == 0 && maps.Equal(o.Configs, tp.Configs) {
			continue // nothing a View shows changed: keep the topic (brokers skip it)
		}
		t := &metadata.Topic{Name: name, ID: tp.ID, Configs: tp.Configs, Partitions: slices.Clone(o.Partitions)}
		if len(tp.At) != len(tp.Partitions) {
			return nil, fmt.Errorf("%w: topic %q: %d positions for %d partitions", ErrStaleDelta, name, len(tp.At), len(tp.Partitions))
		}
		for k, p := range tp.Partitions {
			at := tp.At[k]
			if at < 0 || int(at) >= len(t.Partitions) {
				return nil, fmt.Errorf("%w: topic %q position %d out of range", ErrStaleDelta, name, at)
			}
			t.Partitions[at] = p
		}
		topics[name] = t
	}
	objects := base.Objects
	if len(vj.Objects) > 0 || len(vj.DeletedObjects) > 0 {
		objects = make(map[uint64]metadata.Object, len(base.Objects)+len(vj.Objects))
		for id, o := range base.Objects {
			objects[id] = o
		}
		for _, id := range vj.DeletedObjects {
			delete(objects, id)
		}
		for id, o := range vj.Objects {
			objects[id] = o
		}
		if len(objects) == 0 {
			objects = nil
		}
	}
	v := metadata.NewViewWithObjects(vj.Version, vj.ClusterID, controllerID, vj.Brokers, topics, objects)
	v.Scram, v.ACLs = base.Scram, base.ACLs
	v.SetTopicTombstones(base.TopicTombstones())
	if vj.TopicTombstones != nil {
		v.SetTopicTombstones(vj.TopicTombstones)
	}
	if vj.ScramSet {
		v.Scram = vj.Scram
	}
	if vj.ACLsSet {
		v.ACLs = acl.NewSet(vj.ACLs)
	}
	return v, nil
}
