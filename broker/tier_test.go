package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/localfs"
)

// tierBroker runs a broker whose WAL is small and uploads quickly, on store.
func tierBroker(t *testing.T, dir string, store objectstore.Store, mod func(*Config)) *testBroker {
	t.Helper()
	return startBroker(t, dir, func(c *Config) {
		c.Objects = store
		c.WAL.SegmentSize = 256 << 10
		c.Tier.TargetObjectBytes = 128 << 10
		c.Tier.MaxObjectBytes = 512 << 10
		c.Tier.MaxUploadDelay = 100 * time.Millisecond
		c.Tier.CheckInterval = 20 * time.Millisecond
		c.Tier.RetentionInterval = 50 * time.Millisecond
		c.TailCacheBytes = 64 << 10
		if mod != nil {
			mod(c)
		}
	})
}

func faultyLocal(t *testing.T) *faulty.Store {
	t.Helper()
	st, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return faulty.New(st, 1)
}

func objectKeys(t *testing.T, s objectstore.Store) []string {
	t.Helper()
	infos, err := s.List(context.Background(), "objects/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

// produceN produces n records of size bytes to each partition and returns the values by
// partition and offset.
func produceN(t *testing.T, cl *kgo.Client, topic string, partitions, n, size int) map[int32]map[int64]string {
	t.Helper()
	got := map[int32]map[int64]string{}
	// Incompressible values, so the WAL holds what was asked for whatever the client does.
	raw := make([]byte, size/2)
	for i := 0; i < n; i += 50 {
		var recs []*kgo.Record
		for p := int32(0); p < int32(partitions); p++ {
			for j := i; j < min(n, i+50); j++ {
				rand.Read(raw)
				// A key of its own: a compacted topic refuses null keys, and keeps every
				// record whose key is unique.
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%d-%d", p, j)), Value: []byte(fmt.Sprintf("%d-%d-%x", p, j, raw))})
			}
		}
		res := cl.ProduceSync(testCtx(t), recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range res {
			if got[r.Record.Partition] == nil {
				got[r.Record.Partition] = map[int64]string{}
			}
			got[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
		}
	}
	return got
}

// consumeAll reads every partition from its start and checks want exactly.
func consumeAll(t *testing.T, addr, topic string, want map[int32]map[int64]string) {
	t.Helper()
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	total := 0
	for p, m := range want {
		offs[topic][p] = kgo.NewOffset().AtStart()
		total += len(m)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(offs), kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := 0
	ctx := testCtx(t)
	for seen < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", seen, total)
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch error (retried): %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, ok := want[r.Partition][r.Offset]
			if !ok {
				t.Fatalf("unexpected record %d/%d", r.Partition, r.Offset)
			}
			if v != string(r.Value) {
				t.Fatalf("record %d/%d differs", r.Partition, r.Offset)
			}
			seen++
		})
	}
}

// objectsDeleted sums weir_tier_objects_deleted_total over the given reasons.
func (tb *testBroker) objectsDeleted(t *testing.T, whys ...string) float64 {
	n := 0.0
	for _, why := range whys {
		v, _ := metricValue(t, tb.reg, "weir_tier_objects_deleted_total", map[string]string{"why": why})
		n += v
	}
	return n
}

// allUploaded reports whether every partition led has everything in object storage.
func (tb *testBroker) allUploaded() bool {
	for _, p := range tb.parts.All() {
		up := p.Uploaded()
		logStart, hw := p.Offsets()
		if !(up >= hw || hw == logStart && up < 0) {
			return false
		}
	}
	return true
}

func TestTierUploadTrimRestartReadBack(t *testing.T) {
	dir := t.TempDir()
	store := faultyLocal(t)
	b := tierBroker(t, dir, store, nil)
	adm := b.admin(t)
	createTopic(t, adm, "tiered", 3, nil)
	cl := b.client(t)
	want := produceN(t, cl, "tiered", 3, 600, 1000)

	// Committed offsets live in __consumer_offsets, which moves to objects too.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "tiered", Partition: 1, At: 123})
	if _, err := adm.CommitOffsets(testCtx(t), "g-tier", offs); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "everything uploaded and the WAL trimmed", func() bool {
		return b.allUploaded() && b.wal.Start() > 0
	})
	if n := len(objectKeys(t, store)); n < 3 {
		t.Fatalf("%d objects for 1.8 MB at 128 KiB objects", n)
	}
	consumeAll(t, b.addr(), "tiered", want)
	b.Close()

	// A restarted broker finds most of its data in objects only.
	gets := store.Calls(faulty.Get)
	b2 := tierBroker(t, dir, store, nil)
	consumeAll(t, b2.addr(), "tiered", want)
	if store.Calls(faulty.Get) == gets {
		t.Fatal("the restarted broker served everything without reading objects")
	}
	fetched, err := b2.admin(t).FetchOffsets(testCtx(t), "g-tier")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("tiered", 1); !ok || o.At != 123 {
		t.Fatalf("committed offset after restart = %+v, %v; want 123", o, ok)
	}
	// Offsets by time reach into objects: the earliest timestamp maps to offset 0.
	lo, err := b2.admin(t).ListOffsetsAfterMilli(testCtx(t), 0, "tiered")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("tiered", 0); o.Offset != 0 {
		t.Fatalf("offset for time 0 = %d, want 0", o.Offset)
	}
}

func TestTierRetentionDeletesObjects(t *testing.T) {
	store := faultyLocal(t)
	b := tierBroker(t, t.TempDir(), store, nil)
	adm := b.admin(t)
	limit := "300000"
	createTopic(t, adm, "by-bytes", 1, map[string]*string{"retention.bytes": &limit})
	createTopic(t, adm, "kept", 1, nil)
	compact, tiny := "compact", "1000"
	createTopic(t, adm, "compacted", 1, map[string]*string{"cleanup.policy": &compact, "retention.bytes": &tiny})
	cl := b.client(t)
	produceN(t, cl, "compacted", 1, 300, 1000)
	produceN(t, cl, "by-bytes", 1, 1500, 1000)
	kept := produceN(t, cl, "kept", 1, 200, 1000)
	testutil.Eventually(t, time.Minute, "retention.bytes raises the log start", func() bool {
		so, err := adm.ListStartOffsets(testCtx(t), "by-bytes")
		o, _ := so.Lookup("by-bytes", 0)
		return err == nil && o.Offset > 0
	})
	// What remains is at least retention.bytes (whole objects are removed) and reads.
	testutil.EventuallyNoError(t, time.Minute, "expired objects deleted", func() error {
		v := b.meta.View()
		deleted := b.objectsDeleted(t, "expired", "garbage")
		if len(v.ExpiredObjects()) == 0 && len(v.GarbageObjects()) == 0 && deleted > 0 {
			return nil
		}
		p := v.Topics["by-bytes"].Partitions[0]
		return fmt.Errorf("%v deleted; log start %d, manifest %+v, expired %+v", deleted, p.LogStartOffset, p.Objects, v.ExpiredObjects())
	})
	so, _ := adm.ListStartOffsets(testCtx(t), "by-bytes")
	start, _ := so.Lookup("by-bytes", 0)
	eo, _ := adm.ListEndOffsets(testCtx(t), "by-bytes")
	end, _ := eo.Lookup("by-bytes", 0)
	if kept := (end.Offset - start.Offset) * 1000; kept < 300000 {
		t.Fatalf("retention kept %d bytes of records, below retention.bytes", kept)
	}
	consumeAll(t, b.addr(), "kept", kept)
	// Retention ran, but not on a compacted topic (Kafka applies it with "delete" only).
	if so, _ := adm.ListStartOffsets(testCtx(t), "compacted"); so["compacted"][0].Offset != 0 {
		t.Fatalf("retention moved the log start of a compacted topic to %d", so["compacted"][0].Offset)
	}

	// retention.ms: records stamped an hour ago go once uploaded.
	hour := "60000"
	createTopic(t, adm, "by-time", 1, map[string]*string{"retention.ms": &hour})
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 300; i++ {
		r := &kgo.Record{Topic: "by-time", Value: make([]byte, 1000), Timestamp: old}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, time.Minute, "retention.ms removes old data", func() bool {
		so, err := adm.ListStartOffsets(testCtx(t), "by-time")
		o, _ := so.Lookup("by-time", 0)
		return err == nil && o.Offset > 0
	})

	// DeleteRecords moves the log start; objects wholly below it go.
	createTopic(t, adm, "dr", 1, nil)
	dr := produceN(t, cl, "dr", 1, 100, 1000)
	testutil.Eventually(t, time.Minute, "first dr object", b.allUploaded)
	for off, v := range produceN(t, cl, "dr", 1, 100, 1000)[0] {
		dr[0][off] = v
	}
	testutil.Eventually(t, time.Minute, "second dr object", b.allUploaded)
	drObjs := func() []metadata.ObjectRange { return b.meta.View().Topics["dr"].Partitions[0].Objects }
	before := drObjs()
	if len(before) < 2 || before[0].LastOffset >= 150 {
		t.Fatalf("dr objects %+v: want one wholly below 150", before)
	}
	recs := kadm.Offsets{}
	recs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 150})
	if _, err := adm.DeleteRecords(testCtx(t), recs); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, time.Minute, "objects below DeleteRecords' offset deleted", func() error {
		now := drObjs()
		v := b.meta.View()
		if len(now) > 0 && now[0].LastOffset >= 150 && len(v.GarbageObjects()) == 0 && len(v.ExpiredObjects()) == 0 {
			return nil
		}
		var shared []string
		for _, tp := range v.Topics {
			for i, p := range tp.Partitions {
				for _, o := range p.Objects {
					if len(now) > 0 && o.Object == now[0].Object {
						shared = append(shared, fmt.Sprintf("%s/%d %d..%d start %d", tp.Name, i, o.FirstOffset, o.LastOffset, p.LogStartOffset))
					}
				}
			}
		}
		return fmt.Errorf("dr manifest %+v, its first object holds %v", now, shared)
	})
	for off := range dr[0] {
		if off < 150 {
			delete(dr[0], off)
		}
	}
	consumeAll(t, b.addr(), "dr", dr)

	// Topic deletion removes objects too.
	keys := len(objectKeys(t, store))
	if _, err := adm.DeleteTopics(testCtx(t), "by-bytes", "by-time"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "objects of deleted topics removed", func() bool {
		return len(objectKeys(t, store)) < keys && len(b.meta.View().GarbageObjects()) == 0
	})
	consumeAll(t, b.addr(), "kept", kept)
}

