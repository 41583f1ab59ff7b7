package metadata

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// The object manifest rules, one definition for the Raft controller
// (controller/cmd_objects.go, where they are stated) and LocalStore. ObjectRules reads
// plain data and says what to change; the caller stores the change copy-on-write.
// Nothing here reads the clock or iterates a map where the order shows, so the
// controller's state machine stays deterministic.

// Bounds of one manifest change (the controller's API enforces them too; a commit of
// MaxCommitRanges ranges, every number at its widest, stays below the controller's
// default MaxBodyBytes of 4 MiB). MaxCommitRanges bounds a commit's weight too
// (CommitWeight), which counts the producer snapshots.
const (
	MaxCommitRanges  = 16000
	MaxDeleteObjects = 100000
)

// Weight is what the range counts against MaxCommitRanges: one, plus two per producer of
// its snapshot, plus one per aborted transaction. A producer at its widest encodes to fewer bytes than two ranges at
// theirs, so a commit within the bound fits the controller's body limit whatever its
// snapshots hold (controller's TestCommitWithSnapshotsFitsBody).
// Each aborted transaction counts one: it encodes to fewer bytes than a range.
func (r PartitionRange) Weight() int {
	w := 1 + len(r.Aborted)
	if r.Producers != nil {
		w += 2 * len(r.Producers.Producers)
	}
	return w
}

// CommitWeight is the weight of a commit's ranges (PartitionRange.Weight).
func CommitWeight(ranges []PartitionRange) int {
	w := 0
	for _, r := range ranges {
		w += r.Weight()
	}
	return w
}

// snapshotProblem says what is wrong with r's producer snapshot ("" when nothing is):
// it must describe the state as of the range's end, within the bounds, each producer
// once, its batches in offset order below that end.
func (r PartitionRange) snapshotProblem() string {
	s := r.Producers
	if s == nil {
		return ""
	}
	switch {
	case s.Offset != r.LastOffset+1:
		return fmt.Sprintf("as of offset %d, the range ends at %d", s.Offset, r.LastOffset)
	case len(s.Producers) == 0:
		return "no producers (a range without producer state carries no snapshot)"
	case len(s.Producers) > MaxSnapshotProducers:
		return fmt.Sprintf("%d producers (at most %d)", len(s.Producers), MaxSnapshotProducers)
	}
	for i, p := range s.Producers {
		switch {
		case p.ID < 0 || i > 0 && p.ID <= s.Producers[i-1].ID:
			return fmt.Sprintf("producer %d: IDs must be ascending and not negative", p.ID)
		case p.Epoch < 0:
			return fmt.Sprintf("producer %d: epoch %d", p.ID, p.Epoch)
		case len(p.Batches) == 0 && p.TxnFirst == nil || len(p.Batches) > ProducerWindow:
			return fmt.Sprintf("producer %d: %d batches (must be 1..%d, or 0 with an open transaction)", p.ID, len(p.Batches), ProducerWindow)
		case p.TxnFirst != nil && (*p.TxnFirst < 0 || *p.TxnFirst > r.LastOffset):
			return fmt.Sprintf("producer %d: open transaction from %d (must be 0..%d)", p.ID, *p.TxnFirst, r.LastOffset)
		}
		for j, b := range p.Batches {
			if b[0] < 0 || b[0] > math.MaxInt32 || b[1] < math.MinInt32 || b[1] > math.MaxInt32 ||
				b[2] < 0 || b[2] > r.LastOffset || j > 0 && b[2] <= p.Batches[j-1][2] {
				return fmt.Sprintf("producer %d: batch %v (sequences are int32, the first not negative; offsets ascending below %d)", p.ID, b, s.Offset)
			}
		}
	}
	return ""
}

// abortedProblem says what is wrong with r's aborted transactions ("" when nothing is):
// at most MaxRangeAborted, markers in the range in ascending order, each transaction
// starting at or before its marker.
func (r PartitionRange) abortedProblem() string {
	if len(r.Aborted) > MaxRangeAborted {
		return fmt.Sprintf("%d aborted transactions (at most %d)", len(r.Aborted), MaxRangeAborted)
	}
	for i, a := range r.Aborted {
		if a.ProducerID < 0 || a.First < 0 || a.First > a.Last || a.Last < r.FirstOffset || a.Last > r.LastOffset ||
			i > 0 && a.Last <= r.Aborted[i-1].Last {
			return fmt.Sprintf("aborted transaction %+v (markers ascending in %d..%d, first offsets not above them)", a, r.FirstOffset, r.LastOffset)
		}
	}
	return ""
}

