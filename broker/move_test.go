package broker

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
)

// startClusterBroker runs broker id on a shared WAL root with a shared in-memory metadata store.
func startClusterBroker(t *testing.T, root string, id int32, store *metatest.Store) *Broker {
	t.Helper()
	return startClusterBrokerWith(t, root, id, store, nil)
}

// startClusterBrokerWith is startClusterBroker with mod applied to the configuration.
func startClusterBrokerWith(t *testing.T, root string, id int32, store *metatest.Store, mod func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(root, fmt.Sprintf("data-%d", id))
	cfg.WALRoot = filepath.Join(root, "wal")
	cfg.WAL.SegmentSize = 4 << 20
	cfg.OffsetsTopicPartitions = 2
	cfg.Group.InitialRebalanceDelay = 50 * time.Millisecond
	cfg.Logger = discardLogger()
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg, store.For(id)) // For: a real registration epoch
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// A graceful move hands a partition to another broker, which serves the old offsets from
// the old leader's WAL and appends new ones to its own; idempotent producer state moves
// too. A restart of both brokers rebuilds the same log from both WALs.
func TestGracefulMoveAcrossWALs(t *testing.T) {
	root := t.TempDir()
	store := metatest.NewStore(1, 2)
	b1 := startClusterBroker(t, root, 1, store)
	b2 := startClusterBroker(t, root, 2, store)
	if _, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "mv", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	leader := func() int32 { return store.View().Topics["mv"].Partitions[0].Leader }
	if leader() != 1 {
		t.Fatalf("partition placed on %d", leader())
	}
	testutil.Eventually(t, time.Minute, "broker 1 serves the new partition", func() bool {
		_, err := b1.lookup(store.View().Topics["mv"], 0, true)
		return err == nil // the broker learns of the topic through its metadata watch
	})
	cl1 := clientFor(t, b1)
	for i := 0; i < 5; i++ {
		check := rawProduce(t, cl1, "mv", makeBatch(9, 0, int32(i), []byte(fmt.Sprintf("v%d", i))))
		if check.ErrorCode != 0 || check.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %v at %d", i, kerr.ErrorForCode(check.ErrorCode), check.BaseOffset)
		}
	}
	if err := store.BeginMove("mv", 0, 2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "move completes", func() bool { return leader() == 2 })
	// The old leader refuses appends; the new one continues the offsets and recognises
	// the producer's sequence.
	if r := rawProduce(t, cl1, "mv", makeBatch(9, 0, 5, []byte("x"))); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("old leader answered %v", kerr.ErrorForCode(r.ErrorCode))
	}
	cl2 := clientFor(t, b2)
	var r2 = rawProduce(t, cl2, "mv", makeBatch(9, 0, 4, []byte("v4")))
	testutil.Eventually(t, time.Minute, "new leader ready", func() bool {
		r2 = rawProduce(t, cl2, "mv", makeBatch(9, 0, 4, []byte("v4")))
		return r2.ErrorCode != kerr.NotLeaderForPartition.Code
	})
	if r2.ErrorCode != 0 || r2.BaseOffset != 4 {
		t.Fatalf("retry of seq 4 on the new leader: %v at %d (want the original offset 4)", kerr.ErrorForCode(r2.ErrorCode), r2.BaseOffset)
	}
	if r := rawProduce(t, cl2, "mv", makeBatch(9, 0, 5, []byte("v5"))); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("append on new leader: %v at %d", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	readAll := func(b *Broker, n int) {
		t.Helper()
		cons := clientFor(t, b, kgo.ConsumeTopics("mv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := consumeN(t, cons, n)
		for i, r := range got[0] {
			if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("v%d", i) {
				t.Fatalf("record %d: offset %d value %s", i, r.Offset, r.Value)
			}
		}
	}
	readAll(b2, 6)

	// Restart both: the new leader rebuilds offsets 0-4 from broker 1's WAL and 5 from its own.
	b1.Close()
	b2.Close()
	startClusterBroker(t, root, 1, store)
	b2 = startClusterBroker(t, root, 2, store)
	readAll(b2, 6)
}
