package controller

import (
	"fmt"

	"github.com/weir-io/weir/metadata"
)

// Object manifests. An upload is prepare (an ID and a key for the broker's current
// registration) → PUT → commit (the object and, per partition, the offsets it holds) →
// the broker trims its WAL. The rules, checked when applied:
//
//   - prepare: only an active broker in its current epoch.
//   - commit: the object is prepared, by the same broker and epoch, and that epoch is
//     still current and active; the size is not negative; there are 1 to
//     metadata.MaxCommitRanges ranges, at most one per partition; every range has
//     0 <= First <= Last and Bytes >= 0 (MaxTimestamp and Bytes are copied into the
//     manifest as they are, for retention by time and size), names an existing
//     partition and continues its manifest: First == UploadedThrough, or
//     UploadedThrough < First <= LogStartOffset (the manifest ends below the log start:
//     offsets below it need not be stored), or, while the manifest is empty,
//     First <= max(0, LogStartOffset) (the first batch uploaded may straddle the log
//     start; DeleteRecords past the manifest's end empties it, see below). A range may
//     carry the partition's idempotent producer snapshot as of its end
//     (metadata.ProducerSnapshot: offset = Last + 1, 1..MaxSnapshotProducers producers
//     by ascending ID, each with 1..ProducerWindow batches of int32 sequences and
//     ascending offsets 0..Last); it replaces the partition's Producers, and a range
//     without one clears them (they would describe an older offset). The commit's
//     weight, one per range and two per snapshot producer, is at most
//     metadata.MaxCommitRanges. Anything else refuses the whole commit.
//   - set log start offset (cmd_topics.go): raising it drops the manifest's front ranges
//     that lie wholly below the new log start (metadata.TrimManifest); the producer
//     snapshot stays. An object whose
//     every range is dropped is referenced by no manifest: garbage, not expired. An
//     object shared with a partition whose data is still live stays referenced by that
//     partition only, so it no longer pins the objects behind it in the other
//     partitions' manifests.
//   - delete: IDs already deleted (below NextObjectID, no longer in the table) are
//     ignored, so a retry succeeds. A prepared object may always go (it has no ranges).
//     A committed object no manifest references (its topics were deleted, or the log
//     starts passed all its ranges) may always go. One still referenced may go when
//     each of its ranges is below its partition's log start offset and, together with
//     the other objects of the same command, forms the front of that partition's
//     manifest (retention removes from the front; such ranges stay in a manifest only
//     when committed below a log start raised before, or in state written before log
//     starts trimmed manifests). Deleted objects are dropped from the state: the broker
//     deletes the key from object storage before it calls DeleteObjects. The producer
//     snapshots stay.
//
// Refusals wrap metadata.ErrObjectRejected; a stale or fenced epoch also wraps
// metadata.ErrFenced, a partition that does not exist also metadata.ErrUnknownTopic.
// Whether the committing broker leads the partition is not checked: after a failover
// another broker uploads a dead broker's WAL tail, and continuity is the guard.
//
// The checks are metadata.ObjectRules (metadata/objects.go), shared with the
// single-node metadata.LocalStore; the commands here feed it the machine's state and
// store what it returns.

// ObjectKey is the object-storage key of object id (deterministic).
func ObjectKey(id uint64) string { return metadata.ObjectKey(id) }

// currentBroker checks that broker id is active in epoch.
func (m *machine) currentBroker(id int32, epoch int64) error {
	b, ok := m.st.Brokers[id]
	if !ok || b.Epoch != epoch || !b.Active() {
		return fmt.Errorf("%w: %w: broker %d epoch %d is not current", metadata.ErrObjectRejected, metadata.ErrFenced, id, epoch)
	}
	return nil
}

// objectRules checks object commands against the machine's state.
func (m *machine) objectRules() *metadata.ObjectRules {
	return &metadata.ObjectRules{
		Objects:   m.st.Objects,
		NextID:    m.st.NextObjectID,
		TopicByID: m.topicByID,
		Refs:      func(id uint64) []metadata.PartitionRef { return m.refs[id] },
		Current:   m.currentBroker,
	}
}

// setObjects stores a changed copy of the object table (copy-on-write).
func (m *machine) setObjects(change func(objs map[uint64]metadata.Object)) {
	m.st.Objects = metadata.WithObjects(m.st.Objects, change)
}

