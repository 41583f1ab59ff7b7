package controller

import (
	"fmt"
	"maps"
	"slices"

	"github.com/weir-io/weir/metadata"
)

// Object manifests. An upload is prepare (an ID and a key for the broker's current
// registration) → PUT → commit (the object and, per partition, the offsets it holds) →
// the broker trims its WAL. The rules, checked when applied:
//
//   - prepare: only an active broker in its current epoch.
//   - commit: the object is prepared, by the same broker and epoch, and that epoch is
//     still current and active; the size is not negative; there is at least one range,
//     at most one per partition; every range has 0 <= First <= Last, names an existing
//     partition and continues its manifest: First == UploadedThrough, or, while the
//     manifest is empty, First <= max(0, LogStartOffset) (the first batch uploaded may
//     straddle the log start). Anything else refuses the whole commit.
//   - delete: IDs already deleted (below NextObjectID, no longer in the table) are
//     ignored, so a retry succeeds. A prepared object may always go (it has no ranges).
//     A committed object may go when each of its ranges is below its partition's log
//     start offset and, together with the other objects of the same command, forms the
//     front of that partition's manifest (retention removes from the front; an object
//     no manifest references, because its topics were deleted, may always go). Deleted
//     objects are dropped from the state: the broker deletes the key from object
//     storage before it calls DeleteObjects.
//
// Refusals wrap metadata.ErrObjectRejected; a stale or fenced epoch also wraps
// metadata.ErrFenced, a partition that does not exist also metadata.ErrUnknownTopic.
// Whether the committing broker leads the partition is not checked: after a failover
// another broker uploads a dead broker's WAL tail, and continuity is the guard.

// Bounds of one command (also enforced by the API; a commit of maxCommitRanges ranges
// stays below the default MaxBodyBytes of 4 MiB).
const (
	maxCommitRanges   = 20000
	maxDeleteObjects  = 100000
	objectKeyTemplate = "objects/%020d.obj"
)

// ObjectKey is the object-storage key of object id (deterministic).
func ObjectKey(id uint64) string { return fmt.Sprintf(objectKeyTemplate, id) }

func rejected(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{metadata.ErrObjectRejected}, args...)...)
}

// currentBroker checks that broker id is active in epoch.
func (m *machine) currentBroker(id int32, epoch int64) error {
	b, ok := m.st.Brokers[id]
	if !ok || b.Epoch != epoch || !b.Active() {
		return fmt.Errorf("%w: %w: broker %d epoch %d is not current", metadata.ErrObjectRejected, metadata.ErrFenced, id, epoch)
	}
	return nil
}

// setObjects stores a changed copy of the object table (copy-on-write).
func (m *machine) setObjects(change func(objs map[uint64]metadata.Object)) {
	objs := maps.Clone(m.st.Objects)
	if objs == nil {
		objs = map[uint64]metadata.Object{}
	}
	change(objs)
	if len(objs) == 0 {
		objs = nil
	}
	m.st.Objects = objs
}

// prepareObjectCmd hands out the next object ID (and its key) to a broker in its current
// epoch. The value is the metadata.Object.
type prepareObjectCmd struct {
	Broker int32 `json:"broker"`
	Epoch  int64 `json:"epoch"`
}

func (*prepareObjectCmd) kind() cmdType { return cmdPrepareObject }

