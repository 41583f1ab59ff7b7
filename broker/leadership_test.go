package broker

import (
	"slices"
	"testing"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

func ledHere(b *Broker) []string {
	var out []string
	for _, p := range b.parts.All() {
		out = append(out, p.Topic()+"/"+string(rune('0'+p.Index())))
	}
	slices.Sort(out)
	return out
}

// TestSyncPartitionsByDiff: views applied by diff against the last one still give the
// partitions a full pass would: a topic kept by pointer is skipped, a partition changed
// in a replaced topic is applied, an older view is ignored, a deleted topic and one
// recreated under the same name with another ID are dropped.
func TestSyncPartitionsByDiff(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: 1}, parts: partlog.NewSet(), starting: true, log: discardLogger()}
	idA, idB, idA2 := metadata.TopicID{1}, metadata.TopicID{2}, metadata.TopicID{3}
	topic := func(name string, id metadata.TopicID, leaders ...int32) *metadata.Topic {
		t := &metadata.Topic{Name: name, ID: id}
		for i, l := range leaders {
			t.Partitions = append(t.Partitions, metadata.Partition{Index: int32(i), Leader: l})
		}
		return t
	}
	check := func(step string, want ...string) {
		t.Helper()
		if got := ledHere(b); !slices.Equal(got, want) {
			t.Fatalf("%s: led here %v, want %v", step, got, want)
		}
	}
	a1, b1 := topic("a", idA, 1, 2, 1), topic("b", idB, 2, 1)
	b.syncPartitions(metadata.NewView(1, "c", 1, nil, map[string]*metadata.Topic{"a": a1, "b": b1}))
	check("first view", "a/0", "a/2", "b/1")

	// a's partition 1 moves here and its partition 2 away; b is the same pointer.
	a2 := topic("a", idA, 1, 1, 2)
	b.syncPartitions(metadata.NewView(2, "c", 1, nil, map[string]*metadata.Topic{"a": a2, "b": b1}))
	check("partitions of a changed", "a/0", "a/1", "b/1")

	// An older view (a Refresh racing the watch) changes nothing.
	b.syncPartitions(metadata.NewView(1, "c", 1, nil, map[string]*metadata.Topic{"a": a1, "b": b1}))
	check("older view", "a/0", "a/1", "b/1")

	// A copy of b with equal partitions (a full View decoded again) changes nothing; its
	// partition 0 moving here does.
	b.syncPartitions(metadata.NewView(3, "c", 1, nil, map[string]*metadata.Topic{"a": a2, "b": topic("b", idB, 1, 1)}))
	check("b/0 moved here", "a/0", "a/1", "b/0", "b/1")

	// b deleted; a recreated under its name with another ID and other leaders.
	b.syncPartitions(metadata.NewView(4, "c", 1, nil, map[string]*metadata.Topic{"a": topic("a", idA2, 2, 1)}))
	check("b deleted, a recreated", "a/1")
	if p := b.parts.Get(idA2, 1); p == nil {
		t.Fatal("the recreated a/1 is not the new topic's")
	}
	if p := b.parts.Get(idA, 0); p != nil {
		t.Fatal("the old a/0 is still held")
	}
}