func TestTierS3OutageFillsWALThenRecovers(t *testing.T) {
	store := faultyLocal(t)
	store.Inject(faulty.Rule{Ops: faulty.Put, Fault: faulty.Unavailable})
	b := tierBroker(t, t.TempDir(), store, func(c *Config) {
		c.WAL.SegmentSize = 128 << 10
		c.Tier.WALMaxBytes = 1 << 20
		if testing.Verbose() {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	})
	forever := "-1" // the raw batches below carry timestamp 0
	createTopic(t, b.admin(t), "full", 1, map[string]*string{"retention.ms": &forever})
	cl := b.client(t)
	want := map[int32]map[int64]string{0: {}}
	var code int16
	throttled := 0
	for i := 0; i < 400 && code == 0; i++ {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "full"
		rp := kmsg.NewProduceRequestTopicPartition()
		v := fmt.Sprintf("%d-%s", i, strings.Repeat("y", 30000))
		rp.Records = makeBatch(-1, -1, -1, []byte(v))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		out := resp.Topics[0].Partitions[0]
		if resp.ThrottleMillis > 0 {
			throttled++
		}
		if code = out.ErrorCode; code == 0 {
			want[0][out.BaseOffset] = v
		}
	}
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce into a full WAL: error %d, want KAFKA_STORAGE_ERROR", code)
	}
	if throttled == 0 {
		t.Fatal("produce was refused without being slowed first (no throttle_time_ms)")
	}
	if store.Calls(faulty.Put) == 0 {
		t.Fatal("no upload was attempted")
	}
	store.Clear() // S3 is back: uploads drain the WAL and produce works again
	testutil.Eventually(t, time.Minute, "uploads catch up", func() bool { return b.allUploaded() && b.WALBytes() < 1<<20*3/4 })
	more := produceN(t, cl, "full", 1, 10, 100)
	for off, v := range more[0] {
		want[0][off] = v
	}
	consumeAll(t, b.addr(), "full", want)
}

