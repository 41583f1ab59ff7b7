package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

func snap(offset int64, ps ...ProducerState) *ProducerSnapshot {
	return &ProducerSnapshot{Offset: offset, Producers: ps}
}

// TestProducerSnapshotInManifest: a commit's snapshot becomes the partition's, a later
// commit replaces it (also with none), deleting objects from the front and raising the
// log start keep it, it survives a reopen, and a stored snapshot shares no memory with
// the caller's.
func TestProducerSnapshotInManifest(t *testing.T) {
	ctx := context.Background()
	s, path, tt, u := localObjects(t)
	producers := func(topic string, partition int) *ProducerSnapshot {
		return s.View().Topics[topic].Partitions[partition].Producers
	}
	r := prng(tt, 0, 0, 9)
	r.Producers = snap(10, ProducerState{ID: 4, Epoch: 2, Batches: [][3]int64{{0, 4, 3}, {5, 5, 9}}}, ProducerState{ID: 7, Batches: [][3]int64{{math.MaxInt32, math.MinInt32 + 1, 1}}})
	want := snap(10, ProducerState{ID: 4, Epoch: 2, Batches: [][3]int64{{0, 4, 3}, {5, 5, 9}}}, ProducerState{ID: 7, Batches: [][3]int64{{math.MaxInt32, math.MinInt32 + 1, 1}}})
	first := localCommit(t, s, 100, r)
	localCommit(t, s, 100, prng(u, 0, 0, 4))
	r.Producers.Producers[0].Batches[0][2] = 99 // the caller's memory, not the store's
	if got := producers("t", 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored snapshot %+v, want %+v", got, want)
	}
	if got := producers("u", 0); got != nil {
		t.Fatalf("a range without a snapshot gave its partition %+v", got)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"producers": {`) || !strings.Contains(string(b), `"o": 10,`) {
		t.Fatalf("state file lacks the snapshot:\n%s", b)
	}
	s2, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.View().Topics["t"].Partitions[0].Producers; !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened snapshot %+v", got)
	}

	// The next range's snapshot replaces it; one without a snapshot clears it (the old
	// one is as of an earlier offset).
	r2 := prng(tt, 0, 10, 19)
	r2.Producers = snap(20, ProducerState{ID: 4, Epoch: 3, Batches: [][3]int64{{0, 0, 15}}})
	second := localCommit(t, s, 100, r2)
	if got := producers("t", 0); !reflect.DeepEqual(got, r2.Producers) {
		t.Fatalf("snapshot after the second range %+v", got)
	}
	third := localCommit(t, s, 100, prng(tt, 0, 20, 29))
	if got := producers("t", 0); got != nil {
		t.Fatalf("a range without a snapshot kept the older one: %+v", got)
	}
	r4 := prng(tt, 0, 30, 39)
	r4.Producers = snap(40, ProducerState{ID: 4, Epoch: 3, Batches: [][3]int64{{1, 1, 35}}})
	localCommit(t, s, 100, r4)

	// Retention: the log start passes the first three ranges, which are deleted.
	if err := s.SetLogStartOffset(ctx, tt.ID, 0, 30); err != nil {
		t.Fatal(err)
	}
	if got := producers("t", 0); !reflect.DeepEqual(got, r4.Producers) {
		t.Fatalf("raising the log start changed the snapshot: %+v", got)
	}
	if err := s.DeleteObjects(ctx, []uint64{first, second, third}); err != nil {
		t.Fatal(err)
	}
	if got := producers("t", 0); !reflect.DeepEqual(got, r4.Producers) || len(localManifest(s, "t", 0)) != 1 {
		t.Fatalf("deleting front objects changed the snapshot: %+v", got)
	}
}

// TestProducerSnapshotRefused: a snapshot that does not describe the range's end, breaks
// a bound, or is malformed refuses the whole commit, for that reason.
func TestProducerSnapshotRefused(t *testing.T) {
	one := func(id int64, batches ...[3]int64) ProducerState { return ProducerState{ID: id, Batches: batches} }
	many := make([]ProducerState, MaxSnapshotProducers+1)
	for i := range many {
		many[i] = one(int64(i), [3]int64{0, 0, 0})
	}
	for _, tc := range []struct {
		name, why string
		snap      *ProducerSnapshot
	}{
		{"as of another offset", "as of offset 9", snap(9, one(1, [3]int64{0, 0, 0}))},
		{"empty", "no producers", snap(10)},
		{"too many producers", "1001 producers", snap(10, many...)},
		{"IDs not ascending", "ascending", snap(10, one(2, [3]int64{0, 0, 0}), one(1, [3]int64{1, 1, 1}))},
		{"the same ID twice", "ascending", snap(10, one(2, [3]int64{0, 0, 0}), one(2, [3]int64{1, 1, 1}))},
		{"negative ID", "ascending", snap(10, one(-1, [3]int64{0, 0, 0}))},
		{"negative epoch", "epoch -1", snap(10, ProducerState{ID: 1, Epoch: -1, Batches: [][3]int64{{0, 0, 0}}})},
		{"no batches", "0 batches", snap(10, one(1))},
		{"six batches", "6 batches", snap(10, one(1, [3]int64{0, 0, 0}, [3]int64{1, 1, 1}, [3]int64{2, 2, 2}, [3]int64{3, 3, 3}, [3]int64{4, 4, 4}, [3]int64{5, 5, 5}))},
		{"offset past the range", "batch [0 0 10]", snap(10, one(1, [3]int64{0, 0, 10}))},
		{"negative offset", "batch [0 0 -1]", snap(10, one(1, [3]int64{0, 0, -1}))},
		{"offsets not ascending", "batch [1 1 5]", snap(10, one(1, [3]int64{0, 0, 5}, [3]int64{1, 1, 5}))},
		{"sequence past int32", "batch [2147483648 0 0]", snap(10, one(1, [3]int64{math.MaxInt32 + 1, 0, 0}))},
		{"negative first sequence", "batch [-1 0 0]", snap(10, one(1, [3]int64{-1, 0, 0}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := &Topic{Name: "t", ID: TopicID{9}, Partitions: []Partition{{}, {Index: 1}}}
			rules := &ObjectRules{
				Objects:   map[uint64]Object{1: {ID: 1, State: ObjectPrepared, Broker: 1, Epoch: 1}},
				NextID:    2,
				TopicByID: func(TopicID) *Topic { return tp },
			}
			ok := PartitionRange{Topic: tp.ID, Partition: 1, LastOffset: 9}
			bad := PartitionRange{Topic: tp.ID, LastOffset: 9, Producers: tc.snap}
			_, _, err := rules.Commit(1, 1, 1, 1, []PartitionRange{ok, bad})
			if !errors.Is(err, ErrObjectRejected) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("%v, want a refusal naming %q", err, tc.why)
			}
			bad.Producers = snap(10, one(1, [3]int64{0, 0, 9}))
			if _, _, err := rules.Commit(1, 1, 1, 1, []PartitionRange{ok, bad}); err != nil {
				t.Fatalf("the good snapshot: %v", err)
			}
		})
	}
}

// TestCommitWeight: snapshots count against MaxCommitRanges, so a commit of many
// partitions with many producers each is refused as a whole.
func TestCommitWeight(t *testing.T) {
	ps := make([]ProducerState, MaxSnapshotProducers)
	for i := range ps {
		ps[i] = ProducerState{ID: int64(i), Batches: [][3]int64{{0, 0, 0}}}
	}
	r := PartitionRange{LastOffset: 0, Producers: snap(1, ps...)}
	if w := r.Weight(); w != 1+2*MaxSnapshotProducers {
		t.Fatalf("weight %d", w)
	}
	if w := (PartitionRange{}).Weight(); w != 1 {
		t.Fatalf("weight without a snapshot %d", w)
	}
	n := MaxCommitRanges/r.Weight() + 1
	ranges := make([]PartitionRange, n)
	tp := &Topic{Name: "big", ID: TopicID{9}, Partitions: make([]Partition, n)}
	for i := range ranges {
		ranges[i] = r
		ranges[i].Topic, ranges[i].Partition = tp.ID, int32(i)
		tp.Partitions[i] = Partition{Index: int32(i)}
	}
	rules := &ObjectRules{
		Objects:   map[uint64]Object{1: {ID: 1, State: ObjectPrepared, Broker: 1, Epoch: 1}},
		NextID:    2,
		TopicByID: func(TopicID) *Topic { return tp },
	}
	if _, _, err := rules.Commit(1, 1, 1, 1, ranges); err == nil || !strings.Contains(err.Error(), "weight") {
		t.Fatalf("commit of weight %d accepted (%v)", CommitWeight(ranges), err)
	}
	if _, changes, err := rules.Commit(1, 1, 1, 1, ranges[:n-1]); err != nil || len(changes) != n-1 || changes[0].Producers == nil {
		t.Fatalf("commit of weight %d: %v", CommitWeight(ranges[:n-1]), err)
	}
}

// TestProducerSnapshotJSON: the wire form is compact, and the fields are left out when
// there is no snapshot (state and commands written before snapshots decode unchanged).
func TestProducerSnapshotJSON(t *testing.T) {
	b, err := json.Marshal(snap(10, ProducerState{ID: 4, Batches: [][3]int64{{0, 4, 3}}}, ProducerState{ID: 5, Epoch: 1, Batches: [][3]int64{{6, 6, 9}}}))
	if err != nil || string(b) != `{"o":10,"p":[{"i":4,"b":[[0,4,3]]},{"i":5,"e":1,"b":[[6,6,9]]}]}` {
		t.Fatalf("%s %v", b, err)
	}
	for _, v := range []any{Partition{}, PartitionRange{}} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), "producers") {
			t.Fatalf("%T without a snapshot encodes it: %s", v, b)
		}
	}
}