// ObjectKey is the object-storage key of object id (deterministic).
func ObjectKey(id uint64) string { return fmt.Sprintf("objects/%020d.obj", id) }

// ObjectRange is the manifest entry of r once object id is committed.
func (r PartitionRange) ObjectRange(id uint64) ObjectRange {
	return ObjectRange{Object: id, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset, MaxTimestamp: r.MaxTimestamp, Bytes: r.Bytes,
		Aborted: slices.Clip(slices.Clone(r.Aborted))}
}

// PartitionRef names one partition.
type PartitionRef struct {
	Topic     TopicID
	Partition int32
}

// clone is a deep copy: a stored snapshot must not share memory a caller may still write.
func (s *ProducerSnapshot) clone() *ProducerSnapshot {
	if s == nil {
		return nil
	}
	c := &ProducerSnapshot{Offset: s.Offset, Producers: make([]ProducerState, len(s.Producers))}
	for i, p := range s.Producers {
		p.Batches = slices.Clone(p.Batches)
		if p.TxnFirst != nil {
			first := *p.TxnFirst
			p.TxnFirst = &first
		}
		c.Producers[i] = p
	}
	return c
}

// ManifestChange is the new manifest of one partition and its producer snapshot (never
// aliasing writable memory of the old ones: they may be stored as they are).
type ManifestChange struct {
	PartitionRef
	Objects   []ObjectRange
	Producers *ProducerSnapshot
}

// ApplyTo stores the change in p, a copy of the partition the caller owns.
func (ch ManifestChange) ApplyTo(p *Partition) {
	p.Objects, p.Producers = ch.Objects, ch.Producers
}

// ObjectRules checks object manifest changes against the current state.
type ObjectRules struct {
	// Objects is the object table (prepared and committed objects by ID).
	Objects map[uint64]Object
	// NextID is the next object ID to hand out (0 counts as 1: IDs start at 1).
	NextID uint64
	// TopicByID finds an existing topic.
	TopicByID func(TopicID) *Topic
	// Refs lists the partitions whose manifests hold a range of object id, once each.
	Refs func(id uint64) []PartitionRef
	// Current checks that broker is active in epoch; nil: every broker is current.
	Current func(broker int32, epoch int64) error
}

func rejected(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrObjectRejected}, args...)...)
}

func (r *ObjectRules) current(broker int32, epoch int64) error {
	if r.Current == nil {
		return nil
	}
	return r.Current(broker, epoch)
}

// Prepare returns the next object, prepared by broker in epoch; the caller stores it and
// sets the next ID to its ID + 1.
func (r *ObjectRules) Prepare(broker int32, epoch int64) (Object, error) {
	if err := r.current(broker, epoch); err != nil {
		return Object{}, err
	}
	id := max(r.NextID, 1)
	return Object{ID: id, Key: ObjectKey(id), State: ObjectPrepared, Broker: broker, Epoch: epoch}, nil
}

