package share

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// indexedStore is memGroupStore with the index records, fenced the same way.
type indexedStore struct{ *memGroupStore }

func (s indexedStore) LoadIndex(ctx context.Context, p, e int32, _ bool) ([]byte, bool, error) {
	return s.LoadGroup(ctx, "index-"+strconv.Itoa(int(p)), e)
}

func (s indexedStore) SaveIndex(ctx context.Context, p, e int32, rec []byte) error {
	return s.SaveGroup(ctx, "index-"+strconv.Itoa(int(p)), e, rec)
}

// The coordinator that takes a __consumer_offsets partition over lists its share groups
// before any member heartbeats (ListGroups after a move); a deleted group leaves the
// index; a coordinator that lost the partition cannot write its index.
func TestGroupsListedByNewCoordinator(t *testing.T) {
	ctx := context.Background()
	st := indexedStore{&memGroupStore{recs: map[string][]byte{}, fence: map[string]int32{}}}
	now := time.Unix(1000, 0)
	old := NewGroups(GroupConfig{SessionTimeout: time.Minute}, st)
	join := func(gs *Groups, g, m string, part, epoch int32) error {
		_, err := gs.Heartbeat(ctx, HeartbeatRequest{Group: g, Member: m, Subscribed: []string{"t"}, CoordEpoch: epoch, CoordPartition: part}, now, oneTopic)
		return err
	}
	for _, g := range []string{"a", "b"} {
		if err := join(old, g, "m", 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := join(old, "c", "m", 1, 1); err != nil {
		t.Fatal(err)
	}
	moved := NewGroups(GroupConfig{SessionTimeout: time.Minute}, st)
	got, err := moved.Coordinated(ctx, []Coord{{Partition: 0, Epoch: 2}}, now)
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("the new coordinator of partition 0 lists %v (%v), want [a b]", got, err)
	}
	if d, _ := moved.Describe(ctx, "a", 2, now); d == nil || len(d.Members) != 1 {
		t.Fatalf("a listed group not loaded: %+v", d)
	}
	// The old coordinator lost partition 0: a new group there is refused (the index
	// write is fenced before the group's record is written).
	if err := join(old, "z", "m", 0, 1); !errors.Is(err, errFenced) {
		t.Fatalf("a new group at the old coordinator: %v, want fenced", err)
	}
	if _, err := moved.Heartbeat(ctx, HeartbeatRequest{Group: "b", Member: "m", Epoch: -1, CoordEpoch: 2}, now, oneTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := moved.Delete(ctx, "b", 2, now); err != nil {
		t.Fatal(err)
	}
	back := NewGroups(GroupConfig{SessionTimeout: time.Minute}, st)
	if got, err := back.Coordinated(ctx, []Coord{{Partition: 0, Epoch: 3}}, now); err != nil || !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("after deleting b: %v %v", got, err)
	}
	ids, err := decodeIndex(st.recs["index-0"])
	if err != nil || !reflect.DeepEqual(ids, map[string]bool{"a": true}) {
		t.Fatalf("index record %v %v: the deleted group not removed", ids, err)
	}
}
