package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// Metadata deltas. A broker's watch asks GET /v1/metadata?after=V&delta=1; when this
// controller still remembers what every version after V changed (its step history,
// maxSteps versions), the answer is a delta: the current value of everything changed
// since V (brokers and the cluster fields always, changed topics whole or only their
// changed partitions, changed and deleted objects, SCRAM users and ACLs when changed).
// Applied to the View at V it gives exactly the View a full fetch would (TestDelta*).
// Otherwise, and for a client that does not ask, the answer is the full View.
//
// Why: a full View of a 10,000-partition cluster is megabytes of JSON, encoded once per
// version but decoded by every broker on every change, and it made every broker walk all
// partitions; a delta is proportional to the change.

// maxSteps bounds the step history: a watcher further behind gets a full View.
// maxStepParts bounds the partition indices it holds (an object commit may touch every
// partition): beyond it the oldest steps go.
const (
	maxSteps     = 1024
	maxStepParts = 1 << 20
)

// topicStep is what one or more versions changed in one topic: everything (created,
// deleted, recreated, partitions added, configs) or some partitions.
type topicStep struct {
	full  bool
	parts []int32
}

// viewStep is what the change to version `version` changed.
type viewStep struct {
	version uint64
	topics  map[string]topicStep // deleted topics included (absent from the new View)
	objects []uint64             // changed, added and deleted object IDs
	nparts  int                  // partition indices in topics
	scram   bool
	acls    bool
}

// stepHistory remembers the steps of the last maxSteps versions. record runs under the
// FSM's lock (on publish); delta under the history's own lock (a leaf).
type stepHistory struct {
	mu    sync.Mutex
	steps []viewStep // ascending, consecutive versions
	parts int        // partition indices held by steps
	// acls is the State's ACL slice at the last step: copy-on-write, so a different
	// backing array means the ACLs changed (View.ACLs is rebuilt on every publish).
	acls []acl.Binding

	// The encoded deltas to version cacheTo, by base version: the brokers watching
	// usually all ask for the same one.
	cacheMu sync.Mutex
	cacheTo uint64
	cache   map[uint64][]byte
}

// delta returns the encoded delta from `after` to cur (cached), or nil.
func (h *stepHistory) delta(after uint64, cur *metadata.View) []byte {
	h.cacheMu.Lock()
	defer h.cacheMu.Unlock()
	if h.cacheTo != cur.Version {
		h.cacheTo, h.cache = cur.Version, map[uint64][]byte{}
	}
	if b, ok := h.cache[after]; ok {
		return b
	}
	b := h.buildDelta(after, cur)
	if len(h.cache) < 64 {
		h.cache[after] = b
	}
	return b
}

// reset forgets the history (a snapshot restore replaced the whole state).
func (h *stepHistory) reset(acls []acl.Binding) {
	h.mu.Lock()
	h.steps, h.parts = nil, 0
	h.acls = acls
	h.mu.Unlock()
	h.cacheMu.Lock()
	h.cache = nil
	h.cacheTo = 0
	h.cacheMu.Unlock()
}

// record diffs old (the View at version-1) and cur. Topics are copy-on-write: an
// unchanged topic is the same pointer, so the cost is O(topics) plus O(partitions) of
// the changed topics, as for the command that changed them.
func (h *stepHistory) record(old, cur *metadata.View, acls []acl.Binding) {
	st := viewStep{version: cur.Version, topics: map[string]topicStep{}}
	for name, t := range cur.Topics {
		o := old.Topics[name]
		if o == t {
			continue
		}
		if o == nil || !o.SameShape(t) {
			st.topics[name] = topicStep{full: true}
			continue
		}
		parts := []int32{} // not nil: the topic changed (its configs, if nothing else)
		for i := range t.Partitions {
			if !t.Partitions[i].Equal(&o.Partitions[i]) {
				parts = append(parts, int32(i))
			}
		}
		if len(parts) > len(t.Partitions)/2 {
			st.topics[name] = topicStep{full: true} // as small as the parts, and simpler
			continue
		}
		st.topics[name] = topicStep{parts: parts}
		st.nparts += len(parts)
	}
	for name := range old.Topics {
		if _, ok := cur.Topics[name]; !ok {
			st.topics[name] = topicStep{full: true}
		}
	}
	if mapID(old.Objects) != mapID(cur.Objects) {
		for id, o := range cur.Objects {
			if p, ok := old.Objects[id]; !ok || p != o {
				st.objects = append(st.objects, id)
			}
		}
		for id := range old.Objects {
			if _, ok := cur.Objects[id]; !ok {
				st.objects = append(st.objects, id)
			}
		}
	}
	st.scram = mapID(old.Scram) != mapID(cur.Scram)
	h.mu.Lock()
	defer h.mu.Unlock()
	st.acls = unsafe.SliceData(h.acls) != unsafe.SliceData(acls) || len(h.acls) != len(acls)
	h.acls = acls
	if n := len(h.steps); n > 0 && h.steps[n-1].version+1 != st.version {
		h.steps, h.parts = nil, 0 // not consecutive (cannot happen: Version++ per publish)
	}
	h.steps = append(h.steps, st)
	h.parts += st.nparts
	drop := 0
	for len(h.steps)-drop > maxSteps || (h.parts > maxStepParts && drop < len(h.steps)-1) {
		h.parts -= h.steps[drop].nparts
		drop++
	}
	if drop > 0 {
		h.steps = slices.Delete(h.steps, 0, drop)
	}
}

