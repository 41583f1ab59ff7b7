package controller

import (
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
	parts, ok := place(viewWith(brokers), 0, 30)
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
	again, _ := place(viewWith(brokers), 0, 30)
	for i := range parts {
		if parts[i].Leader != again[i].Leader {
			t.Fatal("placement is not deterministic")
		}
	}

	// Existing load counts: broker 1 already leads 4, so new partitions fill 2 and 3 first.
	loaded := &metadata.Topic{Name: "old", Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 1}, {Leader: 1}}}
	parts, _ = place(viewWith(brokers, loaded), 0, 8)
	if n := countLeaders(parts); n[1] != 0 || n[2] != 4 || n[3] != 4 {
		t.Fatalf("with broker 1 loaded: %v", n)
	}

	// Fenced brokers get nothing.
	fenced := append([]metadata.Broker(nil), brokers...)
	fenced[1].State = metadata.BrokerFenced
	parts, _ = place(viewWith(fenced), 0, 30)
	if n := countLeaders(parts); n[2] != 0 || n[1] != 15 || n[3] != 15 {
		t.Fatalf("with broker 2 fenced: %v", n)
	}

	// Two brokers in zone a, one in b: zones alternate a, b, a, b...
	zoned := []metadata.Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "a"}, {ID: 3, Rack: "b"}}
	parts, _ = place(viewWith(zoned), 0, 4)
	if got := [3]int32{parts[0].Leader, parts[1].Leader, parts[2].Leader}; got != [3]int32{1, 3, 2} {
		t.Fatalf("zone order %v, want 1 3 2", got)
	}

	if _, ok := place(viewWith([]metadata.Broker{{ID: 1, State: metadata.BrokerFenced}}), 0, 1); ok {
		t.Fatal("placed on a fenced-only cluster")
	}
}
