package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// localObjects opens a LocalStore (broker 3) with topic "t" (3 partitions) and "u" (1).
func localObjects(t *testing.T) (s *LocalStore, path string, tt, u *Topic) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "meta.json")
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if tt, err = s.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if u, err = s.CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	return s, path, tt, u
}

func prng(t *Topic, partition int32, first, last int64) PartitionRange {
	return PartitionRange{Topic: t.ID, Partition: partition, FirstOffset: first, LastOffset: last}
}

// localCommit prepares and commits an object with the ranges.
func localCommit(t *testing.T, s *LocalStore, size int64, ranges ...PartitionRange) uint64 {
	t.Helper()
	o, err := s.PrepareObject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitObject(context.Background(), o.ID, size, ranges); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// localRefuse expects err to be a refusal matching want and the store unchanged since
// version.
func localRefuse(t *testing.T, s *LocalStore, version uint64, err error, want ...error) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range append([]error{ErrObjectRejected}, want...) {
		if !errors.Is(err, w) {
			t.Fatalf("%v, want %v", err, w)
		}
	}
	if v := s.View().Version; v != version {
		t.Fatalf("refused (%v) but the version moved from %d to %d", err, version, v)
	}
}

// commitAfterRefusal prepares an object; a commit of bad is refused, one of good accepted.
func commitAfterRefusal(t *testing.T, s *LocalStore, bad, good PartitionRange) {
	t.Helper()
	o, err := s.PrepareObject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := s.View().Version
	localRefuse(t, s, v, s.CommitObject(context.Background(), o.ID, 1, []PartitionRange{bad}))
	if err := s.CommitObject(context.Background(), o.ID, 1, []PartitionRange{good}); err != nil {
		t.Fatal(err)
	}
}

func localManifest(s *LocalStore, topic string, partition int) []ObjectRange {
	return s.View().Topics[topic].Partitions[partition].Objects
}

