package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
)

// walFSBytes sums broker id's weir_broker_wal_fs_bytes_total{op, wal}.
func walFSBytes(t *testing.T, reg *prometheus.Registry, id int32, op, owner string) float64 {
	t.Helper()
	node := fmt.Sprintf("broker-%d", id)
	return counterSum(t, reg, "weir_broker_wal_fs_bytes_total", func(l map[string]string) bool {
		return l["node"] == node && l["op"] == op && l["wal"] == owner
	})
}

// Every byte a broker moves to or from the shared WAL file system is counted: a zone
// proxy's appends are writes to its own WAL (they were counted nowhere), and the leader
// serving the proxied records reads them from the proxy's WAL (reads of another's WAL,
// also counted as traffic from the proxy's zone). A broker that neither wrote nor read
// them counts none of those bytes.
func TestWALFileSystemBytesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		cfg.Registerer = reg
	})
	cl := newClient(t, c)
	if err := createTopic(t, kadm.NewClient(cl), 1, "fsb"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "fsb")
	leader := tp.Partitions[0].Leader
	proxy := leader%3 + 1
	bystander := proxy%3 + 1
	// The first produce waits for the leader to load the new partition.
	testutil.EventuallyNoError(t, 30*time.Second, "the partition served", func() error {
		r := proxyProduce(t, c, leader, "fsb", 0, kafkatest.Batch(-1, 0, 0, []byte("first")))
		return kerr.ErrorForCode(r.ErrorCode)
	})

	proxyWrites := walFSBytes(t, reg, proxy, "write", "own")
	leaderReads := walFSBytes(t, reg, leader, "read", "other")
	bystanderOther := walFSBytes(t, reg, bystander, "read", "other") + walFSBytes(t, reg, bystander, "write", "own")
	const batches, size = 20, 64 << 10
	var sent float64
	for i := 0; i < batches; i++ {
		v := make([]byte, size)
		rand.Read(v)
		b := kafkatest.Batch(-1, 0, 0, v)
		sent += float64(len(b))
		if r := proxyProduce(t, c, proxy, "fsb", 0, b); r.ErrorCode != 0 {
			t.Fatalf("batch %d through broker %d: %v", i, proxy, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if got := walFSBytes(t, reg, proxy, "write", "own") - proxyWrites; got < sent {
		t.Fatalf("the proxy wrote %v bytes to its WAL for %v bytes of batches", got, sent)
	}
	// A consumer reads every record at the leader: it reads them from the proxy's WAL.
	if got := consumeAll(t, c, "fsb", batches+1); len(got) != batches+1 {
		t.Fatalf("read %d records, want %d", len(got), batches+1)
	}
	testutil.Eventually(t, 30*time.Second, "the leader's reads of the proxy's WAL counted", func() bool {
		return walFSBytes(t, reg, leader, "read", "other")-leaderReads >= sent
	})
	if got := walFSBytes(t, reg, bystander, "read", "other") + walFSBytes(t, reg, bystander, "write", "own") - bystanderOther; got >= sent {
		t.Fatalf("broker %d, neither proxy nor leader, counted %v bytes", bystander, got)
	}
}

// fetchAll fetches partition 0 of topic at broker id as a client of its zone, from offset
// 0 until end, and returns the record batches' bytes.
func fetchAll(t *testing.T, c *Cluster, id int32, topic string, topicID [16]byte, end int64) int {
	t.Helper()
	total := 0
	// A fetch may answer less than everything there is (Kafka's too): fetch on from
	// the offset after the last batch answered until end.
	for offset := int64(0); offset < end; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.ReplicaID = 500, 1, 16<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = offset, 16<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctxFor(t, 30*time.Second), zoneClient(t, c, id))
		if err != nil {
			t.Fatal(err)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch at broker %d from %d: %v", id, offset, kerr.ErrorForCode(rp.ErrorCode))
		}
		if len(rp.RecordBatches) == 0 {
			t.Fatalf("fetch at broker %d from %d answered nothing, want up to %d", id, offset, end)
		}
		total += len(rp.RecordBatches)
		// The next offset: after the last whole batch (base offset, then at 23 its last
		// offset delta).
		for b := rp.RecordBatches; len(b) >= 61; {
			n := int(binary.BigEndian.Uint32(b[8:])) + 12
			if n > len(b) {
				break
			}
			offset = int64(binary.BigEndian.Uint64(b)) + int64(binary.BigEndian.Uint32(b[23:])) + 1
			b = b[n:]
		}
	}
	return total
}

