package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// A graceful move of a transactional id's __transaction_state partition: the target
// loads the transactions once it serves the partition, and the producer's next
// transaction commits there, with the balancer off. In `weir dev` the target used to
// load them only at the next view (10 s later, at the balancer's next move): a loader
// woken when the view was applied found the partition still loading, and nothing woke it
// when the load ended (coordinatorsServe does now). Here other views often come soon
// after a move, so this test does not always catch that; it checks the move itself.
func TestTransactionCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	const parts = 3
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.Transactions = true
			b.Txn.Partitions = parts
		}
	})
	const id, topic = "mover", "txmv"
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, topic); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	commit := func(ctx context.Context, v string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err := commit(ctxFor(t, 60*time.Second), "before"); err != nil {
		t.Fatalf("the first transaction: %v", err)
	}

	idx := txn.PartitionFor(id, parts)
	var ts *metadata.Topic
	testutil.Eventually(t, 30*time.Second, txn.TopicName+" in the controllers' view", func() bool {
		if v := leaderView(c); v != nil {
			ts = v.Topics[txn.TopicName]
		}
		return ts != nil
	})
	from := ts.Partitions[idx].Leader
	to := from%3 + 1
	start := time.Now()
	movePartition(t, c, from, ts, idx, to)
	t.Logf("%s/%d moved %d → %d in %v", txn.TopicName, idx, from, to, time.Since(start).Round(time.Millisecond))

	// Generous for a loaded machine: the client retries COORDINATOR_LOAD_IN_PROGRESS
	// and NOT_COORDINATOR until the target serves the id.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start = time.Now()
	if err := commit(ctx, "after"); err != nil {
		t.Fatalf("a transaction after the coordinator moved: %v", err)
	}
	t.Logf("the next transaction committed %v after the move", time.Since(start).Round(time.Millisecond))
	got := consumeIsolated(t, c, topic, kgo.ReadCommitted(), 2)
	if len(got) != 2 || got[0] != "after" || got[1] != "before" {
		t.Fatalf("read_committed read %q, want [after before]", got)
	}
}