func TestLocalStorePrepareCommitObject(t *testing.T) {
	ctx := context.Background()
	s, _, tt, u := localObjects(t)
	o, err := s.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Object{ID: 1, Key: "objects/00000000000000000001.obj", State: ObjectPrepared, Broker: 3, Epoch: localEpoch}
	if o != want || ObjectKey(1) != want.Key {
		t.Fatalf("prepared %+v, want %+v", o, want)
	}
	old := s.View()
	if got, ok := old.Object(1); !ok || got != want {
		t.Fatalf("view has %+v (%v)", got, ok)
	}
	if self, ok := old.Broker(3); !ok || self.Epoch != o.Epoch {
		t.Fatalf("the view shows broker 3 as %+v, the object's epoch is %d", self, o.Epoch)
	}
	if g := old.GarbageObjects(); len(g) != 0 {
		t.Fatalf("the only broker's prepared object is garbage: %+v", g)
	}

	r0 := prng(tt, 0, 0, 99)
	r0.MaxTimestamp, r0.Bytes = 1_700_000_000_000, 5000
	if err := s.CommitObject(ctx, o.ID, 6000, []PartitionRange{r0, prng(tt, 1, 0, 9)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.View().Object(o.ID); got.State != ObjectCommitted || got.Size != 6000 || got.Key != o.Key {
		t.Fatalf("committed %+v", got)
	}
	if m := localManifest(s, "t", 0); !reflect.DeepEqual(m, []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 99, MaxTimestamp: 1_700_000_000_000, Bytes: 5000}}) {
		t.Fatalf("t/0 manifest %+v", m)
	}
	if m := localManifest(s, "t", 1); !reflect.DeepEqual(m, []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}}) {
		t.Fatalf("t/1 manifest %+v", m)
	}
	if ov, _ := old.Object(o.ID); ov.State != ObjectPrepared || old.Topics["t"].Partitions[0].Objects != nil {
		t.Fatalf("the commit leaked into an old view: %+v", ov)
	}

	// The controller's refusals, nothing changed by any of them.
	v := s.View().Version
	localRefuse(t, s, v, s.CommitObject(ctx, o.ID, 1, []PartitionRange{prng(tt, 0, 100, 120)})) // committed already
	localRefuse(t, s, v, s.CommitObject(ctx, 99, 1, []PartitionRange{prng(tt, 0, 100, 120)}))   // unknown
	localRefuse(t, s, v, s.CommitObject(ctx, 0, 1, []PartitionRange{prng(tt, 0, 100, 120)}))
	p, err := s.PrepareObject(ctx)
	if err != nil || p.ID != 2 {
		t.Fatalf("second prepare %+v %v", p, err)
	}
	v = s.View().Version
	commit := func(size int64, r ...PartitionRange) error { return s.CommitObject(ctx, p.ID, size, r) }
	negBytes := prng(tt, 0, 100, 110)
	negBytes.Bytes = -1
	localRefuse(t, s, v, commit(1, prng(tt, 0, 101, 150)))                                             // gap
	localRefuse(t, s, v, commit(1, prng(tt, 0, 99, 150)))                                              // overlap
	localRefuse(t, s, v, commit(1, prng(tt, 0, 100, 99)))                                              // first > last
	localRefuse(t, s, v, commit(1, prng(tt, 2, 1, 5)))                                                 // empty manifest, log start 0
	localRefuse(t, s, v, commit(1, prng(tt, 2, -1, 5)))                                                // negative
	localRefuse(t, s, v, commit(1, negBytes))                                                          // negative bytes
	localRefuse(t, s, v, commit(-1, prng(tt, 0, 100, 110)))                                            // negative size
	localRefuse(t, s, v, commit(1))                                                                    // no ranges
	localRefuse(t, s, v, commit(1, prng(tt, 0, 100, 110), prng(tt, 0, 111, 120)))                      // a partition twice
	localRefuse(t, s, v, commit(1, prng(tt, 3, 0, 5)), ErrUnknownTopic)                                // no such partition
	localRefuse(t, s, v, commit(1, PartitionRange{Topic: TopicID{9}, LastOffset: 1}), ErrUnknownTopic) // no such topic
	localRefuse(t, s, v, commit(1, prng(tt, 0, 100, 110), prng(u, 0, 0, 5), prng(tt, 1, 11, 20)))      // one bad range refuses all
	if err := commit(1, prng(tt, 0, 100, 110), prng(u, 0, 0, 5), prng(tt, 1, 10, 20)); err != nil {
		t.Fatal(err)
	}
	if got := s.View().Topics["t"].Partitions[0].UploadedThrough(); got != 111 {
		t.Fatalf("t/0 uploaded through %d", got)
	}

	// The first object of a partition may straddle the log start.
	if err := s.SetLogStartOffset(ctx, tt.ID, 2, 50); err != nil {
		t.Fatal(err)
	}
	commitAfterRefusal(t, s, prng(tt, 2, 51, 60), prng(tt, 2, 40, 60))
}

