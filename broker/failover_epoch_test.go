package broker

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// frozenStore is a broker's metadata store whose View stops changing once frozen: a
// broker cut off from the controllers that still believes it leads.
type frozenStore struct {
	*metatest.BrokerStore
	frozen atomic.Pointer[metadata.View]
}

func (s *frozenStore) View() *metadata.View {
	if v := s.frozen.Load(); v != nil {
		return v
	}
	return s.BrokerStore.View()
}

func (s *frozenStore) Changed() <-chan struct{} {
	if s.frozen.Load() != nil {
		return make(chan struct{}) // never: no news reaches this broker
	}
	return s.BrokerStore.Changed()
}

// A failover between in-process brokers with real registration epochs: broker 1 is
// fenced but, cut off, keeps believing it leads and keeps producing. The taker seals
// broker 1's epoch before it scans the tail and completes the recovery, so broker 1's
// next append finds the fence and is never acked; every acked record is on the new
// leader. Skipping the seal (scanning an unsealed tail) lets broker 1 ack a record past
// the end the taker recorded: an acked record lost.
func TestFencedBrokerCannotAckAfterTheTakerRecovered(t *testing.T) {
	root := t.TempDir()
	store := metatest.NewStore(1, 2)
	s1 := &frozenStore{BrokerStore: store.For(1)}
	start := func(id int32, meta metadata.Store) *Broker {
		cfg := DefaultConfig()
		cfg.NodeID = id
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.DataDir = filepath.Join(root, fmt.Sprintf("data-%d", id))
		cfg.WALRoot = filepath.Join(root, "wal")
		cfg.WAL.SegmentSize = 4 << 20
		cfg.OffsetsTopicPartitions = 2
		cfg.Logger = discardLogger()
		b, err := New(cfg, meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1 := start(1, s1)
	b2 := start(2, store.For(2))
	if b1.Epoch() != 1 || b2.Epoch() != 1 {
		t.Fatalf("registration epochs %d and %d, want 1 (metatest counts them)", b1.Epoch(), b2.Epoch())
	}
	if _, err := store.CreateTopic(testCtx(t), metadata.TopicSpec{Name: "f", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "broker 1 serves f/0", func() bool {
		_, err := b1.lookup(store.View().Topics["f"], 0, true)
		return err == nil
	})
	cl1 := clientFor(t, b1)
	for i := range 3 {
		if r := rawProduce(t, cl1, "f", makeBatch(-1, 0, 0, []byte(fmt.Sprintf("v%d", i)))); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %v at %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	s1.frozen.Store(store.View())
	if err := store.Fence(1); err != nil {
		t.Fatal(err)
	}
	if p := store.View().Topics["f"].Partitions[0]; p.RecoverEpoch != 1 {
		t.Fatalf("RecoverEpoch %d, want broker 1's registration epoch 1", p.RecoverEpoch)
	}
	testutil.Eventually(t, time.Minute, "broker 2 recovered f/0", func() bool {
		p := store.View().Topics["f"].Partitions[0]
		return p.Leader == 2 && !p.Recovering
	})
	end := store.View().Topics["f"].Partitions[0]
	r := rawProduce(t, cl1, "f", makeBatch(-1, 0, 0, []byte("after the recovery")))
	if r.ErrorCode == 0 {
		t.Fatalf("the fenced broker 1 acked offset %d after broker 2 recovered f/0 (partition now %+v): that record is lost", r.BaseOffset, end)
	}
	info, ok, err := wal.ReadSeal(nil, walhome.EpochDir(walhome.HomeDir(filepath.Join(root, "wal"), 1), 1))
	if err != nil || !ok || info.Records < 3 {
		t.Fatalf("broker 1's epoch 1 seal: %+v %v %v", info, ok, err)
	}
}