// setManifests stores the new manifests, one clone per topic, in the order of changes.
func (m *machine) setManifests(changes []metadata.ManifestChange) {
	clones := map[metadata.TopicID]*metadata.Topic{}
	var order []*metadata.Topic
	for _, ch := range changes {
		t := clones[ch.Topic]
		if t == nil {
			t = cloneTopic(m.topicByID(ch.Topic))
			clones[ch.Topic] = t
			order = append(order, t)
		}
		ch.ApplyTo(&t.Partitions[ch.Partition])
	}
	for _, t := range order {
		m.putTopic(t)
	}
}

// prepareObjectCmd hands out the next object ID (and its key) to a broker in its current
// epoch. The value is the metadata.Object.
type prepareObjectCmd struct {
	Broker int32 `json:"broker"`
	Epoch  int64 `json:"epoch"`
}

func (*prepareObjectCmd) kind() cmdType { return cmdPrepareObject }

func (c *prepareObjectCmd) apply(m *machine) (any, bool, error) {
	o, err := m.objectRules().Prepare(c.Broker, c.Epoch)
	if err != nil {
		return nil, false, err
	}
	m.st.NextObjectID = o.ID + 1
	m.setObjects(func(objs map[uint64]metadata.Object) { objs[o.ID] = o })
	return o, true, nil
}

// commitObjectCmd commits a prepared object and appends its ranges to the partitions'
// manifests (rules above).
type commitObjectCmd struct {
	ID     uint64                    `json:"id"`
	Broker int32                     `json:"broker"`
	Epoch  int64                     `json:"epoch"`
	Size   int64                     `json:"size"`
	Ranges []metadata.PartitionRange `json:"ranges"`
}

func (*commitObjectCmd) kind() cmdType { return cmdCommitObject }

func (c *commitObjectCmd) apply(m *machine) (any, bool, error) {
	o, changes, err := m.objectRules().Commit(c.ID, c.Broker, c.Epoch, c.Size, c.Ranges)
	if err != nil {
		return nil, false, err
	}
	m.setManifests(changes)
	for _, ch := range changes {
		m.refs[c.ID] = append(m.refs[c.ID], ch.PartitionRef)
	}
	m.setObjects(func(objs map[uint64]metadata.Object) { objs[c.ID] = o })
	return o, true, nil
}

// replaceRangesCmd commits a log cleaner's object in place of consecutive ranges of one
// partition's manifest (metadata.ObjectRules.Replace): only the partition's leader in the
// leader epoch it cleaned under, the replaced objects named in manifest order, the new
// range spanning exactly their offsets. The replaced objects lose the partition's
// reference (garbage once no manifest holds them).
type replaceRangesCmd struct {
	ID      uint64                `json:"id"`
	Broker  int32                 `json:"broker"`
	Epoch   int64                 `json:"epoch"`
	Size    int64                 `json:"size"`
	Replace metadata.RangeReplace `json:"replace"`
}

func (*replaceRangesCmd) kind() cmdType { return cmdReplaceRanges }

func (c *replaceRangesCmd) apply(m *machine) (any, bool, error) {
	o, ch, err := m.objectRules().Replace(c.ID, c.Broker, c.Epoch, c.Size, c.Replace)
	if err != nil {
		return nil, false, err
	}
	m.setManifests([]metadata.ManifestChange{ch})
	for _, old := range c.Replace.Replaces {
		m.dropRef(old, ch.PartitionRef)
	}
	m.refs[c.ID] = append(m.refs[c.ID], ch.PartitionRef)
	m.setObjects(func(objs map[uint64]metadata.Object) { objs[c.ID] = o })
	return o, true, nil
}

// deleteObjectsCmd forgets deleted objects and removes their ranges from the front of
// the manifests (rules above). The value is the number of objects removed.
type deleteObjectsCmd struct {
	IDs []uint64 `json:"ids"`
}

func (*deleteObjectsCmd) kind() cmdType { return cmdDeleteObjects }

func (c *deleteObjectsCmd) apply(m *machine) (any, bool, error) {
	drop, changes, err := m.objectRules().Delete(c.IDs)
	if err != nil {
		return nil, false, err
	}
	if len(drop) == 0 {
		return 0, false, nil
	}
	m.setManifests(changes)
	for _, id := range drop {
		delete(m.refs, id)
	}
	m.setObjects(func(objs map[uint64]metadata.Object) {
		for _, id := range drop {
			delete(objs, id)
		}
	})
	return len(drop), true, nil
}