// TestLocalStoreDeleteObjectsFrontOnly: raising a log start drops the manifest's ranges
// wholly below it, so an object whose every range is gone is garbage at once, even when
// an object in front of it is still pinned by another partition's live data; an object
// that still holds live data is refused. Ranges that stay below the log start (committed
// below it) are deleted from the front only.
func TestLocalStoreDeleteObjectsFrontOnly(t *testing.T) {
	ctx := context.Background()
	s, _, tt, _ := localObjects(t)
	a := localCommit(t, s, 10, prng(tt, 0, 0, 9), prng(tt, 1, 0, 4))
	b := localCommit(t, s, 10, prng(tt, 0, 10, 19))
	c := localCommit(t, s, 10, prng(tt, 0, 20, 29), prng(tt, 1, 5, 9))
	p, _ := s.PrepareObject(ctx)

	v := s.View().Version
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{a})) // nothing below the log start
	old := s.View()
	oldT0 := append([]ObjectRange(nil), localManifest(s, "t", 0)...)
	if err := s.SetLogStartOffset(ctx, tt.ID, 0, 25); err != nil {
		t.Fatal(err)
	}
	// t/0 keeps only c (20..29 straddles the log start); a stays referenced by t/1
	// alone, where its data is live.
	if m := localManifest(s, "t", 0); len(m) != 1 || m[0].Object != c || m[0].FirstOffset != 20 {
		t.Fatalf("t/0 manifest %+v after log start 25", m)
	}
	if m := localManifest(s, "t", 1); len(m) != 2 || m[0].Object != a || m[1].Object != c {
		t.Fatalf("t/1 manifest %+v", m)
	}
	if p := old.Topics["t"].Partitions[0]; !reflect.DeepEqual(p.Objects, oldT0) || len(oldT0) != 3 || p.LogStartOffset != 0 {
		t.Fatalf("the log start leaked into an old view: %+v", p)
	}
	if g := old.GarbageObjects(); len(g) != 0 {
		t.Fatalf("old view's garbage %v", ids(g))
	}
	// b is garbage although a, in front of it in t/0, is pinned by t/1.
	if g := ids(s.View().GarbageObjects()); !reflect.DeepEqual(g, []uint64{b}) {
		t.Fatalf("garbage %v, want %d", g, b)
	}
	if e := s.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %v: every range below a log start was dropped", ids(e))
	}
	v = s.View().Version
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{a}))    // a holds live t/1 data
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{b, a})) // one refusal refuses all
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{b, c})) // c is live
	if err := s.DeleteObjects(ctx, []uint64{b}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.View().Object(b); ok {
		t.Fatal("deleted object still in the view")
	}

	if err := s.SetLogStartOffset(ctx, tt.ID, 1, 5); err != nil {
		t.Fatal(err)
	}
	if m := localManifest(s, "t", 1); len(m) != 1 || m[0].Object != c {
		t.Fatalf("t/1 manifest %+v after log start 5", m)
	}
	if g := ids(s.View().GarbageObjects()); !reflect.DeepEqual(g, []uint64{a}) {
		t.Fatalf("garbage %v, want %d", g, a)
	}
	if e := s.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %v", ids(e))
	}
	v = s.View().Version
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{a, c}))        // c is live
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{a, p.ID + 1})) // never handed out
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{0}))
	if err := s.DeleteObjects(ctx, nil); err != nil || s.View().Version != v { // nothing to do, as with the controller's Client
		t.Fatalf("delete nothing: %v", err)
	}

	old = s.View()
	if err := s.DeleteObjects(ctx, []uint64{a, p.ID}); err != nil { // and a prepared one
		t.Fatal(err)
	}
	for _, id := range []uint64{a, p.ID} {
		if _, ok := s.View().Object(id); ok {
			t.Fatalf("deleted object %d still in the view", id)
		}
	}
	if _, ok := old.Object(a); !ok {
		t.Fatal("the delete leaked into an old view")
	}
	for part := range 2 {
		if m := localManifest(s, "t", part); len(m) != 1 || m[0].Object != c {
			t.Fatalf("t/%d manifest %v", part, m)
		}
	}
	// A retry changes nothing and succeeds.
	v = s.View().Version
	if err := s.DeleteObjects(ctx, []uint64{a, b, b, p.ID}); err != nil || s.View().Version != v {
		t.Fatalf("retry: %v, version %d → %d", err, v, s.View().Version)
	}
	// The next upload continues after c.
	commitAfterRefusal(t, s, prng(tt, 0, 0, 40), prng(tt, 0, 30, 40))

	// Ranges committed below a log start raised before stay in the manifest (nothing
	// trims them) and are expired; they go from the front only.
	if err := s.SetLogStartOffset(ctx, tt.ID, 2, 50); err != nil {
		t.Fatal(err)
	}
	x := localCommit(t, s, 1, prng(tt, 2, 40, 44))
	y := localCommit(t, s, 1, prng(tt, 2, 45, 49))
	z := localCommit(t, s, 1, prng(tt, 2, 50, 59))
	if e := ids(s.View().ExpiredObjects()); !reflect.DeepEqual(e, []uint64{x, y}) {
		t.Fatalf("expired %v, want %d %d", e, x, y)
	}
	if g := s.View().GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %v", ids(g))
	}
	v = s.View().Version
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{y}))       // behind x
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{x, y, z})) // z is live
	if err := s.DeleteObjects(ctx, []uint64{y, x}); err != nil {
		t.Fatal(err)
	}
	if m := localManifest(s, "t", 2); len(m) != 1 || m[0].Object != z {
		t.Fatalf("t/2 manifest %v", m)
	}
}