// Commit checks a commit of object id by broker in epoch and returns the object as
// committed and the partitions' new manifests, in the order of ranges.
func (r *ObjectRules) Commit(id uint64, broker int32, epoch int64, size int64, ranges []PartitionRange) (Object, []ManifestChange, error) {
	o, ok := r.Objects[id]
	switch {
	case !ok && id > 0 && id < r.NextID:
		return Object{}, nil, rejected("object %d was deleted", id)
	case !ok:
		return Object{}, nil, rejected("unknown object %d", id)
	case o.State != ObjectPrepared:
		return Object{}, nil, rejected("object %d is %s, not prepared", id, o.State)
	case o.Broker != broker || o.Epoch != epoch:
		return Object{}, nil, rejected("object %d was prepared by broker %d epoch %d, not broker %d epoch %d", id, o.Broker, o.Epoch, broker, epoch)
	}
	if err := r.current(broker, epoch); err != nil {
		return Object{}, nil, err
	}
	if size < 0 {
		return Object{}, nil, rejected("object %d: size %d", id, size)
	}
	if len(ranges) == 0 || len(ranges) > MaxCommitRanges {
		return Object{}, nil, rejected("object %d: %d ranges (must be 1..%d)", id, len(ranges), MaxCommitRanges)
	}
	if w := CommitWeight(ranges); w > MaxCommitRanges {
		return Object{}, nil, rejected("object %d: weight %d of ranges and producer snapshots (at most %d)", id, w, MaxCommitRanges)
	}
	changes := make([]ManifestChange, 0, len(ranges))
	seen := make(map[PartitionRef]bool, len(ranges))
	for _, pr := range ranges {
		ref := PartitionRef{pr.Topic, pr.Partition}
		if seen[ref] {
			return Object{}, nil, rejected("object %d: partition %s/%d named twice", id, pr.Topic, pr.Partition)
		}
		seen[ref] = true
		if pr.FirstOffset < 0 || pr.FirstOffset > pr.LastOffset || pr.Bytes < 0 {
			return Object{}, nil, rejected("object %d: range %d..%d (%d bytes) of %s/%d", id, pr.FirstOffset, pr.LastOffset, pr.Bytes, pr.Topic, pr.Partition)
		}
		if why := pr.snapshotProblem(); why != "" {
			return Object{}, nil, rejected("object %d: producer snapshot of %s/%d: %s", id, pr.Topic, pr.Partition, why)
		}
		if why := pr.abortedProblem(); why != "" {
			return Object{}, nil, rejected("object %d: range of %s/%d: %s", id, pr.Topic, pr.Partition, why)
		}
		t := r.TopicByID(pr.Topic)
		if t == nil {
			return Object{}, nil, fmt.Errorf("%w: %w: object %d: topic id %s", ErrObjectRejected, ErrUnknownTopic, id, pr.Topic)
		}
		if pr.Partition < 0 || int(pr.Partition) >= len(t.Partitions) {
			return Object{}, nil, fmt.Errorf("%w: %w: object %d: partition %d of %q", ErrObjectRejected, ErrUnknownTopic, id, pr.Partition, t.Name)
		}
		p := &t.Partitions[pr.Partition]
		if next := p.UploadedThrough(); next >= 0 {
			// Offsets below the log start need not be stored: a manifest that ends below
			// the log start (its ranges were committed below it) may continue anywhere
			// up to the log start. (DeleteRecords past the manifest's end empties it.)
			if pr.FirstOffset != next && (pr.FirstOffset < next || pr.FirstOffset > p.LogStartOffset) {
				return Object{}, nil, rejected("object %d: %s/%d continues at %d (or up to its log start %d), range starts at %d", id, t.Name, pr.Partition, next, p.LogStartOffset, pr.FirstOffset)
			}
		} else if start := max(0, p.LogStartOffset); pr.FirstOffset > start {
			return Object{}, nil, rejected("object %d: %s/%d has no objects and starts at %d, range starts at %d", id, t.Name, pr.Partition, start, pr.FirstOffset)
		}
		// Clipped: the append copies, the old manifest is never written into. The
		// snapshot is replaced even by none: the old one is as of an earlier offset, and
		// the batches between may leave the WALs now.
		changes = append(changes, ManifestChange{PartitionRef: ref, Objects: append(slices.Clip(p.Objects), pr.ObjectRange(id)), Producers: pr.Producers.clone()})
	}
	o.State = ObjectCommitted
	o.Size = size
	return o, changes, nil
}

// RangeReplace is a cleaner's commit: Range (one partition's offsets, exactly those of
// the replaced ranges from the first's FirstOffset to the last's LastOffset) replaces the
// consecutive manifest ranges of objects Replaces (in manifest order). LeaderEpoch is the
// partition's leader epoch the cleaner read the ranges under: a leader change since
// (failover, move) refuses the commit, so only the current leader's clean lands.
type RangeReplace struct {
	Range       PartitionRange `json:"range"`
	Replaces    []uint64       `json:"replaces"`
	LeaderEpoch int32          `json:"leader_epoch"`
}

// MaxReplaceRanges bounds the ranges one replace names.
const MaxReplaceRanges = 10000

