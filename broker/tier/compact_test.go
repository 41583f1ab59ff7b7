package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// compactRig is a rig of a compacted topic (cleaned whenever 1% of it is dirty).
func compactRig(t testing.TB, o rigOpts) *upRig {
	t.Helper()
	o.configs = map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
	return newRig(t, o)
}

// produceKeyed appends one batch of records key=value (value "" is a tombstone), each
// key its own record, in the tail cache as if synced.
func (r *upRig) produceKeyed(t testing.TB, kv ...string) {
	t.Helper()
	ts := r.clock.Now().UnixMilli()
	h := recbatch.Header{LastOffsetDelta: int32(len(kv)/2 - 1), MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	var recs []recbatch.Record
	for i := 0; i+1 < len(kv); i += 2 {
		rec := recbatch.Record{Offset: int64(i / 2), Timestamp: ts, Key: []byte(kv[i])}
		if kv[i+1] != "" {
			rec.Value = []byte(kv[i+1])
		}
		recs = append(recs, rec)
	}
	b, err := recbatch.Rebuild(h, recs, -1)
	if err != nil {
		t.Fatal(err)
	}
	r.p.Commit(r.prepare(t, b), noReader{}, 0)
}

// produceABC writes keys a, b and c four times (a0..a3 and so on), then deletes c, each
// batch uploaded as an object of its own: 13 records in 5 ranges, the latest of each key
// at offsets 9 (a=a3), 10 (b=b3) and 12 (c's tombstone).
func (r *upRig) produceABC(t testing.TB) {
	t.Helper()
	for round := 0; round < 4; round++ {
		r.produceKeyed(t, "a", fmt.Sprint("a", round), "b", fmt.Sprint("b", round), "c", fmt.Sprint("c", round))
		if _, err := r.tr.uploadOnce(); err != nil {
			t.Fatal(err)
		}
	}
	r.produceKeyed(t, "c", "") // c deleted
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
}

// coldRecords reads every record the partition's manifest names, from the objects, as
// a consumer's cold read gets them: offset → key=value ("<tombstone>" for a null value).
func (r *upRig) coldRecords(t testing.TB) map[int64]string {
	t.Helper()
	v := r.meta.View()
	out := map[int64]string{}
	for _, or := range v.Topics["t"].Partitions[0].Objects {
		batches, err := r.tr.rangeBatches(context.Background(), v, r.p, or)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			_, recs, err := recbatch.ReadRecords(b, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				val := "<tombstone>"
				if rec.Value != nil {
					val = string(rec.Value)
				}
				out[rec.Offset] = string(rec.Key) + "=" + val
			}
		}
	}
	return out
}

// staleEpoch stands for a controller whose view of the partition moved on (a failover
// or a move) between the cleaner's start and its commit: while stale is set, each
// ReplaceRanges reaches the real store one leader epoch behind the partition's, so the
// store's own rules refuse it.
type staleEpoch struct {
	metadata.ObjectManifest
	mu     sync.Mutex
	stale  bool
	calls  int
	errors []error
}

func (s *staleEpoch) ReplaceRanges(ctx context.Context, id uint64, size int64, rr metadata.RangeReplace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.stale {
		rr.LeaderEpoch--
	}
	err := s.ObjectManifest.(metadata.ObjectCompactor).ReplaceRanges(ctx, id, size, rr)
	s.errors = append(s.errors, err)
	return err
}

