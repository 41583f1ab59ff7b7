package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
)

func viewWith(brokers []metadata.Broker, topics ...*metadata.Topic) *metadata.View {
	m := map[string]*metadata.Topic{}
	for _, t := range topics {
		m[t.Name] = t
	}
	return metadata.NewView(1, "c", -1, brokers, m)
}

// leaders lists the partitions' leaders in index order.
func leaders(parts []metadata.Partition) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, p.Leader)
	}
	return b.String()
}

func countLeaders(parts []metadata.Partition) map[int32]int {
	n := map[int32]int{}
	for _, p := range parts {
		n[p.Leader]++
	}
	return n
}

func TestPlacementSpreadsOverZonesAndSkipsFenced(t *testing.T) {
	brokers := []metadata.Broker{
		{ID: 1, Rack: "a", State: metadata.BrokerActive},
		{ID: 2, Rack: "b", State: metadata.BrokerActive},
		{ID: 3, Rack: "c", State: metadata.BrokerActive},
	}
	parts, ok := place(viewWith(brokers), nil, 0, 30)
	if !ok {
		t.Fatal("no placement")
	}
	if n := countLeaders(parts); n[1] != 10 || n[2] != 10 || n[3] != 10 {
		t.Fatalf("30 partitions over 3 zones: %v", n)
	}
	for i, p := range parts {
		if p.Index != int32(i) || p.LeaderEpoch != 0 || len(p.Logs) != 1 || p.Logs[0] != (metadata.LogRange{Broker: p.Leader}) {
			t.Fatalf("partition %d born wrong: %+v", i, p)
		}
	}
	again, _ := place(viewWith(brokers), nil, 0, 30)
	for i := range parts {
		if parts[i].Leader != again[i].Leader {
			t.Fatal("placement is not deterministic")
		}
	}

	// A topic spreads over every broker whatever the load; load breaks ties. Broker 1
	// already leads 4: the first round goes 2, 3, 1, and so on.
	loaded := &metadata.Topic{Name: "old", Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 1}, {Leader: 1}}}
	parts, _ = place(viewWith(brokers, loaded), nil, 0, 8)
	if got := leaders(parts); got != "2 3 1 2 3 1 2 3" {
		t.Fatalf("with broker 1 loaded: %s", got)
	}

	// A just-joined, empty broker does not take a whole new topic (issue 24): a 3-partition
	// topic lands on three brokers in three zones.
	joined := append(append([]metadata.Broker(nil), brokers...), metadata.Broker{ID: 4, Rack: "a", State: metadata.BrokerActive})
	busy := &metadata.Topic{Name: "busy", Partitions: []metadata.Partition{{Leader: 1}, {Leader: 2}, {Leader: 3}, {Leader: 1}, {Leader: 2}, {Leader: 3}}}
	parts, _ = place(viewWith(joined, busy), nil, 0, 3)
	if got := leaders(parts); got != "4 2 3" {
		t.Fatalf("after broker 4 joined zone a: %s, want 4 2 3 (one per zone, the empty broker first)", got)
	}

	// Added partitions count the topic's own first: "grow" has two on broker 1, so two
	// more go to 2 and 3, though broker 1 is the least loaded overall.
	grow := &metadata.Topic{Name: "grow", Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}}}
	other := &metadata.Topic{Name: "other", Partitions: []metadata.Partition{{Leader: 2}, {Leader: 2}, {Leader: 3}, {Leader: 3}}}
	parts, _ = place(viewWith(brokers, grow, other), grow, 2, 2)
	if got := leaders(parts); got != "2 3" || parts[0].Index != 2 || parts[1].Index != 3 {
		t.Fatalf("adding 2 partitions to a topic on broker 1: %s (indexes %d %d)", got, parts[0].Index, parts[1].Index)
	}

	// Fenced brokers get nothing.
	fenced := append([]metadata.Broker(nil), brokers...)
	fenced[1].State = metadata.BrokerFenced
	parts, _ = place(viewWith(fenced), nil, 0, 30)
	if n := countLeaders(parts); n[2] != 0 || n[1] != 15 || n[3] != 15 {
		t.Fatalf("with broker 2 fenced: %v", n)
	}

	// Two brokers in zone a, one in b: zones alternate a, b, a, b...
	zoned := []metadata.Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}}
	parts, _ = place(viewWith(zoned), nil, 0, 4)
	if got := [3]int32{parts[0].Leader, parts[1].Leader, parts[2].Leader}; got != [3]int32{1, 3, 2} {
		t.Fatalf("zone order %v, want 1 3 2", got)
	}

	if _, ok := place(viewWith([]metadata.Broker{{ID: 1, State: metadata.BrokerFenced}}), nil, 0, 1); ok {
		t.Fatal("placed on a fenced-only cluster")
	}
}
