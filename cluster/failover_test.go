package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// Killing the Raft leader while clients produce and create topics: a new leader takes
// over, produce never stops acking for long, every topic whose creation was acked still
// exists, and a restart of all three controllers keeps the metadata.
func TestControllerLeaderFailoverAndFullRestart(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c)
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 6, "load"); err != nil {
		t.Fatal(err)
	}
	// Produce load through the whole test.
	ctx, stop := context.WithCancel(context.Background())
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: "load", Value: []byte(fmt.Sprint(i))}).FirstErr()
			if err == nil {
				acked.Add(1)
			} else if ctx.Err() == nil {
				if failed.Add(1) <= 3 {
					t.Logf("produce %d failed: %v", i, err)
				}
			}
		}
	}()
	var created []string
	create := func(n int) {
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("meta-%d", len(created))
			resp, err := adm.CreateTopic(ctxFor(t, 60*time.Second), 2, 1, nil, name)
			if err != nil || resp.Err != nil {
				t.Fatalf("create %s: %v %v", name, err, resp.Err)
			}
			created = append(created, name)
		}
	}
	create(5)
	leader, err := c.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := acked.Load()
	if err := c.StopController(leader); err != nil {
		t.Fatal(err)
	}
	create(5) // through the new leader, after at most a retry inside the client
	if nl, err := c.WaitLeader(10 * time.Second); err != nil || nl == leader {
		t.Fatalf("new leader %d, err %v", nl, err)
	}
	testutil.Eventually(t, 30*time.Second, "produce keeps acking", func() bool { return acked.Load() > before+50 })
	if err := c.StartController(leader); err != nil {
		t.Fatal(err)
	}
	stop()
	wg.Wait()
	t.Logf("acked %d, failed %d during the leader change", acked.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d produce requests failed while the controller leader changed", failed.Load())
	}

	var snapshot = c.Broker(0).Client.View()
	testutil.Eventually(t, 30*time.Second, "broker 1's view has every created topic", func() bool {
		snapshot = c.Broker(0).Client.View()
		return snapshot.Topics[created[len(created)-1]] != nil
	})
	for i := range c.controllers {
		c.StopController(i)
	}
	for i := range c.controllers {
		if err := c.StartController(i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitLeader(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "controllers serve the restored metadata", func() bool {
		v := c.Controller(0).View()
		return v.Topics["load"] != nil && v.Topics[created[len(created)-1]] != nil
	})
	after := c.Controller(0).View()
	for _, name := range append(created, "load") {
		a, b := snapshot.Topics[name], after.Topics[name]
		if b == nil || a.ID != b.ID || len(a.Partitions) != len(b.Partitions) {
			t.Fatalf("topic %s after restarting every controller: %+v, before %+v", name, b, a)
		}
	}
	// And the cluster still works. A create whose answer the client did not wait for (the
	// controllers were just restarted) may be retried by the client and answered
	// TOPIC_ALREADY_EXISTS, as with Kafka: the topic must exist either way.
	if _, err := adm.CreateTopic(ctxFor(t, 60*time.Second), 1, 1, nil, "after-restart"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the topic created after the restart exists", func() bool {
		n := c.Broker(0) // nil while it restarts (the controllers came back after its lease)
		return n != nil && n.Client.View().Topics["after-restart"] != nil
	})
}

// A graceful move through the controller: the partition changes broker with a new
// leader epoch and its log chain extended; producers keep going and every acked record
// reads back in order; the group coordinator's offsets move with __consumer_offsets.
func TestMovePartitionKeepsData(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 3, "mv"); err != nil {
		t.Fatal(err)
	}
	first := produceValues(t, cl, "mv", 3, 200, "before")
	var t0 *metadata.Topic
	testutil.Eventually(t, 30*time.Second, "mv in broker 1's view", func() bool {
		t0 = c.Broker(0).Client.View().Topics["mv"]
		return t0 != nil
	})
	from := t0.Partitions[0].Leader
	to := from%3 + 1
	start := time.Now()
	if err := c.Broker(0).Client.MovePartition(ctxFor(t, 30*time.Second), t0.ID, 0, to); err != nil {
		t.Fatal(err)
	}
	var moved metadata.Partition
	testutil.Eventually(t, 30*time.Second, "the move completes", func() bool {
		moved = c.Broker(0).Client.View().Topics["mv"].Partitions[0]
		return moved.Leader == to && !moved.Moving
	})
	t.Logf("move of a partition with 200 records took %v", time.Since(start))
	if moved.LeaderEpoch != t0.Partitions[0].LeaderEpoch+1 || len(moved.Logs) != 2 || moved.Logs[1].StartOffset != 200 {
		t.Fatalf("after the move: %+v", moved)
	}
	second := produceValues(t, cl, "mv", 3, 100, "after")
	for v, off := range second {
		first[v] = off
	}
	got := consumeAll(t, c, "mv", len(first))
	for v, off := range first {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s acked at %d, read %v", v, off, r)
		}
	}
	if second["after-p0-00000"] != 200 {
		t.Fatalf("first record after the move at offset %d, want 200", second["after-p0-00000"])
	}
}

