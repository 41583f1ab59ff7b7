package controller

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// TestFSMCommitProducerSnapshot: a range's producer snapshot goes through the Raft log
// into the partition (View and snapshot alike), is replaced by the next commit (cleared
// by one without), kept when the log start moves, refused when malformed; and the
// client still recognises a commit with snapshots after a lost answer.
func TestFSMCommitProducerSnapshot(t *testing.T) {
	f := objectFSM(t)
	producers := func(g *FSM, partition int) *metadata.ProducerSnapshot {
		return g.View().Topics["t"].Partitions[partition].Producers
	}
	r0 := rng(7, 0, 0, 9)
	r0.Producers = &metadata.ProducerSnapshot{Offset: 10, Producers: []metadata.ProducerState{
		{ID: 3, Epoch: 1, Batches: [][3]int64{{0, 1, 2}, {2, 2, 9}}},
		{ID: 5, Batches: [][3]int64{{7, 7, 4}}},
	}}
	r1 := rng(7, 1, 0, 4)
	o := prepare(t, f, 1, 1)
	bad := r1
	bad.Producers = &metadata.ProducerSnapshot{Offset: 4, Producers: []metadata.ProducerState{{ID: 1, Batches: [][3]int64{{0, 0, 0}}}}}
	refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 10, Ranges: []metadata.PartitionRange{r0, bad}}, metadata.ErrObjectRejected)
	cmd := &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 10, Ranges: []metadata.PartitionRange{r0, r1}}
	mustApply(t, f, cmd)
	if got := producers(f, 0); !reflect.DeepEqual(got, r0.Producers) {
		t.Fatalf("t/0 snapshot %+v", got)
	}
	if got := producers(f, 1); got != nil {
		t.Fatalf("t/1 snapshot %+v, want none", got)
	}
	st := stateJSON(t, f.State())
	if !strings.Contains(st, `"producers":{"o":10,"p":[{"i":3,"e":1,"b":[[0,1,2],[2,2,9]]},{"i":5,"b":[[7,7,4]]}]}`) {
		t.Fatalf("state JSON: %s", st)
	}
	r := snapshotRestore(t, f)
	if got := producers(r, 0); !reflect.DeepEqual(got, r0.Producers) {
		t.Fatalf("restored t/0 snapshot %+v", got)
	}
	if !(&ctlwire.CommitObjectRequest{ID: cmd.ID, Broker: 1, Epoch: 1, Size: 10, Ranges: cmd.Ranges}).AppliedIn(f.View()) {
		t.Fatal("AppliedIn does not recognise a commit with snapshots")
	}

	for _, g := range []*FSM{f, r} {
		mustApply(t, g, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 10})
		if got := producers(g, 0); !reflect.DeepEqual(got, r0.Producers) {
			t.Fatalf("raising the log start changed the snapshot: %+v", got)
		}
		next := rng(7, 0, 10, 19)
		next.Producers = &metadata.ProducerSnapshot{Offset: 20, Producers: []metadata.ProducerState{{ID: 3, Epoch: 2, Batches: [][3]int64{{0, 0, 15}}}}}
		commitNew(t, g, 10, next)
		if got := producers(g, 0); !reflect.DeepEqual(got, next.Producers) {
			t.Fatalf("snapshot after the next commit %+v", got)
		}
		commitNew(t, g, 10, rng(7, 0, 20, 29))
		if got := producers(g, 0); got != nil {
			t.Fatalf("a commit without a snapshot kept %+v", got)
		}
	}
	if got, want := stateJSON(t, r.State()), stateJSON(t, f.State()); got != want {
		t.Fatalf("replicas diverged:\n%s\n%s", got, want)
	}
}

// TestCommitWithSnapshotsFitsBody: a commit at metadata.MaxCommitRanges of weight, every
// number at its widest, fits the default request body limit however the weight is made
// up: many ranges with one producer each, or few with full snapshots, or ranges full of
// aborted transactions.
func TestCommitWithSnapshotsFitsBody(t *testing.T) {
	widest := func(n int) *metadata.ProducerSnapshot {
		s := &metadata.ProducerSnapshot{Offset: math.MinInt64}
		for i := 0; i < n; i++ {
			p := metadata.ProducerState{ID: math.MinInt64, Epoch: math.MinInt16}
			for j := 0; j < metadata.ProducerWindow; j++ {
				p.Batches = append(p.Batches, [3]int64{math.MinInt32, math.MinInt32, math.MinInt64})
			}
			s.Producers = append(s.Producers, p)
		}
		return s
	}
	r := metadata.PartitionRange{Partition: -1 << 31, FirstOffset: -1 << 63, LastOffset: -1 << 63, MaxTimestamp: -1 << 63, Bytes: -1 << 63}
	for i := range r.Topic {
		r.Topic[i] = 255
	}
	// Aborted transactions count one each: ranges full of them fit too.
	for _, c := range []struct{ producers, aborted int }{
		{0, 0}, {1, 0}, {2, 0}, {10, 0}, {metadata.MaxSnapshotProducers, 0},
		{0, 1}, {0, metadata.MaxRangeAborted}, {metadata.MaxSnapshotProducers, metadata.MaxRangeAborted},
	} {
		req := ctlwire.CommitObjectRequest{ID: ^uint64(0), Broker: -1 << 31, Epoch: -1 << 63, Size: -1 << 63}
		with := r
		if c.producers > 0 {
			with.Producers = widest(c.producers)
		}
		for range c.aborted {
			with.Aborted = append(with.Aborted, metadata.AbortedTxn{ProducerID: math.MinInt64, First: math.MinInt64, Last: math.MinInt64})
		}
		for metadata.CommitWeight(req.Ranges)+with.Weight() <= metadata.MaxCommitRanges {
			req.Ranges = append(req.Ranges, with)
		}
		// Fill what is left of the weight with plain ranges.
		for metadata.CommitWeight(req.Ranges) < metadata.MaxCommitRanges {
			req.Ranges = append(req.Ranges, r)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if limit := DefaultConfig().MaxBodyBytes; int64(len(b)) >= limit {
			t.Fatalf("%d ranges with %d producers and %d aborted transactions each: %d bytes, the body limit is %d", len(req.Ranges), c.producers, c.aborted, len(b), limit)
		}
		t.Logf("%d producers, %d aborted transactions per range: %d ranges, %d bytes", c.producers, c.aborted, len(req.Ranges), len(b))
	}
}
