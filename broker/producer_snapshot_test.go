package broker

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/objectstore"
)

// Invariant 4 across the object tier: once a partition's batches are in objects and the
// WAL segments holding them are trimmed, the idempotent producer state comes from the
// snapshot committed with the object range. A restarted broker must answer a retry of
// any of a producer's last five batches with its original offset instead of appending
// it again, and keep checking sequences and epochs. The same holds for a partition
// whose every record retention deleted (its manifest emptied, the snapshot kept).
func TestIdempotentRetryAfterUploadTrimRestart(t *testing.T) {
	dir := t.TempDir()
	store := faultyLocal(t)
	b := tierBroker(t, dir, store, nil)
	adm := b.admin(t)
	forever := "-1"
	createTopic(t, adm, "idem-tier", 1, map[string]*string{"retention.ms": &forever})
	createTopic(t, adm, "idem-gone", 1, nil) // kafkatest batches are from 2023: retention takes them at once
	createTopic(t, adm, "filler", 1, nil)
	cl := b.client(t)
	check := produceCheck(t)
	// Producer 7: seven batches of two records (seq 2i, 2i+1 at offsets 2i, 2i+1), so its
	// window holds batches 2..6. Producer 8, after an epoch bump: two batches.
	for i := 0; i < 7; i++ {
		v := []byte(fmt.Sprintf("p7-%d", i))
		check(fmt.Sprintf("p7 batch %d", i), rawProduce(t, cl, "idem-tier", makeBatch(7, 0, int32(2*i), v, v)), 0, int64(2*i))
	}
	check("p8 epoch 0", rawProduce(t, cl, "idem-tier", makeBatch(8, 0, 0, []byte("p8-old"))), 0, 14)
	check("p8 epoch 1 first", rawProduce(t, cl, "idem-tier", makeBatch(8, 1, 0, []byte("p8-a"))), 0, 15)
	check("p8 epoch 1 second", rawProduce(t, cl, "idem-tier", makeBatch(8, 1, 1, []byte("p8-b"))), 0, 16)
	for i := 0; i < 3; i++ {
		check(fmt.Sprintf("p9 batch %d", i), rawProduce(t, cl, "idem-gone", makeBatch(9, 0, int32(i), []byte("p9"))), 0, int64(i))
	}

	// The idempotent batches were written first, into the WAL's first segment; enough
	// filler rolls the segments so that trimming removes it once everything is uploaded.
	produceN(t, cl, "filler", 1, 700, 1000)
	testutil.Eventually(t, time.Minute, "everything uploaded, the WAL's first segment trimmed, idem-gone deleted by retention", func() bool {
		logStart, _ := partitionOffsets(t, b, "idem-gone")
		return b.allUploaded() && b.wal.Start() > 0 && logStart == 3 && b.meta.View().Topics["idem-gone"].Partitions[0].Objects == nil
	})
	if s := b.meta.View().Topics["idem-tier"].Partitions[0].Producers; s == nil || s.Offset != 17 || len(s.Producers) != 2 {
		t.Fatalf("producer snapshot in the manifest: %+v", s)
	}
	b.Close()

	b2 := tierBroker(t, dir, store, nil)
	cl2 := b2.client(t)
	check("retry of p7's last batch", rawProduce(t, cl2, "idem-tier", makeBatch(7, 0, 12, []byte("p7-6"), []byte("p7-6"))), 0, 12)
	check("retry of p7's oldest batch in the window", rawProduce(t, cl2, "idem-tier", makeBatch(7, 0, 4, []byte("p7-2"), []byte("p7-2"))), 0, 4)
	check("retry of p8's last batch", rawProduce(t, cl2, "idem-tier", makeBatch(8, 1, 1, []byte("p8-b"))), 0, 16)
	check("p8's old epoch", rawProduce(t, cl2, "idem-tier", makeBatch(8, 0, 1, []byte("p8-x"))), kerr.InvalidProducerEpoch.Code, 0)
	check("p7 gap", rawProduce(t, cl2, "idem-tier", makeBatch(7, 0, 20, []byte("p7-gap"))), kerr.OutOfOrderSequenceNumber.Code, 0)
	check("p7 continues", rawProduce(t, cl2, "idem-tier", makeBatch(7, 0, 14, []byte("p7-7"))), 0, 17)
	if _, hw := partitionOffsets(t, b2, "idem-tier"); hw != 18 {
		t.Fatalf("idem-tier high watermark %d after the retries, want 18 (a retry was appended again)", hw)
	}
	check("retry of p9's last batch, deleted by retention", rawProduce(t, cl2, "idem-gone", makeBatch(9, 0, 2, []byte("p9"))), 0, 2)
	check("p9 continues", rawProduce(t, cl2, "idem-gone", makeBatch(9, 0, 3, []byte("p9"))), 0, 3)
}

