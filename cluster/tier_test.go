package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/s3"
	"github.com/weir-io/weir/objectstore/s3/s3test"
)

// tierCluster runs a 3-broker cluster on a real MinIO behind a fault-injecting proxy,
// with small WAL segments and objects so data moves to object storage quickly.
func tierCluster(t *testing.T) (*Cluster, *faulty.Proxy, *s3.Store, map[int32]*faulty.Store) {
	t.Helper()
	m := s3test.Start(t)
	bucket := m.NewBucket(t)
	proxy, err := faulty.NewProxy(m.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := m.Config(bucket)
	cfg.Endpoint = proxy.URL
	cfg.RequestTimeout = 2 * time.Second // a hung request fails over to a retry quickly
	store, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := s3.New(context.Background(), m.Config(bucket))
	if err != nil {
		t.Fatal(err)
	}
	// Each broker's store is wrapped on its own, so a test can cut one broker off.
	var mu sync.Mutex
	perBroker := map[int32]*faulty.Store{}
	c := startCluster(t, func(c *Config) {
		c.Objects = store
		base := c.BrokerConfig
		c.BrokerConfig = func(b *broker.Config) {
			base(b)
			mu.Lock()
			if perBroker[b.NodeID] == nil {
				perBroker[b.NodeID] = faulty.New(store, uint64(b.NodeID))
			}
			b.Objects = perBroker[b.NodeID]
			mu.Unlock()
			b.WAL.SegmentSize = 256 << 10
			b.TailCacheBytes = 64 << 10
			b.Tier.TargetObjectBytes = 128 << 10
			b.Tier.MaxObjectBytes = 1 << 20
			b.Tier.MaxUploadDelay = 200 * time.Millisecond
			b.Tier.CheckInterval = 20 * time.Millisecond
		}
	})
	return c, proxy, direct, perBroker
}

// produceBig produces n records of about size bytes to each partition, concurrently, and
// returns value → acked offset (values are unique and incompressible).
func produceBig(t *testing.T, cl *kgo.Client, topic string, partitions, n, size int) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	raw := make([]byte, size/2)
	for i := 0; i < n; i++ {
		for p := 0; p < partitions; p++ {
			rand.Read(raw)
			v := fmt.Sprintf("p%d-%05d-%x", p, i, raw)
			wg.Add(1)
			cl.Produce(ctxFor(t, 120*time.Second), &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				mu.Lock()
				acked[v] = r.Offset
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return acked
}

// The S3 tier in a 3-zone cluster on MinIO, through S3 faults: 503 SlowDown, 500s,
// hung requests, connection resets (before and in the middle of bodies). Every acked
// record is uploaded, every broker's WAL is trimmed, a partition moved between brokers
// keeps its data, and after all brokers restart a consumer reading from offset 0 gets
// every record at its acked offset, mostly from objects.
func TestTierOnMinIOWithFaults(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c, proxy, direct, stores := tierCluster(t)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 6, "tier"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []faulty.HTTPRule{
		{Method: "PUT", Fault: faulty.SlowDown, Times: 4},
		{Method: "PUT", Fault: faulty.InternalError, Times: 3},
		{Method: "PUT", Fault: faulty.Reset, Times: 3},
		{Method: "PUT", Fault: faulty.Hang, Times: 2},
	} {
		proxy.Inject(r)
	}
	acked := produceBig(t, cl, "tier", 6, 300, 1000)

	// Move a partition while some of its data is in the old leader's WAL only, and keep
	// the new leader from uploading: the old leader uploads and trims everything else,
	// but must keep the segments the new leader still reads from (its pin). A restart of
	// the new leader then reloads them from the old leader's WAL.
	view := c.Broker(0).Client.View()
	tp := view.Topics["tier"]
	from := tp.Partitions[0].Leader
	to := from%3 + 1
	cut := faulty.Rule{Ops: faulty.Put, Fault: faulty.Unavailable}
	stores[from].Inject(cut)
	stores[to].Inject(cut)
	for v, off := range produceBig(t, cl, "tier", 6, 100, 1000) {
		acked[v] = off
	}
	if err := c.Broker(0).Client.MovePartition(ctxFor(t, 30*time.Second), tp.ID, 0, to); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the move completes", func() bool {
		p := c.Broker(0).Client.View().Topics["tier"].Partitions[0]
		return p.Leader == to && !p.Moving
	})
	stores[from].Clear()
	for v, off := range produceBig(t, cl, "tier", 6, 100, 1000) {
		acked[v] = off
	}
	fromUploaded := func() bool {
		v := c.Broker(0).Client.View()
		ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "tier")
		if err != nil {
			return false
		}
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			p := v.Topics["tier"].Partitions[o.Partition]
			ok = ok && o.Err == nil && (p.Leader != from || p.UploadedThrough() >= o.Offset)
		})
		return ok
	}
	testutil.Eventually(t, 60*time.Second, "the old leader uploads its own partitions", fromUploaded)
	// The old leader restarts: it finds the moved partition's batches in its WAL at
	// replay and must pin them again, then uploads and trims more of its own.
	if err := c.StopBroker(int(from - 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.StartBroker(int(from - 1)); err != nil {
		t.Fatal(err)
	}
	for v, off := range produceBig(t, cl, "tier", 6, 100, 1000) {
		acked[v] = off
	}
	testutil.Eventually(t, 60*time.Second, "the restarted old leader uploads its own partitions", fromUploaded)
	if err := c.StopBroker(int(to - 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.StartBroker(int(to - 1)); err != nil {
		t.Fatal(err)
	}
	stores[to].Clear()

	testutil.Eventually(t, 90*time.Second, "every partition uploaded", func() bool {
		ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "tier")
		if err != nil {
			return false
		}
		parts := c.Broker(0).Client.View().Topics["tier"].Partitions
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			ok = ok && o.Err == nil && parts[o.Partition].UploadedThrough() >= o.Offset
		})
		return ok
	})
	testutil.Eventually(t, 60*time.Second, "every WAL trimmed", func() bool {
		for i := 0; i < 3; i++ {
			if c.Broker(i).Broker.WALBytes() > 512<<10 {
				return false
			}
		}
		return true
	})
	for _, f := range []faulty.HTTPFault{faulty.SlowDown, faulty.InternalError, faulty.Reset, faulty.Hang} {
		if proxy.Faults(f) == 0 {
			t.Errorf("no %v fault was injected", f)
		}
	}
	objs, err := direct.List(ctxFor(t, 10*time.Second), "objects/")
	if err != nil || len(objs) < 5 {
		t.Fatalf("bucket holds %d objects (%v)", len(objs), err)
	}

	// Every broker restarts: caches are empty and the WALs hold little.
	for i := 0; i < 3; i++ {
		if err := c.StopBroker(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if err := c.StartBroker(i); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Inject(faulty.HTTPRule{Method: "GET", Fault: faulty.ResetMidBody, After: 1000, Times: 3})
	proxy.Inject(faulty.HTTPRule{Method: "GET", Fault: faulty.SlowDown, Times: 3})
	got := consumeAll(t, c, "tier", len(acked))
	for v, off := range acked {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("record acked at %d read back as %v", off, r)
		}
	}
	if proxy.Faults(faulty.ResetMidBody) == 0 {
		t.Error("the consumer read nothing from objects (no GET was faulted)")
	}
}