func mapID(m any) uintptr {
	v := reflect.ValueOf(m)
	if !v.IsValid() || v.IsNil() {
		return 0
	}
	return v.Pointer()
}

// since merges the steps after version `after` up to `to`; ok is false when the history
// does not reach back that far (or not up to `to`).
func (h *stepHistory) since(after, to uint64) (viewStep, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.steps)
	if n == 0 || after >= to || h.steps[0].version > after+1 || h.steps[n-1].version < to {
		return viewStep{}, false
	}
	out := viewStep{version: to, topics: map[string]topicStep{}}
	seenObj := map[uint64]bool{}
	for _, st := range h.steps[after+1-h.steps[0].version:] {
		if st.version > to {
			break
		}
		for name, ts := range st.topics {
			acc := out.topics[name]
			if acc.full || ts.full {
				out.topics[name] = topicStep{full: true}
				continue
			}
			acc.parts = append(acc.parts, ts.parts...)
			out.topics[name] = acc
		}
		for _, id := range st.objects {
			if !seenObj[id] {
				seenObj[id] = true
				out.objects = append(out.objects, id)
			}
		}
		out.scram = out.scram || st.scram
		out.acls = out.acls || st.acls
	}
	return out, true
}

// buildDelta encodes the delta from the View at `after` to cur, or returns nil when the
// history does not reach back to it.
func (h *stepHistory) buildDelta(after uint64, cur *metadata.View) []byte {
	st, ok := h.since(after, cur.Version)
	if !ok {
		return nil
	}
	vj := ctlwire.ViewJSON{Version: cur.Version, ClusterID: cur.ClusterID, ControllerID: cur.ControllerID, Brokers: cur.Brokers, DeltaFrom: after}
	for name, ts := range st.topics {
		t := cur.Topics[name]
		switch {
		case t == nil:
			vj.DeletedTopics = append(vj.DeletedTopics, name)
		case ts.full:
			if vj.Topics == nil {
				vj.Topics = map[string]*metadata.Topic{}
			}
			vj.Topics[name] = t
		default:
			slices.Sort(ts.parts)
			tp := ctlwire.TopicPartsJSON{ID: t.ID, Count: len(t.Partitions), Configs: t.Configs}
			for _, i := range slices.Compact(ts.parts) {
				tp.Partitions = append(tp.Partitions, t.Partitions[i])
				tp.At = append(tp.At, i)
			}
			if vj.TopicParts == nil {
				vj.TopicParts = map[string]ctlwire.TopicPartsJSON{}
			}
			vj.TopicParts[name] = tp
		}
	}
	for _, id := range st.objects {
		if o, ok := cur.Objects[id]; ok {
			if vj.Objects == nil {
				vj.Objects = map[uint64]metadata.Object{}
			}
			vj.Objects[id] = o
		} else {
			vj.DeletedObjects = append(vj.DeletedObjects, id)
		}
	}
	if st.scram {
		vj.ScramSet, vj.Scram = true, cur.Scram
	}
	if st.acls {
		vj.ACLsSet, vj.ACLs = true, cur.ACLSet().Bindings()
	}
	if len(vj.DeletedTopics) > 0 || len(vj.Topics) > 0 {
		// A deletion, or a topic replaced whole (deleted and created again under its
		// name within the delta): the tombstones may have grown.
		vj.TopicTombstones = cur.TopicTombstones()
	}
	b, err := json.Marshal(vj)
	if err != nil { // cannot happen: plain data
		panic(fmt.Sprintf("controller: encode delta: %v", err))
	}
	return b
}