// partitionOffsets returns the log start and high watermark of partition 0 of topic.
func partitionOffsets(t *testing.T, b *testBroker, topic string) (logStart, hw int64) {
	t.Helper()
	tp := b.meta.View().Topics[topic]
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	p := b.parts.Get(tp.ID, 0)
	if p == nil {
		t.Fatalf("%s/0 is not led here", topic)
	}
	return p.Offsets()
}

// produceCheck returns a check of a produce answer: the error code, and the offset when
// it is no error.
func produceCheck(t *testing.T) func(name string, got kmsg.ProduceResponseTopicPartition, code int16, offset int64) {
	return func(name string, got kmsg.ProduceResponseTopicPartition, code int16, offset int64) {
		t.Helper()
		if got.ErrorCode != code || (code == 0 && got.BaseOffset != offset) {
			t.Fatalf("%s: code %v offset %d, want %v offset %d", name, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, kerr.ErrorForCode(code), offset)
		}
	}
}

// startTierClusterBroker runs broker id on a shared WAL root, metadata store and object
// store, with a small WAL that uploads quickly (as tierBroker).
func startTierClusterBroker(t *testing.T, root string, id int32, store *metatest.Store, objects objectstore.Store) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(root, fmt.Sprintf("data-%d", id))
	cfg.WALRoot = filepath.Join(root, "wal")
	cfg.OffsetsTopicPartitions = 2
	cfg.Group.InitialRebalanceDelay = 50 * time.Millisecond
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Logger = discardLogger()
	cfg.Objects = objects
	cfg.WAL.SegmentSize = 256 << 10
	cfg.Tier.TargetObjectBytes = 128 << 10
	cfg.Tier.MaxObjectBytes = 512 << 10
	cfg.Tier.MaxUploadDelay = 100 * time.Millisecond
	cfg.Tier.CheckInterval = 20 * time.Millisecond
	cfg.Tier.RetentionInterval = 50 * time.Millisecond
	cfg.TailCacheBytes = 64 << 10
	b, err := New(cfg, store.For(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// brokerAllUploaded reports whether every partition b leads has everything in objects.
func brokerAllUploaded(b *Broker) bool {
	for _, p := range b.parts.All() {
		up := p.Uploaded()
		logStart, hw := p.Offsets()
		if !(up >= hw || hw == logStart && up < 0) {
			return false
		}
	}
	return true
}

// tierPairWithProducer runs brokers 1 and 2 on a shared WAL root, metadata store and
// object store; broker 1 leads "idem" (producer 7: seven batches of two records at
// offsets 0..13, its window batches 2..6) and has uploaded everything and trimmed the
// WAL segment that held those batches, so no WAL has them any more.
func tierPairWithProducer(t *testing.T) (store *metatest.Store, b1, b2 *Broker) {
	t.Helper()
	root := t.TempDir()
	store = metatest.NewStore(1, 2)
	objects := faultyLocal(t)
	b1 = startTierClusterBroker(t, root, 1, store, objects)
	b2 = startTierClusterBroker(t, root, 2, store, objects)
	for _, name := range []string{"idem", "filler"} { // both placed on broker 1
		spec := metadata.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "-1"}}
		if _, err := store.CreateTopic(testCtx(t), spec, false); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, time.Minute, "broker 1 serves the new partitions", func() bool {
		v := store.View()
		_, err1 := b1.lookup(v.Topics["idem"], 0, true)
		_, err2 := b1.lookup(v.Topics["filler"], 0, true)
		return err1 == nil && err2 == nil
	})
	check := produceCheck(t)
	cl1 := clientFor(t, b1)
	for i := 0; i < 7; i++ {
		v := []byte(fmt.Sprintf("p7-%d", i))
		check(fmt.Sprintf("batch %d", i), rawProduce(t, cl1, "idem", makeBatch(7, 0, int32(2*i), v, v)), 0, int64(2*i))
	}
	produceN(t, clientFor(t, b1, kgo.RecordPartitioner(kgo.ManualPartitioner())), "filler", 1, 700, 1000)
	testutil.Eventually(t, time.Minute, "broker 1 uploaded everything and trimmed its WAL's first segment", func() bool {
		return brokerAllUploaded(b1) && b1.wal.Start() > 0
	})
	if s := store.View().Topics["idem"].Partitions[0].Producers; s == nil || s.Offset != 14 || len(s.Producers) != 1 {
		t.Fatalf("producer snapshot in the manifest: %+v", s)
	}
	return store, b1, b2
}

