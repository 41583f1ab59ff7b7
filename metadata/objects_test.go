package metadata

import (
	"reflect"
	"testing"
)

func objView(brokers []Broker, parts []Partition, objs ...Object) *View {
	m := map[uint64]Object{}
	for _, o := range objs {
		m[o.ID] = o
	}
	t := &Topic{Name: "t", ID: TopicID{1}, Partitions: parts}
	return NewViewWithObjects(1, "c", -1, brokers, map[string]*Topic{"t": t}, m)
}

func committed(id uint64) Object { return Object{ID: id, State: ObjectCommitted, Broker: 1, Epoch: 1} }

func ids(os []Object) []uint64 {
	var out []uint64
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

func TestExpiredObjectsCascade(t *testing.T) {
	// A holds live data of partition 2, so B (behind A in partition 0) must stay, and so
	// must C (behind B in partition 1), although all of B and C is below the log start.
	parts := []Partition{
		{Index: 0, LogStartOffset: 20, Objects: []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}, {Object: 2, FirstOffset: 10, LastOffset: 19}}},
		{Index: 1, LogStartOffset: 20, Objects: []ObjectRange{{Object: 2, FirstOffset: 0, LastOffset: 9}, {Object: 3, FirstOffset: 10, LastOffset: 19}}},
		{Index: 2, LogStartOffset: 0, Objects: []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}}},
	}
	v := objView(nil, parts, committed(1), committed(2), committed(3))
	if e := v.ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %v, want none", ids(e))
	}
	parts[2].LogStartOffset = 10
	v = objView(nil, parts, committed(1), committed(2), committed(3))
	if e := ids(v.ExpiredObjects()); len(e) != 3 || e[0] != 1 || e[1] != 2 || e[2] != 3 {
		t.Fatalf("expired %v, want 1 2 3", e)
	}
	if g := v.GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %v", ids(g))
	}
}

func TestGarbageObjects(t *testing.T) {
	brokers := []Broker{{ID: 1, Epoch: 2, State: BrokerActive}, {ID: 2, Epoch: 1, State: BrokerFenced}}
	parts := []Partition{{Index: 0, Objects: []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}}}}
	v := objView(brokers, parts,
		committed(1), // referenced
		committed(2), // unreferenced: garbage
		Object{ID: 3, State: ObjectPrepared, Broker: 1, Epoch: 2}, // live registration
		Object{ID: 4, State: ObjectPrepared, Broker: 1, Epoch: 1}, // old registration: garbage
		Object{ID: 5, State: ObjectPrepared, Broker: 2, Epoch: 1}, // fenced: garbage
		Object{ID: 6, State: ObjectPrepared, Broker: 7, Epoch: 1}, // unknown broker: garbage
	)
	if g := ids(v.GarbageObjects()); len(g) != 4 || g[0] != 2 || g[1] != 4 || g[2] != 5 || g[3] != 6 {
		t.Fatalf("garbage %v, want 2 4 5 6", g)
	}
	if (Partition{}).UploadedThrough() != -1 || parts[0].UploadedThrough() != 10 {
		t.Fatal("UploadedThrough")
	}
	// Views built the old way have no objects.
	if v := NewView(1, "c", -1, nil, nil); v.Objects != nil || v.GarbageObjects() != nil || len(v.ExpiredObjects()) != 0 {
		t.Fatal("NewView view has objects")
	}
}

func TestTrimManifest(t *testing.T) {
	m := []ObjectRange{
		{Object: 1, FirstOffset: 0, LastOffset: 9},
		{Object: 2, FirstOffset: 10, LastOffset: 19},
		{Object: 3, FirstOffset: 20, LastOffset: 29},
	}
	orig := append([]ObjectRange(nil), m...)
	for _, tc := range []struct {
		logStart int64
		keep     []ObjectRange
		dropped  []uint64
	}{
		{0, m, nil},
		{9, m, nil}, // offset 9 is still live
		{10, m[1:], []uint64{1}},
		{25, m[2:], []uint64{1, 2}}, // 20..29 straddles the log start: kept
		{30, nil, []uint64{1, 2, 3}},
		{1000, nil, []uint64{1, 2, 3}},
	} {
		keep, dropped := TrimManifest(m, tc.logStart)
		if !reflect.DeepEqual(keep, tc.keep) || !reflect.DeepEqual(dropped, tc.dropped) {
			t.Fatalf("log start %d: kept %+v dropped %v, want %+v %v", tc.logStart, keep, dropped, tc.keep, tc.dropped)
		}
		// A trimmed manifest never aliases the old one (Views share it).
		if len(dropped) > 0 && len(keep) > 0 && &keep[0] == &m[len(dropped)] {
			t.Fatalf("log start %d: the kept ranges alias the old manifest", tc.logStart)
		}
	}
	if !reflect.DeepEqual(m, orig) {
		t.Fatalf("TrimManifest changed its input: %+v", m)
	}
	if keep, dropped := TrimManifest(nil, 10); keep != nil || dropped != nil {
		t.Fatalf("empty manifest: %+v %v", keep, dropped)
	}
}
