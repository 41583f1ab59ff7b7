package metadata

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestAbortedAndOpenTxnInManifest: a range's aborted transactions become its manifest
// entry's, a snapshot's open transactions (also of a producer with no batches left)
// are stored, both survive a reopen, and the stored lists share no memory with the
// caller's.
func TestAbortedAndOpenTxnInManifest(t *testing.T) {
	s, path, tt, _ := localObjects(t)
	zero, four := int64(0), int64(4)
	r := prng(tt, 0, 0, 9)
	r.Aborted = []AbortedTxn{{ProducerID: 3, First: 0, Last: 2}, {ProducerID: 5, First: 1, Last: 9}}
	r.Producers = snap(10, ProducerState{ID: 4, Batches: [][3]int64{{0, 0, 4}}, TxnFirst: &four}, ProducerState{ID: 6, TxnFirst: &zero})
	want := []AbortedTxn{{ProducerID: 3, First: 0, Last: 2}, {ProducerID: 5, First: 1, Last: 9}}
	zero2, four2 := int64(0), int64(4) // the caller changes zero and four below
	wantSnap := snap(10, ProducerState{ID: 4, Batches: [][3]int64{{0, 0, 4}}, TxnFirst: &four2}, ProducerState{ID: 6, TxnFirst: &zero2})
	localCommit(t, s, 100, r)
	r.Aborted[0].First = 99
	*r.Producers.Producers[0].TxnFirst = 99
	for _, st := range []*LocalStore{s, reopen(t, path)} {
		p := st.View().Topics["t"].Partitions[0]
		if len(p.Objects) != 1 || !reflect.DeepEqual(p.Objects[0].Aborted, want) {
			t.Fatalf("manifest %+v, want aborted %+v", p.Objects, want)
		}
		if !reflect.DeepEqual(p.Producers, wantSnap) {
			t.Fatalf("snapshot %+v, want %+v", p.Producers, wantSnap)
		}
	}
}

func reopen(t *testing.T, path string) *LocalStore {
	t.Helper()
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAbortedRefused: aborted transactions outside the range, out of order, beginning
// after their marker, or too many refuse the commit, for that reason; an open
// transaction beginning past the range refuses it too.
func TestAbortedRefused(t *testing.T) {
	a := func(pid, first, last int64) AbortedTxn { return AbortedTxn{ProducerID: pid, First: first, Last: last} }
	many := make([]AbortedTxn, MaxRangeAborted+1)
	for i := range many {
		many[i] = a(1, 0, int64(i))
	}
	past, neg := int64(10), int64(-1)
	for _, tc := range []struct {
		name, why string
		aborted   []AbortedTxn
		snap      *ProducerSnapshot
	}{
		{"marker past the range", "aborted transaction", []AbortedTxn{a(1, 0, 10)}, nil},
		{"marker before the range", "aborted transaction", []AbortedTxn{a(1, 0, 1)}, nil},
		{"first after the marker", "aborted transaction", []AbortedTxn{a(1, 6, 5)}, nil},
		{"negative producer", "aborted transaction", []AbortedTxn{a(-1, 2, 5)}, nil},
		{"not ascending", "aborted transaction", []AbortedTxn{a(1, 2, 6), a(2, 2, 5)}, nil},
		{"same marker twice", "aborted transaction", []AbortedTxn{a(1, 2, 5), a(2, 2, 5)}, nil},
		{"too many", "4001 aborted", many, nil},
		{"open past the range", "open transaction from 10", nil, snap(10, ProducerState{ID: 1, TxnFirst: &past})},
		{"open at a negative offset", "open transaction from -1", nil, snap(10, ProducerState{ID: 1, TxnFirst: &neg})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := &Topic{Name: "t", ID: TopicID{9}, Partitions: []Partition{{}}}
			rules := &ObjectRules{
				Objects:   map[uint64]Object{1: {ID: 1, State: ObjectPrepared, Broker: 1, Epoch: 1}},
				NextID:    2,
				TopicByID: func(TopicID) *Topic { return tp },
			}
			bad := PartitionRange{Topic: tp.ID, FirstOffset: 0, LastOffset: 9, Aborted: tc.aborted, Producers: tc.snap}
			if tc.name == "marker before the range" {
				bad.FirstOffset = 2
			}
			_, _, err := rules.Commit(1, 1, 1, 1, []PartitionRange{bad})
			if !errors.Is(err, ErrObjectRejected) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("%v, want a refusal naming %q", err, tc.why)
			}
			good := PartitionRange{Topic: tp.ID, FirstOffset: 0, LastOffset: 9, Aborted: []AbortedTxn{a(1, 0, 0), a(2, 0, 9)}}
			if _, ch, err := rules.Commit(1, 1, 1, 1, []PartitionRange{good}); err != nil || !reflect.DeepEqual(ch[0].Objects[0].Aborted, good.Aborted) {
				t.Fatalf("the good range: %+v %v", ch, err)
			}
		})
	}
	if w := (PartitionRange{Aborted: many[:7]}).Weight(); w != 8 {
		t.Fatalf("weight of a range with 7 aborted transactions %d", w)
	}
}

// TestTxnJSON: the wire forms are compact, an open transaction at offset 0 is kept
// (not left out as a zero), and state written before transactions decodes without them.
func TestTxnJSON(t *testing.T) {
	zero := int64(0)
	b, err := json.Marshal(ObjectRange{Object: 1, FirstOffset: 0, LastOffset: 3, Aborted: []AbortedTxn{{ProducerID: 7, First: 0, Last: 2}}})
	if err != nil || string(b) != `{"object":1,"first_offset":0,"last_offset":3,"aborted":[{"p":7,"f":0,"l":2}]}` {
		t.Fatalf("%s %v", b, err)
	}
	if b, _ = json.Marshal(ProducerState{ID: 1, Batches: [][3]int64{}, TxnFirst: &zero}); string(b) != `{"i":1,"b":[],"t":0}` {
		t.Fatalf("%s", b)
	}
	var old struct {
		R ObjectRange
		P ProducerState
	}
	if err := json.Unmarshal([]byte(`{"R":{"object":1,"first_offset":0,"last_offset":3},"P":{"i":1,"b":[[0,0,0]]}}`), &old); err != nil ||
		old.R.Aborted != nil || old.P.TxnFirst != nil {
		t.Fatalf("%+v %v", old, err)
	}
	if !(ObjectRange{Aborted: []AbortedTxn{{Last: 1}}}).Equal(ObjectRange{Aborted: []AbortedTxn{{Last: 1}}}) ||
		(ObjectRange{Aborted: []AbortedTxn{{Last: 1}}}).Equal(ObjectRange{Aborted: []AbortedTxn{{Last: 2}}}) {
		t.Fatal("ObjectRange.Equal does not compare the aborted transactions")
	}
}
