package share

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// memGroupStore is a GroupStore in memory that fences as the broker's does.
type memGroupStore struct {
	mu     sync.Mutex
	recs   map[string][]byte
	fence  map[string]int32
	writes int
}

var errFenced = errors.New("fenced")

func (s *memGroupStore) LoadGroup(_ context.Context, g string, e int32) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e < s.fence[g] {
		return nil, false, errFenced
	}
	s.fence[g] = e
	r, ok := s.recs[g]
	return r, ok, nil
}

func (s *memGroupStore) SaveGroup(_ context.Context, g string, e int32, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e < s.fence[g] {
		return errFenced
	}
	s.fence[g] = e
	s.recs[g] = append([]byte(nil), rec...)
	s.writes++
	return nil
}

func oneTopic(name string) (TopicInfo, bool) {
	return TopicInfo{ID: [16]byte{1}, Partitions: 3}, name == "t"
}

// A share group's members, epochs and assignments survive a move of its coordinator: a
// new coordinator (a new Groups over the same store, a higher epoch) knows every member,
// answers their heartbeats at their epochs, and fences the old coordinator's writes.
func TestGroupsDurableAcrossCoordinatorMove(t *testing.T) {
	ctx := context.Background()
	st := &memGroupStore{recs: map[string][]byte{}, fence: map[string]int32{}}
	now := time.Unix(1000, 0)
	cfg := GroupConfig{SessionTimeout: 45 * time.Second}
	old := NewGroups(cfg, st)
	epochs := map[string]int32{}
	for _, m := range []string{"m1", "m2", "m3"} {
		r, err := old.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: m, Epoch: 0, Subscribed: []string{"t"}, CoordEpoch: 1}, now, oneTopic)
		if err != nil {
			t.Fatal(err)
		}
		epochs[m] = r.Epoch
	}
	// m3 leaves; m1 and m2 catch up with the group's epoch.
	if _, err := old.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m3", Epoch: -1, CoordEpoch: 1}, now, oneTopic); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m1", "m2"} {
		r, err := old.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: m, Epoch: epochs[m], CoordEpoch: 1}, now, oneTopic)
		if err != nil {
			t.Fatal(err)
		}
		epochs[m] = r.Epoch
	}
	before, err := old.Describe(ctx, "g", 1, now)
	if err != nil || before == nil {
		t.Fatal(before, err)
	}
	writes := st.writes
	if _, err := old.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m1", Epoch: epochs["m1"], CoordEpoch: 1}, now, oneTopic); err != nil || st.writes != writes {
		t.Fatalf("a heartbeat that changes nothing wrote %d records (err %v)", st.writes-writes, err)
	}

	moved := NewGroups(cfg, st)
	later := now.Add(time.Second)
	after, err := moved.Describe(ctx, "g", 2, later)
	if err != nil || after == nil {
		t.Fatalf("the new coordinator does not know the group: %v", err)
	}
	if after.Epoch != before.Epoch || after.AssignEpoch != before.AssignEpoch || len(after.Members) != 2 {
		t.Fatalf("after the move: epoch %d/%d, %d members; before %d/%d", after.Epoch, after.AssignEpoch, len(after.Members), before.Epoch, before.AssignEpoch)
	}
	for id, m := range before.Members {
		a := after.Members[id]
		if a == nil || a.Epoch != m.Epoch || !reflect.DeepEqual(a.Assignment, m.Assignment) || !reflect.DeepEqual(a.Subscribed, m.Subscribed) {
			t.Fatalf("member %s after the move: %+v, before %+v", id, a, m)
		}
	}
	for _, m := range []string{"m1", "m2"} {
		r, err := moved.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: m, Epoch: epochs[m], CoordEpoch: 2}, later, oneTopic)
		if err != nil || r.Epoch != epochs[m] || r.Sent {
			t.Fatalf("member %s heartbeating the new coordinator: %+v %v (epoch was %d)", m, r, err, epochs[m])
		}
	}
	// m4 joins at the new coordinator.
	if _, err := moved.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m4", Epoch: 0, Subscribed: []string{"t"}, CoordEpoch: 2}, later, oneTopic); err != nil {
		t.Fatal(err)
	}
	// The group moves back to the old broker at a newer epoch: it loads the group again
	// rather than serving its stale memory (without m4).
	back, err := old.Describe(ctx, "g", 3, later)
	if err != nil || back.Members["m4"] == nil || len(back.Members) != 3 {
		t.Fatalf("the old broker at a newer epoch: %+v %v", back, err)
	}
	// The coordinator of epoch 2 lost the group: its late change is refused, and it does
	// not reach the store.
	if _, err := moved.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m9", Epoch: 0, Subscribed: []string{"t"}, CoordEpoch: 2}, later, oneTopic); !errors.Is(err, errFenced) {
		t.Fatalf("the old coordinator's write: %v, want fenced", err)
	}
	if d, _ := old.Describe(ctx, "g", 3, later); d.Members["m9"] != nil || len(d.Members) != 3 {
		t.Fatalf("members after a fenced write: %v", d.Members)
	}
}