func (c *prepareObjectCmd) apply(m *machine) (any, bool, error) {
	if err := m.currentBroker(c.Broker, c.Epoch); err != nil {
		return nil, false, err
	}
	id := max(m.st.NextObjectID, 1)
	m.st.NextObjectID = id + 1
	o := metadata.Object{ID: id, Key: ObjectKey(id), State: metadata.ObjectPrepared, Broker: c.Broker, Epoch: c.Epoch}
	m.setObjects(func(objs map[uint64]metadata.Object) { objs[id] = o })
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
	o, ok := m.st.Objects[c.ID]
	switch {
	case !ok && c.ID > 0 && c.ID < m.st.NextObjectID:
		return nil, false, rejected("object %d was deleted", c.ID)
	case !ok:
		return nil, false, rejected("unknown object %d", c.ID)
	case o.State != metadata.ObjectPrepared:
		return nil, false, rejected("object %d is %s, not prepared", c.ID, o.State)
	case o.Broker != c.Broker || o.Epoch != c.Epoch:
		return nil, false, rejected("object %d was prepared by broker %d epoch %d, not broker %d epoch %d", c.ID, o.Broker, o.Epoch, c.Broker, c.Epoch)
	}
	if err := m.currentBroker(c.Broker, c.Epoch); err != nil {
		return nil, false, err
	}
	if c.Size < 0 {
		return nil, false, rejected("object %d: size %d", c.ID, c.Size)
	}
	if len(c.Ranges) == 0 || len(c.Ranges) > maxCommitRanges {
		return nil, false, rejected("object %d: %d ranges (must be 1..%d)", c.ID, len(c.Ranges), maxCommitRanges)
	}
	// Validate everything first, on clones; store only if all ranges pass.
	topics := map[metadata.TopicID]*metadata.Topic{}
	var order []*metadata.Topic
	seen := make(map[partRef]bool, len(c.Ranges))
	for _, r := range c.Ranges {
		ref := partRef{r.Topic, r.Partition}
		if seen[ref] {
			return nil, false, rejected("object %d: partition %s/%d named twice", c.ID, r.Topic, r.Partition)
		}
		seen[ref] = true
		if r.FirstOffset < 0 || r.FirstOffset > r.LastOffset {
			return nil, false, rejected("object %d: range %d..%d of %s/%d", c.ID, r.FirstOffset, r.LastOffset, r.Topic, r.Partition)
		}
		t := topics[r.Topic]
		if t == nil {
			orig := m.topicByID(r.Topic)
			if orig == nil {
				return nil, false, fmt.Errorf("%w: %w: object %d: topic id %s", metadata.ErrObjectRejected, metadata.ErrUnknownTopic, c.ID, r.Topic)
			}
			t = cloneTopic(orig)
			topics[r.Topic] = t
			order = append(order, t)
		}
		if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			return nil, false, fmt.Errorf("%w: %w: object %d: partition %d of %q", metadata.ErrObjectRejected, metadata.ErrUnknownTopic, c.ID, r.Partition, t.Name)
		}
		p := &t.Partitions[r.Partition]
		if next := p.UploadedThrough(); next >= 0 {
			if r.FirstOffset != next {
				return nil, false, rejected("object %d: %s/%d continues at %d, range starts at %d", c.ID, t.Name, r.Partition, next, r.FirstOffset)
			}
		} else if start := max(0, p.LogStartOffset); r.FirstOffset > start {
			return nil, false, rejected("object %d: %s/%d has no objects and starts at %d, range starts at %d", c.ID, t.Name, r.Partition, start, r.FirstOffset)
		}
		p.Objects = append(p.Objects, metadata.ObjectRange{Object: c.ID, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset})
	}
	for _, t := range order {
		m.putTopic(t)
	}
	for _, r := range c.Ranges {
		m.refs[c.ID] = append(m.refs[c.ID], partRef{r.Topic, r.Partition})
	}
	o.State = metadata.ObjectCommitted
	o.Size = c.Size
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
	if len(c.IDs) == 0 || len(c.IDs) > maxDeleteObjects {
		return nil, false, rejected("%d objects to delete (must be 1..%d)", len(c.IDs), maxDeleteObjects)
	}
	batch := make(map[uint64]bool, len(c.IDs))
	var ids []uint64 // in the table, in request order, once each
	for _, id := range c.IDs {
		if batch[id] {
			continue
		}
		if _, ok := m.st.Objects[id]; !ok {
			if id == 0 || id >= max(m.st.NextObjectID, 1) {
				return nil, false, rejected("unknown object %d", id)
			}
			continue // deleted before
		}
		batch[id] = true
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return 0, false, nil
	}
	// The partitions holding ranges of the batch, in a deterministic order.
	var parts []partRef
	inParts := map[partRef]bool{}
	for _, id := range ids {
		for _, ref := range m.refs[id] {
			if !inParts[ref] {
				inParts[ref] = true
				parts = append(parts, ref)
			}
		}
	}
	slices.SortFunc(parts, func(a, b partRef) int {
		if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return int(a.partition) - int(b.partition)
	})
	// Each batch range must lie in the manifest prefix made of batch objects, below the
	// log start offset; count them to catch ranges further back.
	found := map[uint64]int{}
	cut := make([]int, len(parts))
	topics := map[metadata.TopicID]*metadata.Topic{}
	for i, ref := range parts {
		t := m.topicByID(ref.topic)
		p := t.Partitions[ref.partition]
		n := 0
		for n < len(p.Objects) && batch[p.Objects[n].Object] {
			r := p.Objects[n]
			if r.LastOffset >= p.LogStartOffset {
				return nil, false, rejected("object %d holds %s/%d offsets %d..%d, not all below the log start offset %d", r.Object, t.Name, ref.partition, r.FirstOffset, r.LastOffset, p.LogStartOffset)
			}
			found[r.Object]++
			n++
		}
		cut[i] = n
		topics[ref.topic] = t
	}
	for _, id := range ids {
		if found[id] != len(m.refs[id]) {
			return nil, false, rejected("object %d has ranges behind other objects in a manifest (retention removes from the front)", id)
		}
	}
	// Apply: trim the manifests, drop the objects.
	clones := map[metadata.TopicID]*metadata.Topic{}
	for i, ref := range parts {
		t := clones[ref.topic]
		if t == nil {
			t = cloneTopic(topics[ref.topic])
			clones[ref.topic] = t
		}
		p := &t.Partitions[ref.partition]
		p.Objects = slices.Clip(p.Objects[cut[i]:])
		if len(p.Objects) == 0 {
			p.Objects = nil
		}
	}
	for _, ref := range parts {
		if t := clones[ref.topic]; t != nil {
			m.putTopic(t)
			delete(clones, ref.topic)
		}
	}
	for _, id := range ids {
		delete(m.refs, id)
	}
	m.setObjects(func(objs map[uint64]metadata.Object) {
		for _, id := range ids {
			delete(objs, id)
		}
	})
	return len(ids), true, nil
}