// TestCompactRefusedByLeaderChangeLosesNothing: a clean whose ReplaceRanges is refused
// because the partition's leader epoch changed (ErrFenced, counted as a rejected commit
// and a failed pass) leaves the manifest exactly as it was: the old objects serve every
// acked batch byte for byte, and the cleaned object it wrote is collected as an unused
// prepared object. The next pass, with leadership steady, replaces the ranges and reads
// then give each key's latest record at its offset.
func TestCompactRefusedByLeaderChangeLosesNothing(t *testing.T) {
	se := &staleEpoch{stale: true}
	r := compactRig(t, rigOpts{manifest: func(m metadata.ObjectManifest) metadata.ObjectManifest {
		se.ObjectManifest = m
		return se
	}})
	r.produceABC(t)
	before := r.manifest().Objects
	if len(before) != 5 {
		t.Fatalf("%d ranges uploaded, want 5", len(before))
	}
	allRecords := r.coldRecords(t)
	keysBefore := r.keys(t)

	r.tr.CompactRound()
	if se.calls != 1 || len(se.errors) != 1 || !errors.Is(se.errors[0], metadata.ErrObjectRejected) || !errors.Is(se.errors[0], metadata.ErrFenced) {
		t.Fatalf("%d replaces, errors %v: want one, refused as fenced", se.calls, se.errors)
	}
	if n := testutil.ToFloat64(r.tr.metrics.rejected); n != 1 {
		t.Fatalf("%v rejected commits, want 1", n)
	}
	if n := testutil.ToFloat64(r.tr.metrics.cleanFailures); n != 1 {
		t.Fatalf("%v failed passes, want 1", n)
	}
	if n := testutil.ToFloat64(r.tr.metrics.cleanedObjects); n != 0 {
		t.Fatalf("%v objects cleaned, want 0", n)
	}
	after := r.manifest().Objects
	if len(after) != len(before) {
		t.Fatalf("manifest %+v after the refused clean, want %+v", after, before)
	}
	for i := range before {
		if !after[i].Equal(before[i]) {
			t.Fatalf("range %d: %+v after the refused clean, want %+v", i, after[i], before[i])
		}
	}
	// Every acked batch, byte for byte, from the old objects.
	v := r.meta.View()
	seen := 0
	for _, or := range after {
		batches, err := r.tr.rangeBatches(context.Background(), v, r.p, or)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			h, _ := recbatch.Parse(b)
			if !bytes.Equal(b, r.acked[h.BaseOffset]) {
				t.Fatalf("the batch at %d is not the one acked", h.BaseOffset)
			}
			seen++
		}
	}
	if seen != len(r.acked) {
		t.Fatalf("%d batches read back, %d acked", seen, len(r.acked))
	}
	if got := r.coldRecords(t); fmt.Sprint(got) != fmt.Sprint(allRecords) || len(got) != 13 {
		t.Fatalf("cold records after the refused clean: %v, want %v", got, allRecords)
	}
	// The cleaned object was written (a PUT) and is left prepared: collection forgets it
	// after two rounds (the first only marks it unused).
	var orphan metadata.Object
	for _, o := range r.meta.View().Objects {
		if o.State == metadata.ObjectPrepared {
			orphan = o
		}
	}
	if orphan.ID == 0 || !r.keys(t)[orphan.Key] || len(r.keys(t)) != len(keysBefore)+1 {
		t.Fatalf("the refused clean's object %+v not in the store (keys %v)", orphan, r.keys(t))
	}
	r.retain()
	r.retain()
	if _, ok := r.meta.View().Object(orphan.ID); ok || r.keys(t)[orphan.Key] {
		t.Fatalf("the refused clean's object %s not collected", orphan.Key)
	}

	// Leadership steady again: the next pass lands.
	se.mu.Lock()
	se.stale = false
	se.mu.Unlock()
	r.tr.CompactRound()
	if err := se.errors[len(se.errors)-1]; err != nil {
		t.Fatalf("the second clean: %v", err)
	}
	m := r.manifest().Objects
	if len(m) != 1 || !m[0].Compacted || m[0].FirstOffset != 0 || m[0].LastOffset != 12 {
		t.Fatalf("manifest after the clean %+v, want one compacted range 0..12", m)
	}
	want := map[int64]string{9: "a=a3", 10: "b=b3", 12: "c=<tombstone>"}
	if got := r.coldRecords(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cold records after the clean: %v, want %v", got, want)
	}
}