// A broker that stops heartbeating (no gossip here: the lease alone) is fenced: Metadata
// stops naming it and its partitions move to the live brokers, which read its WAL. When
// it comes back it registers with a new epoch and a WAL of its own, leads none of them,
// and every record it had acked is still served.
func TestFencedBrokerComesBack(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.NoGossip = true })
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 3, "f"); err != nil {
		t.Fatal(err)
	}
	acked := produceValues(t, cl, "f", 3, 50, "x")
	epoch := c.Broker(2).Client.Epoch()
	c.KillBroker(2)
	testutil.Eventually(t, 30*time.Second, "broker 3 fenced", func() bool {
		b, _ := c.Broker(0).Client.View().Broker(3)
		return !b.Active()
	})
	var md kadm.Metadata
	testutil.Eventually(t, 30*time.Second, "Metadata stops listing the fenced broker", func() bool {
		var err error
		if md, err = adm.Metadata(ctxFor(t, 30*time.Second), "f"); err != nil {
			return false
		}
		for _, b := range md.Brokers {
			if b.NodeID == 3 {
				return false // another broker's view may lag by a watch round trip
			}
		}
		return true
	})
	testutil.Eventually(t, 30*time.Second, "broker 3's partitions served elsewhere", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "f", 3)
	})
	if md, err := adm.Metadata(ctxFor(t, 30*time.Second), "f"); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range md.Topics["f"].Partitions {
			if p.Leader == 3 || (p.Leader == -1) != (p.Err == kerr.LeaderNotAvailable) {
				t.Fatalf("partition %d: leader %d err %v", p.Partition, p.Leader, p.Err)
			}
		}
	}
	if err := c.StartBroker(2); err != nil {
		t.Fatal(err)
	}
	if e := c.Broker(2).Client.Epoch(); e <= epoch {
		t.Fatalf("epoch after restart %d, before %d", e, epoch)
	}
	testutil.Eventually(t, 30*time.Second, "broker 3 active again", func() bool {
		b, _ := c.Broker(0).Client.View().Broker(3)
		return b.Active()
	})
	if got := ledBy(c.LeaderController().View(), "f", 3); len(got) != 0 {
		t.Fatalf("the returning broker took partitions %v back", got)
	}
	got := consumeAll(t, c, "f", len(acked))
	for v, off := range acked {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s acked at %d, read %v", v, off, r)
		}
	}
}

// Consumer groups in a cluster: the coordinator is the leader of the group's offsets
// partition; commits survive a restart of that broker.
func TestGroupCommitsSurviveCoordinatorRestart(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := startCluster(t, nil)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 3, "g"); err != nil {
		t.Fatal(err)
	}
	produceValues(t, cl, "g", 3, 20, "r")
	cons := newClient(t, c, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	n := 0
	ctx := ctxFor(t, 60*time.Second)
	for n < 60 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d", n)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	coord := adm.FindGroupCoordinators(ctxFor(t, 30*time.Second), "grp")
	if coord["grp"].Err != nil {
		t.Fatal(coord["grp"].Err)
	}
	id := coord["grp"].NodeID
	var err error
	if err := c.StopBroker(int(id - 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.StartBroker(int(id - 1)); err != nil {
		t.Fatal(err)
	}
	var offs kadm.OffsetResponses
	testutil.Eventually(t, 60*time.Second, "offsets readable after the coordinator restarted", func() bool {
		offs, err = adm.FetchOffsets(ctxFor(t, 10*time.Second), "grp")
		return err == nil
	})
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 60 {
		t.Fatalf("committed offsets sum to %d after the coordinator restarted, want 60", sum)
	}
}
