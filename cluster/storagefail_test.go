package cluster

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// A failed fdatasync fails a WAL for good (the kernel may have dropped the data; on NFS
// every write error, ENOSPC included, surfaces there). The broker must not stay
// registered answering KAFKA_STORAGE_ERROR until someone restarts it: it starts again
// under a new registration, which seals the failed directory and loads what it durably
// holds, and its partitions are served again once the storage works. Nothing acked is
// lost, and offsets stay dense. Without the restart, the produce after the fault never
// succeeds on broker 1's partitions.
func TestBrokerRestartsAfterItsWALFailed(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS())
	c := startCluster(t, func(cfg *Config) {
		cfg.NoGossip = true
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			if inner != nil {
				inner(b)
			}
			if b.NodeID == 1 {
				b.WAL.FS = fs
			}
		}
	})
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 3, "sf"); err != nil {
		t.Fatal(err)
	}
	acked := produceValues(t, cl, "sf", 3, 20, "before")
	var led []int32
	testutil.Eventually(t, 30*time.Second, "broker 1 leads a partition", func() bool {
		led = ledBy(c.Broker(0).Client.View(), "sf", 1)
		return len(led) > 0
	})
	epoch := c.Broker(0).Client.Epoch()

	// One sync of broker 1's WAL fails: its WAL fails for good. The produce that was
	// waiting for it gets an error (not an ack), and broker 1 restarts.
	var failed atomic.Int32
	fs.SetHook(func(o waltest.Op, name string, _ int64, _ int) error {
		if o == waltest.OpSync && filepath.Ext(name) == ".wal" && failed.CompareAndSwap(0, 1) {
			return syscall.EIO
		}
		return nil
	})
	short := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
		kgo.RecordDeliveryTimeout(5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := short.ProduceSync(ctx, &kgo.Record{Topic: "sf", Partition: led[0], Value: []byte("during")}).FirstErr()
	cancel()
	if failed.Load() == 0 {
		t.Fatal("no sync of broker 1's WAL failed: is the fault file system wired in?")
	}
	t.Logf("the produce during the failed sync: %v", err)

	testutil.Eventually(t, 60*time.Second, "broker 1 registered again", func() bool {
		n := c.Broker(0)
		return n != nil && n.Client.Epoch() > epoch
	})
	for v, off := range produceValues(t, cl, "sf", 3, 20, "after") {
		acked[v] = off
	}

	// Everything acked reads back at its offset (unacked records may be in the log too).
	rd := newClient(t, c, kgo.ConsumeTopics("sf"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	rctx := ctxFor(t, 90*time.Second)
	seen := map[string]int64{}
	next := map[int32]int64{}
	for n := 0; n < len(acked); {
		fetches := rd.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %d of %d acked records", n, len(acked))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, expected %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if _, ok := acked[string(r.Value)]; ok {
				if _, dup := seen[string(r.Value)]; !dup {
					n++
				}
			}
			seen[string(r.Value)] = r.Offset
		})
	}
	for v, off := range acked {
		if got, ok := seen[v]; !ok || got != off {
			t.Fatalf("%s acked at %d, read at %d (%v)", v, off, got, ok)
		}
	}
}