func TestLocalStoreGarbageObjectsAfterDeleteTopic(t *testing.T) {
	ctx := context.Background()
	s, _, tt, u := localObjects(t)
	onlyU := localCommit(t, s, 1, prng(u, 0, 0, 9))
	both := localCommit(t, s, 1, prng(u, 0, 10, 19), prng(tt, 0, 0, 9))
	if g := s.View().GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %+v", g)
	}
	if _, err := s.DeleteTopic(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	g := s.View().GarbageObjects()
	if len(g) != 1 || g[0].ID != onlyU || g[0].State != ObjectCommitted {
		t.Fatalf("garbage after deleting topic u: %+v", g)
	}
	v := s.View().Version
	localRefuse(t, s, v, s.DeleteObjects(ctx, []uint64{both})) // still holds live t/0 data
	if err := s.DeleteObjects(ctx, []uint64{onlyU}); err != nil {
		t.Fatal(err)
	}
	if g := s.View().GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %+v", g)
	}
	// Once the log start passes t/0's range, no manifest references the other one: it is
	// garbage (not expired).
	if err := s.SetLogStartOffset(ctx, tt.ID, 0, 10); err != nil {
		t.Fatal(err)
	}
	if m := localManifest(s, "t", 0); m != nil {
		t.Fatalf("t/0 manifest %+v after log start 10", m)
	}
	if e := s.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %v", ids(e))
	}
	if g := ids(s.View().GarbageObjects()); !reflect.DeepEqual(g, []uint64{both}) {
		t.Fatalf("garbage %v, want %d", g, both)
	}
	if err := s.DeleteObjects(ctx, []uint64{both}); err != nil {
		t.Fatal(err)
	}
	if o := s.View().Objects; o != nil {
		t.Fatalf("objects left: %+v", o)
	}
}

// TestLocalStoreObjectsPersist: objects, manifests (with MaxTimestamp and Bytes) and the
// ID counter survive a reopen; IDs are never reused, not even a deleted highest one.
func TestLocalStoreObjectsPersist(t *testing.T) {
	ctx := context.Background()
	s, path, tt, _ := localObjects(t)
	r := prng(tt, 0, 0, 9)
	r.MaxTimestamp, r.Bytes = 1_700_000_000_000, 777
	a := localCommit(t, s, 1000, r)
	prepared, _ := s.PrepareObject(ctx)
	last, _ := s.PrepareObject(ctx)
	if err := s.DeleteObjects(ctx, []uint64{last.ID}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"next_object_id": 4`, `"max_timestamp": 1700000000000`, `"bytes": 777`, `"key": "objects/00000000000000000002.obj"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("state file lacks %s:\n%s", want, b)
		}
	}

	s2, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	v := s2.View()
	if !reflect.DeepEqual(v.Objects, s.View().Objects) || len(v.Objects) != 2 {
		t.Fatalf("reopened objects %+v", v.Objects)
	}
	if m := v.Topics["t"].Partitions[0].Objects; !reflect.DeepEqual(m, []ObjectRange{{Object: a, FirstOffset: 0, LastOffset: 9, MaxTimestamp: 1_700_000_000_000, Bytes: 777}}) {
		t.Fatalf("reopened manifest %+v", m)
	}
	if o, err := s2.PrepareObject(ctx); err != nil || o.ID != last.ID+1 {
		t.Fatalf("next object after reopen %+v %v, want ID %d", o, err, last.ID+1)
	}
	// The prepared object of the previous process can still be committed by this one.
	if err := s2.CommitObject(ctx, prepared.ID, 1, []PartitionRange{prng(tt, 0, 10, 19)}); err != nil {
		t.Fatal(err)
	}
}