// An encoded group decodes to the same group; a cut or altered record is refused.
func TestGroupRecordRoundTrip(t *testing.T) {
	g := &Group{ID: "g", Epoch: 7, AssignEpoch: 6, topicsPrint: "t\x01", Topics: []string{"t", "u"}, Members: map[string]*Member{
		"a": {ID: "a", ClientID: "c", ClientHost: "/h", Rack: "r1", Epoch: 6, Subscribed: []string{"t", "u"},
			Assignment: map[[16]byte][]int32{{1}: {0, 2}, {2}: {1}}},
		"b": {ID: "b", Epoch: 5},
	}}
	rec := encodeGroup(g, 9)
	if e, ok := RecordEpoch(rec); !ok || e != 9 {
		t.Fatalf("record epoch %d %v", e, ok)
	}
	d, err := decodeGroup("g", rec, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d, g) {
		t.Fatalf("decoded %+v, want %+v", d, g)
	}
	for i := 0; i < len(rec); i++ {
		if _, err := decodeGroup("g", rec[:i], time.Time{}); err == nil {
			t.Fatalf("a record cut at %d of %d decoded", i, len(rec))
		}
	}
	if _, err := decodeGroup("g", append(rec, 0), time.Time{}); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

// DeleteGroups: a group with members is not deleted; an empty one is, for good (a new
// coordinator does not load it), and the topics it subscribed are returned.
func TestGroupsDelete(t *testing.T) {
	ctx := context.Background()
	st := &memGroupStore{recs: map[string][]byte{}, fence: map[string]int32{}}
	now := time.Unix(1000, 0)
	gs := NewGroups(GroupConfig{SessionTimeout: time.Minute}, st)
	if _, err := gs.Delete(ctx, "g", 1, now); !errors.Is(err, ErrNotShareGroup) {
		t.Fatalf("deleting an unknown group: %v", err)
	}
	if _, err := gs.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m", Subscribed: []string{"t"}, CoordEpoch: 1}, now, oneTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Delete(ctx, "g", 1, now); !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("deleting a group with a member: %v", err)
	}
	if _, err := gs.Heartbeat(ctx, HeartbeatRequest{Group: "g", Member: "m", Epoch: -1, CoordEpoch: 1}, now, oneTopic); err != nil {
		t.Fatal(err)
	}
	topics, err := gs.Delete(ctx, "g", 1, now)
	if err != nil || !reflect.DeepEqual(topics, []string{"t"}) {
		t.Fatalf("deleting the empty group: %v %v", topics, err)
	}
	if d, err := NewGroups(GroupConfig{}, st).Describe(ctx, "g", 2, now); d != nil || err != nil {
		t.Fatalf("a deleted group loaded by a new coordinator: %+v %v", d, err)
	}
	if d, _ := gs.Describe(ctx, "g", 1, now); d != nil {
		t.Fatal("a deleted group still described")
	}
}

// A v1 snapshot (before state epochs) still decodes, with state epoch 0; v2 keeps the
// state epoch; both name their writer's epoch where RecordEpoch reads it.
func TestSnapshotV1AndStateEpoch(t *testing.T) {
	s := Snapshot{LeaderEpoch: 3, StateEpoch: 4, Start: 9, Batches: []StateBatch{{First: 9, Last: 10, State: Archived, Deliveries: 2}}}
	v2 := s.Encode(nil)
	v1 := append([]byte{snapshotV1}, v2[1:5]...)
	v1 = append(v1, v2[9:]...)
	for _, c := range []struct {
		b     []byte
		state int32
	}{{v2, 4}, {v1, 0}} {
		d, err := DecodeSnapshot(c.b)
		if err != nil || d.StateEpoch != c.state || d.LeaderEpoch != 3 || d.Start != 9 || len(d.Batches) != 1 {
			t.Fatalf("version %d: %+v %v", c.b[0], d, err)
		}
		if e, ok := RecordEpoch(c.b); !ok || e != 3 {
			t.Fatalf("version %d: record epoch %d", c.b[0], e)
		}
	}
}