// An object prepared and put but never committed (the broker died between PUT and
// commit, or the commit was refused) is deleted by garbage collection, key and record.
func TestTierGarbageCollectsUncommittedObjects(t *testing.T) {
	store := faultyLocal(t)
	b := tierBroker(t, t.TempDir(), store, nil)
	ctx := testCtx(t)
	o, err := b.meta.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, o.Key, strings.NewReader("orphan"), 6); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the orphan deleted and counted", func() bool {
		_, inView := b.meta.View().Object(o.ID)
		_, err := store.Head(ctx, o.Key)
		n := b.objectsDeleted(t, "garbage", "orphan")
		return !inView && errors.Is(err, objectstore.ErrNotFound) && n >= 1
	})

	// A late PUT of the deleted object (a fenced uploader) leaves a key without a record;
	// once later objects exist the sweep removes it.
	createTopic(t, b.admin(t), "after", 1, nil)
	after := produceN(t, b.client(t), "after", 1, 20, 100)
	testutil.Eventually(t, time.Minute, "a later object", b.allUploaded)
	if err := store.Put(ctx, o.Key, strings.NewReader("late"), 4); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the stray key swept", func() bool {
		_, err := store.Head(ctx, o.Key)
		return errors.Is(err, objectstore.ErrNotFound)
	})
	if len(objectKeys(t, store)) == 0 {
		t.Fatal("the sweep deleted live objects too")
	}
	consumeAll(t, b.addr(), "after", after)
}