// Replace checks a cleaner's commit of object id by broker in epoch: the object is
// prepared by it, the broker leads the partition in rr.LeaderEpoch, rr.Replaces are
// consecutive ranges of the partition's manifest and rr.Range spans exactly their
// offsets. The new range is marked Compacted; the producer snapshot stays (the
// manifest's end does not move). The replaced objects lose this partition's reference
// and are garbage once no manifest references them.
func (r *ObjectRules) Replace(id uint64, broker int32, epoch int64, size int64, rr RangeReplace) (Object, ManifestChange, error) {
	var none ManifestChange
	o, ok := r.Objects[id]
	switch {
	case !ok:
		return Object{}, none, rejected("unknown object %d", id)
	case o.State != ObjectPrepared:
		return Object{}, none, rejected("object %d is %s, not prepared", id, o.State)
	case o.Broker != broker || o.Epoch != epoch:
		return Object{}, none, rejected("object %d was prepared by broker %d epoch %d, not broker %d epoch %d", id, o.Broker, o.Epoch, broker, epoch)
	case size < 0 || len(rr.Replaces) == 0 || len(rr.Replaces) > MaxReplaceRanges:
		return Object{}, none, rejected("object %d: size %d, %d ranges replaced (must be 1..%d)", id, size, len(rr.Replaces), MaxReplaceRanges)
	}
	if err := r.current(broker, epoch); err != nil {
		return Object{}, none, err
	}
	pr := rr.Range
	if pr.FirstOffset < 0 || pr.FirstOffset > pr.LastOffset || pr.Bytes < 0 || pr.Producers != nil {
		return Object{}, none, rejected("object %d: range %d..%d (%d bytes, a replace carries no producer snapshot)", id, pr.FirstOffset, pr.LastOffset, pr.Bytes)
	}
	if why := pr.abortedProblem(); why != "" {
		return Object{}, none, rejected("object %d: range of %s/%d: %s", id, pr.Topic, pr.Partition, why)
	}
	t := r.TopicByID(pr.Topic)
	if t == nil || pr.Partition < 0 || int(pr.Partition) >= len(t.Partitions) {
		return Object{}, none, fmt.Errorf("%w: %w: object %d: topic id %s partition %d", ErrObjectRejected, ErrUnknownTopic, id, pr.Topic, pr.Partition)
	}
	p := &t.Partitions[pr.Partition]
	if p.Leader != broker || p.LeaderEpoch != rr.LeaderEpoch {
		return Object{}, none, fmt.Errorf("%w: %w: object %d: %s/%d is led by %d in epoch %d, not %d in epoch %d", ErrObjectRejected, ErrFenced, id, t.Name, pr.Partition, p.Leader, p.LeaderEpoch, broker, rr.LeaderEpoch)
	}
	i := slices.IndexFunc(p.Objects, func(o ObjectRange) bool { return o.Object == rr.Replaces[0] })
	if i < 0 || i+len(rr.Replaces) > len(p.Objects) {
		return Object{}, none, rejected("object %d: %s/%d has no run of ranges of objects %v", id, t.Name, pr.Partition, rr.Replaces)
	}
	old := p.Objects[i : i+len(rr.Replaces)]
	for k, o := range old {
		if o.Object != rr.Replaces[k] {
			return Object{}, none, rejected("object %d: %s/%d range %d is of object %d, not %d", id, t.Name, pr.Partition, i+k, o.Object, rr.Replaces[k])
		}
	}
	if pr.FirstOffset != old[0].FirstOffset || pr.LastOffset != old[len(old)-1].LastOffset {
		return Object{}, none, rejected("object %d: range %d..%d does not span the replaced %d..%d", id, pr.FirstOffset, pr.LastOffset, old[0].FirstOffset, old[len(old)-1].LastOffset)
	}
	nr := pr.ObjectRange(id)
	nr.Compacted = true
	objs := make([]ObjectRange, 0, len(p.Objects)-len(old)+1)
	objs = append(append(append(objs, p.Objects[:i]...), nr), p.Objects[i+len(old):]...)
	o.State = ObjectCommitted
	o.Size = size
	return o, ManifestChange{PartitionRef: PartitionRef{pr.Topic, pr.Partition}, Objects: objs, Producers: p.Producers}, nil
}