// A read replica reads each batch from the leader's WAL once, however many consumers of
// its zone fetch it: the bytes it read are kept for the next ones (issue 27: three
// consumers per zone made the replicas read about 6× the produced bytes).
func TestReadReplicaReadsWALOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		cfg.Registerer = reg
	})
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, "once"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "once")
	leader := tp.Partitions[0].Leader
	replica := leader%3 + 1
	const batches, size = 20, 64 << 10
	var sent int
	for i := 0; i < batches; i++ {
		v := make([]byte, size)
		rand.Read(v)
		b := kafkatest.Batch(-1, 0, 0, v)
		var r kmsg.ProduceResponseTopicPartition
		testutil.EventuallyNoError(t, 30*time.Second, "a produce at the leader", func() error {
			r = proxyProduce(t, c, leader, "once", 0, b)
			if err := kerr.ErrorForCode(r.ErrorCode); kerr.IsRetriable(err) {
				return err
			}
			return nil
		})
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		sent += len(b)
	}
	// The replica has followed the whole index (its end offset is the leader's).
	radm := kadm.NewClient(zoneClient(t, c, replica))
	testutil.Eventually(t, 30*time.Second, "the replica's end offset", func() bool {
		lo, err := radm.ListEndOffsets(ctxFor(t, 10*time.Second), "once")
		o, _ := lo.Lookup("once", 0)
		return err == nil && o.Err == nil && o.Offset == batches
	})
	before := walFSBytes(t, reg, replica, "read", "other")
	for consumer := 0; consumer < 3; consumer++ {
		if n := fetchAll(t, c, replica, "once", tp.ID, batches); n < sent {
			t.Fatalf("consumer %d read %d bytes at the replica, %d were produced", consumer, n, sent)
		}
	}
	read := walFSBytes(t, reg, replica, "read", "other") - before
	t.Logf("3 consumers read %d bytes each at the replica; it read %.0f bytes of the leader's WAL (%.2f× the produced)", sent, read, read/float64(sent))
	if read < float64(sent) || read > 1.5*float64(sent) {
		t.Fatalf("the replica read %.0f bytes of the leader's WAL for 3 consumers of %d bytes: want about one read of each batch", read, sent)
	}
}

// A zone proxy's read replica of the partition (the proxy itself: one broker a zone)
// serves the batches it wrote as a proxy from memory, not by reading them back from its
// own WAL on the shared file system.
func TestProxiedBatchesServedFromMemoryInTheirZone(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		cfg.Registerer = reg
	})
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, "mem"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "mem")
	leader := tp.Partitions[0].Leader
	proxy := leader%3 + 1
	testutil.EventuallyNoError(t, 30*time.Second, "the partition served", func() error {
		return kerr.ErrorForCode(proxyProduce(t, c, leader, "mem", 0, kafkatest.Batch(-1, 0, 0, []byte("first"))).ErrorCode)
	})
	before := walFSBytes(t, reg, proxy, "read", "own")
	const batches, size = 20, 64 << 10
	sent := 0
	for i := 0; i < batches; i++ {
		v := make([]byte, size)
		rand.Read(v)
		b := kafkatest.Batch(-1, 0, 0, v)
		if r := proxyProduce(t, c, proxy, "mem", 0, b); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		sent += len(b)
	}
	radm := kadm.NewClient(zoneClient(t, c, proxy))
	testutil.Eventually(t, 30*time.Second, "the replica's end offset", func() bool {
		lo, err := radm.ListEndOffsets(ctxFor(t, 10*time.Second), "mem")
		o, _ := lo.Lookup("mem", 0)
		return err == nil && o.Err == nil && o.Offset == batches+1
	})
	for consumer := 0; consumer < 2; consumer++ {
		if n := fetchAll(t, c, proxy, "mem", tp.ID, batches+1); n < sent {
			t.Fatalf("consumer %d read %d bytes at the proxy's replica, %d were produced through it", consumer, n, sent)
		}
	}
	read := walFSBytes(t, reg, proxy, "read", "own") - before
	t.Logf("the proxy's replica served %d proxied bytes twice, reading %.0f bytes of its own WAL", sent, read)
	if read > 0.1*float64(sent) {
		t.Fatalf("the proxy read %.0f bytes of its own WAL back to serve %d bytes it wrote", read, sent)
	}
}
