package tier

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
)

// objectsOneBatchEach produces one batch per timestamp and uploads each as an object of
// its own (offset i in object i), then one more batch that stays pending (only in the
// WAL). It returns the keys of the objects, in offset order.
func objectsOneBatchEach(t *testing.T, r *upRig, ts []int64, pendingTS int64) []string {
	t.Helper()
	for _, at := range ts {
		r.produceAt(t, at)
		if _, err := r.tr.uploadOnce(); err != nil {
			t.Fatal(err)
		}
	}
	r.produceAt(t, pendingTS)
	v := r.meta.View()
	var keys []string
	for _, or := range r.manifest().Objects {
		if or.FirstOffset != or.LastOffset {
			t.Fatalf("object range %+v holds more than one batch", or)
		}
		o, _ := v.Object(or.Object)
		keys = append(keys, o.Key)
	}
	if len(keys) != len(ts) {
		t.Fatalf("%d objects for %d uploads", len(keys), len(ts))
	}
	return keys
}

// retain runs a retention round and applies the view to the partition, as the broker's
// metadata watch does.
func (r *upRig) retain() {
	r.tr.RetentionRound()
	v := r.meta.View()
	r.p.Apply(v.Topics["t"].Partitions[0], v, true)
}

// checkKeys fails unless exactly the objects of want are in the store and the manifest.
func (r *upRig) checkKeys(t *testing.T, step string, want ...string) {
	t.Helper()
	got := r.keys(t)
	v := r.meta.View()
	if len(got) != len(want) || len(v.Objects) != len(want) {
		t.Fatalf("%s: keys %v and %d object records, want %v", step, got, len(v.Objects), want)
	}
	for _, k := range want {
		if !got[k] {
			t.Fatalf("%s: key %s deleted, want kept (keys %v)", step, k, got)
		}
	}
}

// retention.ms raises the log start past the objects whose newest batch is older than
// the limit (by the tier's clock), never past data only in the WAL however old, and
// garbage collection then deletes exactly those objects.
func TestRetentionByTimeDeletesExpiredObjects(t *testing.T) {
	r := newRig(t, rigOpts{configs: map[string]string{"retention.ms": "1000"}})
	t0 := rigEpoch.UnixMilli()
	keys := objectsOneBatchEach(t, r, []int64{t0, t0 + 1000, t0 + 2000}, t0)
	r.clock.Add(2500 * time.Millisecond) // the limit is t0+1500: the first two expired
	r.retain()
	if ls := r.manifest().LogStartOffset; ls != 2 {
		t.Fatalf("log start %d, want 2 (past the objects older than retention.ms)", ls)
	}
	r.checkKeys(t, "after the first round", keys[2])
	if testutil.ToFloat64(r.tr.metrics.retained) != 1 {
		t.Fatalf("%v retention actions, want 1", testutil.ToFloat64(r.tr.metrics.retained))
	}
	r.clock.Add(time.Hour) // everything expired, the pending batch (offset 3) too
	r.retain()
	if ls := r.manifest().LogStartOffset; ls != 3 {
		t.Fatalf("log start %d, want 3: data only in the WAL is never dropped by retention", ls)
	}
	r.checkKeys(t, "after the second round")
	r.retain() // nothing more to do
	if testutil.ToFloat64(r.tr.metrics.retained) != 2 {
		t.Fatalf("%v retention actions, want 2", testutil.ToFloat64(r.tr.metrics.retained))
	}
}

// retention.bytes removes front objects while the partition, pending bytes included,
// stays at or above the limit without them (Kafka's rule for segments).
func TestRetentionByBytesKeepsTheLimit(t *testing.T) {
	r := newRig(t, rigOpts{configs: map[string]string{"retention.ms": "-1"}})
	t0 := rigEpoch.UnixMilli()
	keys := objectsOneBatchEach(t, r, []int64{t0, t0, t0, t0}, t0)
	objs := r.manifest().Objects
	pending, _ := r.p.Pending()
	// The limit is exactly the last two objects and the pending batch: the first two go,
	// the second leaving exactly the limit.
	limit := objs[2].Bytes + objs[3].Bytes + pending
	if err := r.meta.AlterTopicConfigs(context.Background(), "t", []metadata.ConfigOp{{Key: "retention.bytes", Op: metadata.OpSet, Value: fmt.Sprint(limit)}}, false); err != nil {
		t.Fatal(err)
	}
	r.retain()
	if ls := r.manifest().LogStartOffset; ls != 2 {
		t.Fatalf("log start %d, want 2 (limit %d, objects %+v, %d pending)", ls, limit, objs, pending)
	}
	r.checkKeys(t, "after retention", keys[2], keys[3])
}