// retriesOnNewLeader checks, on b2 once it leads "idem", that producer 7's retries are
// answered with their original offsets and its sequence is still checked.
func retriesOnNewLeader(t *testing.T, store *metatest.Store, b2 *Broker) {
	t.Helper()
	check := produceCheck(t)
	testutil.Eventually(t, time.Minute, "broker 2 leads", func() bool { return store.View().Topics["idem"].Partitions[0].Leader == 2 })
	cl2 := clientFor(t, b2)
	var r kmsg.ProduceResponseTopicPartition
	testutil.Eventually(t, time.Minute, "the new leader answers", func() bool {
		r = rawProduce(t, cl2, "idem", makeBatch(7, 0, 12, []byte("p7-6"), []byte("p7-6")))
		return r.ErrorCode != kerr.NotLeaderForPartition.Code
	})
	check("retry of the last batch on the new leader", r, 0, 12)
	check("retry of the oldest batch in the window", rawProduce(t, cl2, "idem", makeBatch(7, 0, 4, []byte("p7-2"), []byte("p7-2"))), 0, 4)
	check("a gap", rawProduce(t, cl2, "idem", makeBatch(7, 0, 20, []byte("gap"))), kerr.OutOfOrderSequenceNumber.Code, 0)
	check("the next batch", rawProduce(t, cl2, "idem", makeBatch(7, 0, 14, []byte("p7-7"))), 0, 14)
}

// Invariant 4 across a graceful move: the new leader finds none of the producer's
// batches in the old leader's WAL, so its state comes from the manifest's snapshot.
func TestIdempotentRetryAfterUploadTrimMove(t *testing.T) {
	store, _, b2 := tierPairWithProducer(t)
	if err := store.BeginMove("idem", 0, 2); err != nil {
		t.Fatal(err)
	}
	retriesOnNewLeader(t, store, b2)
}

// Invariant 4 across a failover: broker 1 stops, is fenced, and broker 2 recovers its
// partitions from the sealed WAL, which holds none of the producer's batches.
func TestIdempotentRetryAfterUploadTrimFailover(t *testing.T) {
	store, b1, b2 := tierPairWithProducer(t)
	b1.Close()
	if err := store.Fence(1); err != nil {
		t.Fatal(err)
	}
	retriesOnNewLeader(t, store, b2)
}
