package controller

import (
	"testing"
	"time"

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

func TestLeaseTable(t *testing.T) {
	const lease, grace, suspect = 3 * time.Second, 500 * time.Millisecond, time.Second
	t0 := time.Unix(1000, 0)
	v := viewWith([]metadata.Broker{{ID: 1, Epoch: 1, State: metadata.BrokerActive}, {ID: 2, Epoch: 4, State: metadata.BrokerActive}, {ID: 3, Epoch: 1, State: metadata.BrokerFenced}})
	l := newLeaseTable()
	l.reset(v, t0) // leadership gained: everyone gets a fresh lease
	if got := l.expired(v, t0.Add(lease+grace), lease, grace, suspect); len(got) != 0 {
		t.Fatalf("fenced inside the lease+grace: %v", got)
	}
	l.renew(1, 1, "", t0.Add(2*time.Second))
	got := l.expired(v, t0.Add(lease+grace+time.Millisecond), lease, grace, suspect)
	if len(got) != 1 || got[0] != (fenceBrokerCmd{ID: 2, Epoch: 4, Plan: true}) {
		t.Fatalf("expired %v, want broker 2 epoch 4", got)
	}

	// Suspicion shortens the wait to suspectTimeout of silence.
	l.reset(v, t0)
	l.renew(1, 1, "", t0)
	l.renew(2, 4, "", t0)
	l.suspect(1, t0.Add(500*time.Millisecond))
	if got := l.expired(v, t0.Add(900*time.Millisecond), lease, grace, suspect); len(got) != 0 {
		t.Fatalf("suspect fenced before suspectTimeout: %v", got)
	}
	got = l.expired(v, t0.Add(1100*time.Millisecond), lease, grace, suspect)
	if len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("suspect not fenced: %v", got)
	}
	// A broker that keeps heartbeating survives a suspicion.
	l.reset(v, t0)
	l.suspect(2, t0)
	for d := 200 * time.Millisecond; d < 3*time.Second; d += 200 * time.Millisecond {
		l.renew(2, 4, "", t0.Add(d))
		l.renew(1, 1, "", t0.Add(d))
		if got := l.expired(v, t0.Add(d+100*time.Millisecond), lease, grace, suspect); len(got) != 0 {
			t.Fatalf("a heartbeating suspect was fenced: %v", got)
		}
	}

	// A registration newer than the View waits; an older lease entry is replaced.
	l.reset(v, t0)
	l.renew(1, 2, "", t0) // epoch 2 registered, View still says 1
	if got := l.expired(v, t0.Add(time.Hour), lease, grace, suspect); len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("expired %v, want only broker 2", got)
	}
	l.reset(nil, t0) // leadership lost
	if len(l.m) != 0 {
		t.Fatal("leases kept after losing leadership")
	}
}