// TestLocalStoreOpensOldFile: a state file written before object manifests loads with no
// objects, and the first object is 1.
func TestLocalStoreOpensOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.json")
	old := `{"cluster_id":"c","version":3,"next_producer_id":5,"topics":{"t":{"name":"t","id":[7,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"partitions":[{"index":0,"leader":3,"leader_epoch":0,"log_start_offset":0}]}}}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if v := s.View(); v.Objects != nil || v.Version != 3 || v.Topics["t"].Partitions[0].Objects != nil {
		t.Fatalf("old file: %+v", v)
	}
	o, err := s.PrepareObject(context.Background())
	if err != nil || o.ID != 1 {
		t.Fatalf("first object %+v %v", o, err)
	}
	if err := s.CommitObject(context.Background(), o.ID, 1, []PartitionRange{{Topic: TopicID{7}, LastOffset: 4}}); err != nil {
		t.Fatal(err)
	}
}

// TestObjectRangeJSON: the new fields are left out while zero, and JSON written before
// them decodes with zeros.
func TestObjectRangeJSON(t *testing.T) {
	b, err := json.Marshal(ObjectRange{Object: 1, FirstOffset: 2, LastOffset: 3})
	if err != nil || string(b) != `{"object":1,"first_offset":2,"last_offset":3}` {
		t.Fatalf("%s %v", b, err)
	}
	full := ObjectRange{Object: 1, FirstOffset: 2, LastOffset: 3, MaxTimestamp: 4, Bytes: 5}
	if b, _ = json.Marshal(full); string(b) != `{"object":1,"first_offset":2,"last_offset":3,"max_timestamp":4,"bytes":5}` {
		t.Fatalf("%s", b)
	}
	var back ObjectRange
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(full) {
		t.Fatalf("%+v %v", back, err)
	}
	var pr PartitionRange
	if err := json.Unmarshal([]byte(`{"topic_id":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"partition":2,"first_offset":3,"last_offset":4}`), &pr); err != nil || pr.MaxTimestamp != 0 || pr.Bytes != 0 {
		t.Fatalf("%+v %v", pr, err)
	}
	pr.MaxTimestamp, pr.Bytes = 9, 10
	if got := pr.ObjectRange(7); !got.Equal(ObjectRange{Object: 7, FirstOffset: 3, LastOffset: 4, MaxTimestamp: 9, Bytes: 10}) {
		t.Fatalf("%+v", got)
	}
}

// TestLocalStoreCommitPastLogStart: offsets below the log start need not be stored.
// DeleteRecords past the manifest's end empties the manifest (its ranges are dropped),
// so the next range may start anywhere up to the log start; a manifest the log start
// does not pass wholly keeps its live ranges and is continued as before; a manifest
// that ends below the log start (its ranges were committed below it) may be continued
// anywhere between its end and the log start.
func TestLocalStoreCommitPastLogStart(t *testing.T) {
	ctx := context.Background()
	s, _, tt, u := localObjects(t)
	commit := func(tp *Topic, partition int32, first, last int64) (uint64, error) {
		o, err := s.PrepareObject(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return o.ID, s.CommitObject(ctx, o.ID, 100, []PartitionRange{prng(tp, partition, first, last)})
	}
	mustCommit := func(tp *Topic, partition int32, first, last int64) uint64 {
		t.Helper()
		id, err := commit(tp, partition, first, last)
		if err != nil {
			t.Fatalf("%s/%d range %d..%d: %v", tp.Name, partition, first, last, err)
		}
		return id
	}

	// Emptied: t/0 and t/1 hold 0..9, the log start moves to 50. Any first offset up to
	// the log start is accepted (45 straddles it, 5 repeats dropped offsets), none past it.
	for _, tc := range []struct {
		part  int32
		first int64
	}{{0, 45}, {1, 5}} {
		part, first := tc.part, tc.first
		dropped := mustCommit(tt, part, 0, 9)
		if err := s.SetLogStartOffset(ctx, tt.ID, part, 50); err != nil {
			t.Fatal(err)
		}
		if m := localManifest(s, "t", int(part)); m != nil {
			t.Fatalf("t/%d manifest %+v after log start 50", part, m)
		}
		if g := ids(s.View().GarbageObjects()); !reflect.DeepEqual(g, []uint64{dropped}) {
			t.Fatalf("garbage %v, want %d", g, dropped)
		}
		if _, err := commit(tt, part, 51, 60); !errors.Is(err, ErrObjectRejected) {
			t.Fatalf("t/%d range from 51 with an empty manifest and log start 50: %v, want a refusal", part, err)
		}
		id := mustCommit(tt, part, first, 60)
		if m := localManifest(s, "t", int(part)); !reflect.DeepEqual(m, []ObjectRange{{Object: id, FirstOffset: first, LastOffset: 60}}) {
			t.Fatalf("t/%d manifest %+v", part, m)
		}
		if err := s.DeleteObjects(ctx, []uint64{dropped}); err != nil {
			t.Fatal(err)
		}
	}

	// Not emptied: t/2 holds 0..9 and 10..99, the log start moves to 50: 10..99 stays and
	// is continued at 100 only.
	first := mustCommit(tt, 2, 0, 9)
	second := mustCommit(tt, 2, 10, 99)
	if err := s.SetLogStartOffset(ctx, tt.ID, 2, 50); err != nil {
		t.Fatal(err)
	}
	if m := localManifest(s, "t", 2); !reflect.DeepEqual(m, []ObjectRange{{Object: second, FirstOffset: 10, LastOffset: 99}}) {
		t.Fatalf("t/2 manifest %+v after log start 50", m)
	}
	if g := ids(s.View().GarbageObjects()); !reflect.DeepEqual(g, []uint64{first}) {
		t.Fatalf("garbage %v, want %d", g, first)
	}
	for _, from := range []int64{45, 50, 99, 120} {
		if _, err := commit(tt, 2, from, 130); !errors.Is(err, ErrObjectRejected) {
			t.Fatalf("t/2 range from %d with manifest end 100 and log start 50: %v, want a refusal", from, err)
		}
	}
	third := mustCommit(tt, 2, 100, 130)
	if m := localManifest(s, "t", 2); len(m) != 2 || m[0].Object != second || m[1].Object != third {
		t.Fatalf("t/2 manifest %+v", m)
	}

	// Ending below the log start: u/0's log start is 50, 40..44 is committed below it
	// (nothing trims it); the next range may start from 45 up to 50.
	if err := s.SetLogStartOffset(ctx, u.ID, 0, 50); err != nil {
		t.Fatal(err)
	}
	below := mustCommit(u, 0, 40, 44)
	for _, from := range []int64{44, 51} {
		if _, err := commit(u, 0, from, 60); !errors.Is(err, ErrObjectRejected) {
			t.Fatalf("u/0 range from %d with manifest end 45 and log start 50: %v, want a refusal", from, err)
		}
	}
	past := mustCommit(u, 0, 48, 60)
	if m := localManifest(s, "u", 0); len(m) != 2 || m[0].Object != below || m[1].Object != past || m[1].FirstOffset != 48 {
		t.Fatalf("u/0 manifest %+v", m)
	}
	if e := ids(s.View().ExpiredObjects()); !reflect.DeepEqual(e, []uint64{below}) {
		t.Fatalf("expired %v, want %d", e, below)
	}
}