// Delete checks a delete of ids and returns the objects to drop (in the table, in
// request order, once each; none when all were deleted before) and the partitions' new
// manifests, ordered by topic ID and partition.
func (r *ObjectRules) Delete(ids []uint64) ([]uint64, []ManifestChange, error) {
	if len(ids) == 0 || len(ids) > MaxDeleteObjects {
		return nil, nil, rejected("%d objects to delete (must be 1..%d)", len(ids), MaxDeleteObjects)
	}
	batch := make(map[uint64]bool, len(ids))
	var drop []uint64
	for _, id := range ids {
		if batch[id] {
			continue
		}
		if _, ok := r.Objects[id]; !ok {
			if id == 0 || id >= max(r.NextID, 1) {
				return nil, nil, rejected("unknown object %d", id)
			}
			continue // deleted before
		}
		batch[id] = true
		drop = append(drop, id)
	}
	if len(drop) == 0 {
		return nil, nil, nil
	}
	// The partitions holding ranges of the batch, in a deterministic order.
	var parts []PartitionRef
	inParts := map[PartitionRef]bool{}
	for _, id := range drop {
		for _, ref := range r.Refs(id) {
			if !inParts[ref] {
				inParts[ref] = true
				parts = append(parts, ref)
			}
		}
	}
	slices.SortFunc(parts, func(a, b PartitionRef) int {
		if c := slices.Compare(a.Topic[:], b.Topic[:]); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	// Each batch range must lie in the manifest prefix made of batch objects, below the
	// log start offset; count them to catch ranges further back.
	found := map[uint64]int{}
	changes := make([]ManifestChange, 0, len(parts))
	for _, ref := range parts {
		t := r.TopicByID(ref.Topic)
		if t == nil || ref.Partition < 0 || int(ref.Partition) >= len(t.Partitions) {
			return nil, nil, fmt.Errorf("%w: %w: object index names partition %s/%d", ErrObjectRejected, ErrUnknownTopic, ref.Topic, ref.Partition)
		}
		p := t.Partitions[ref.Partition]
		n := 0
		for n < len(p.Objects) && batch[p.Objects[n].Object] {
			or := p.Objects[n]
			if or.LastOffset >= p.LogStartOffset {
				return nil, nil, rejected("object %d holds %s/%d offsets %d..%d, not all below the log start offset %d", or.Object, t.Name, ref.Partition, or.FirstOffset, or.LastOffset, p.LogStartOffset)
			}
			found[or.Object]++
			n++
		}
		rest := slices.Clip(p.Objects[n:])
		if len(rest) == 0 {
			rest = nil
		}
		// The snapshot stays: it is as of the manifest's end, which deleting from the
		// front does not move (or, with every range gone, at or below the log start).
		changes = append(changes, ManifestChange{PartitionRef: ref, Objects: rest, Producers: p.Producers})
	}
	for _, id := range drop {
		if found[id] != len(r.Refs(id)) {
			return nil, nil, rejected("object %d has ranges behind other objects in a manifest (retention removes from the front)", id)
		}
	}
	return drop, changes, nil
}

// WithObjects returns a changed copy of the object table (copy-on-write: objs is not
// modified); an empty table is nil.
func WithObjects(objs map[uint64]Object, change func(objs map[uint64]Object)) map[uint64]Object {
	c := maps.Clone(objs)
	if c == nil {
		c = map[uint64]Object{}
	}
	change(c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// TrimManifest drops the front ranges of a manifest that lie wholly below logStart: once
// the log start passes them nobody reads them, and an object no manifest references any
// more is garbage (View.GarbageObjects) even if it was shared with partitions whose data
// lives on. Without this, one long-lived partition sharing an object with a short-lived
// one would pin that object and, since retention removes from the front only, every
// later object of the short-lived partition. It returns the ranges kept (objs itself
// when none is dropped, nil when all are, else a new slice: Views share the old one)
// and the objects whose ranges were dropped, in manifest order.
func TrimManifest(objs []ObjectRange, logStart int64) ([]ObjectRange, []uint64) {
	n := 0
	for n < len(objs) && objs[n].LastOffset < logStart {
		n++
	}
	if n == 0 {
		return objs, nil
	}
	dropped := make([]uint64, n)
	for i, r := range objs[:n] {
		dropped[i] = r.Object
	}
	if n == len(objs) {
		return nil, dropped
	}
	return slices.Clone(objs[n:]), dropped
}