// Retention acts only where the metadata lets it: not on a topic whose cleanup.policy
// does not delete, not on __consumer_offsets, and it counts and deletes nothing when
// the metadata refuses the new log start.
func TestRetentionOnlyWhereMetadataAllows(t *testing.T) {
	t0 := rigEpoch.UnixMilli()
	t.Run("compacted topic", func(t *testing.T) {
		r := newRig(t, rigOpts{configs: map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}})
		keys := objectsOneBatchEach(t, r, []int64{t0, t0}, t0)
		r.clock.Add(time.Hour)
		r.retain()
		if ls := r.manifest().LogStartOffset; ls != 0 {
			t.Fatalf("log start %d on a compacted topic", ls)
		}
		r.checkKeys(t, "compacted", keys...)
	})
	t.Run("log start refused", func(t *testing.T) {
		r := newRig(t, rigOpts{configs: map[string]string{"retention.ms": "1"}})
		keys := objectsOneBatchEach(t, r, []int64{t0, t0}, t0)
		r.tr.d.Meta = refusingLogStart{r.meta}
		r.clock.Add(time.Hour)
		r.retain()
		if ls := r.manifest().LogStartOffset; ls != 0 || testutil.ToFloat64(r.tr.metrics.retained) != 0 {
			t.Fatalf("log start %d, %v actions counted, with the metadata refusing", ls, testutil.ToFloat64(r.tr.metrics.retained))
		}
		r.checkKeys(t, "refused", keys...)
	})
	for _, c := range []struct {
		name, policy string
		want         bool
	}{
		{"t", "delete", true},
		{"t", "compact,delete", true},
		{"t", "compact", false},
		{metadata.OffsetsTopic, "delete", false},
	} {
		tp := &metadata.Topic{Name: c.name, Configs: map[string]string{"cleanup.policy": c.policy}}
		if got := deletesByRetention(tp); got != c.want {
			t.Errorf("%s with cleanup.policy %s: deletes by retention %v, want %v", c.name, c.policy, got, c.want)
		}
	}
	if n := topicInt(&metadata.Topic{Configs: map[string]string{"retention.ms": "soon"}}, "retention.ms"); n != -1 {
		t.Errorf("an unparsable retention.ms reads as %d, want -1 (no limit)", n)
	}
}

// refusingLogStart is metadata that refuses to raise log starts.
type refusingLogStart struct{ metadata.Store }

func (refusingLogStart) SetLogStartOffset(context.Context, metadata.TopicID, int32, int64) error {
	return errors.New("controller unreachable (test)")
}

// Garbage is collected by the lowest-numbered broker that accepts partitions; a
// draining broker hands the duty on.
func TestGarbageCollectionDutyIsTheLowestActiveBroker(t *testing.T) {
	view := func(bs ...metadata.Broker) *metadata.View { return metadata.NewView(1, "c", 1, bs, nil) }
	for _, c := range []struct {
		name string
		v    *metadata.View
		want bool
	}{
		{"alone", view(metadata.Broker{ID: 3}), true},
		{"lowest", view(metadata.Broker{ID: 3}, metadata.Broker{ID: 5}), true},
		{"a lower one is active", view(metadata.Broker{ID: 1}, metadata.Broker{ID: 3}), false},
		{"a lower one is fenced", view(metadata.Broker{ID: 1, State: metadata.BrokerFenced}, metadata.Broker{ID: 3}), true},
		{"a lower one drains", view(metadata.Broker{ID: 1, State: metadata.BrokerDraining}, metadata.Broker{ID: 3}), true},
		{"this one drains", view(metadata.Broker{ID: 3, State: metadata.BrokerDraining}, metadata.Broker{ID: 5}), false},
	} {
		tr := &Tier{d: Deps{NodeID: 3}}
		if got := tr.gcDuty(c.v); got != c.want {
			t.Errorf("%s: duty %v, want %v", c.name, got, c.want)
		}
	}
}

// A broker without the duty deletes no expired object; with it, a key that cannot be
// deleted keeps every record of the round (the deletion is retried whole later).
func TestExpiredObjectsDeletedOnlyWithTheDutyAndTheirKeys(t *testing.T) {
	var fd *failDeletes
	r := newRig(t, rigOpts{
		configs: map[string]string{"retention.ms": "1"},
		wrap: func(s objectstore.Store) objectstore.Store {
			fd = &failDeletes{Store: s}
			return fd
		},
	})
	t0 := rigEpoch.UnixMilli()
	keys := objectsOneBatchEach(t, r, []int64{t0, t0, t0}, t0+int64(time.Hour/time.Millisecond))
	r.clock.Add(time.Minute)
	r.tr.d.NodeID = 2 // broker 1, active, has the duty
	r.retain()
	if ls := r.manifest().LogStartOffset; ls != 3 {
		t.Fatalf("log start %d, want 3", ls)
	}
	r.checkKeys(t, "without the duty", keys...)
	r.tr.d.NodeID = 1
	fd.key = keys[1]
	r.tr.collectGarbage()
	got := r.keys(t)
	if len(r.meta.View().Objects) != 3 || got[keys[0]] || !got[keys[1]] || !got[keys[2]] {
		t.Fatalf("a failed key delete: keys %v, %d records; want every record kept, the first key deleted and deletion stopped at the second", got, len(r.meta.View().Objects))
	}
	fd.key = ""
	r.tr.collectGarbage()
	r.checkKeys(t, "retried")
	if n := testutil.ToFloat64(r.tr.metrics.deleted.WithLabelValues("garbage")); n != 3 {
		t.Fatalf("%v garbage objects counted, want 3", n)
	}
}

// failDeletes fails deletes of key with an error the retrying layer does not retry.
type failDeletes struct {
	objectstore.Store
	key string
}

func (f *failDeletes) Delete(ctx context.Context, key string) error {
	if key == f.key {
		return errors.New("403 AccessDenied (test)")
	}
	return f.Store.Delete(ctx, key)
}
