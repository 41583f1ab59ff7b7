package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
)

// txnCluster is a 3-broker cluster with transactions on (3 __transaction_state
// partitions, so coordinators and partition leaders are on different brokers and
// markers cross the peer connections).
func txnCluster(t *testing.T) *Cluster {
	return startCluster(t, func(cfg *Config) {
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.Transactions = true
			b.Txn.Partitions = 3
			b.Txn.AbortCheckInterval = 200 * time.Millisecond // timed-out transactions aborted soon
		}
	})
}

// consumeIsolated reads topic from the start with the isolation level until it has want
// records or the wait passes quietly, and returns the values in order per partition;
// opts add to the consumer's options (a zone tag).
func consumeIsolated(t *testing.T, c *Cluster, topic string, iso kgo.IsolationLevel, want int, opts ...kgo.Opt) []string {
	t.Helper()
	cl := newClient(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	quiet := time.Time{}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			n++
		})
		if len(got) >= want {
			if quiet.IsZero() {
				quiet = time.Now().Add(time.Second) // a little more, to catch extra records
			}
			if time.Now().After(quiet) {
				break
			}
		}
	}
	slices.Sort(got)
	return got
}

// txnTransactionsFranzGo: franz-go's transactional producer against a cluster: a
// committed transaction is seen by read_committed consumers, an aborted one only by
// read_uncommitted ones, across three partitions led by three brokers with the
// coordinator on one of them; a second producer with the same transactional id fences
// the first, whose next transaction fails.
func txnTransactionsFranzGo(t *testing.T, c *Cluster) {
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 3, "txout"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	producer := func() *kgo.Client {
		return newClient(t, c, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txout"), kgo.TransactionTimeout(30*time.Second))
	}
	p := producer()
	txn := func(cl *kgo.Client, prefix string, n int, commit bool) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		var errs []error
		for i := 0; i < n; i++ {
			r := &kgo.Record{Value: []byte(fmt.Sprintf("%s-%02d", prefix, i)), Partition: int32(i % 3)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs = append(errs, err)
			}
		}
		end := kgo.TryCommit
		if !commit || len(errs) > 0 {
			end = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if err := txn(p, "c1", 9, true); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	if err := txn(p, "ab", 6, false); err != nil {
		t.Fatalf("aborted transaction: %v", err)
	}
	if err := txn(p, "c2", 3, true); err != nil {
		t.Fatalf("third transaction: %v", err)
	}
	var committed, all []string
	for i := 0; i < 9; i++ {
		committed = append(committed, fmt.Sprintf("c1-%02d", i))
	}
	for i := 0; i < 3; i++ {
		committed = append(committed, fmt.Sprintf("c2-%02d", i))
	}
	all = append(all, committed...)
	for i := 0; i < 6; i++ {
		all = append(all, fmt.Sprintf("ab-%02d", i))
	}
	slices.Sort(committed)
	slices.Sort(all)
	if got := consumeIsolated(t, c, "txout", kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed: %q, want %q", got, committed)
	}
	if got := consumeIsolated(t, c, "txout", kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted: %q, want %q", got, all)
	}

	// Zombie fencing: a new producer of tx-1 fences p.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-0"), Partition: 0}).FirstErr(); err != nil {
		t.Fatalf("produce before the fence: %v", err)
	}
	// DescribeProducers shows the open transaction's first offset where zombie-0 went.
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"txout": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	open := false
	dp.EachProducer(func(d kadm.DescribedProducer) { open = open || d.CurrentTxnStartOffset >= 0 })
	if !open {
		t.Fatalf("DescribeProducers of txout with a transaction open: %+v", dp)
	}
	p2 := producer()
	if err := txn(p2, "new", 3, true); err != nil {
		t.Fatalf("the new producer's transaction: %v", err)
	}
	err = p.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-1"), Partition: 1}).FirstErr()
	if err == nil {
		err = p.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !strings.Contains(fmt.Sprint(err), "fenced") {
		t.Fatalf("the zombie's produce or commit: %v, want fenced", err)
	}
	got := consumeIsolated(t, c, "txout", kgo.ReadCommitted(), len(committed)+3)
	for _, v := range got {
		if strings.HasPrefix(v, "zombie") || strings.HasPrefix(v, "ab-") {
			t.Fatalf("read_committed saw %q: %q", v, got)
		}
	}
	if len(got) != len(committed)+3 {
		t.Fatalf("read_committed after the fence: %q", got)
	}
}

// txnTransactionsConsumeTransformProduce: franz-go's GroupTransactSession reads "txin"
// in a group and writes each record, transformed, to "txout2" in a transaction that also
// commits the group's offsets (AddOffsetsToTxn, TxnOffsetCommit, markers on
// __consumer_offsets). After it, read_committed readers see every input exactly once in
// the output, and the group's committed offsets are the inputs' ends; a session that
// aborts leaves neither output nor offsets behind.
func txnTransactionsConsumeTransformProduce(t *testing.T, c *Cluster) {
	adm := kadm.NewClient(newClient(t, c))
	for _, topic := range []string{"txin", "txout2"} {
		if err := createTopic(t, adm, 3, topic); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxFor(t, 2*time.Minute)
	in := newClient(t, c, kgo.DefaultProduceTopic("txin"))
	const n = 30
	for i := 0; i < n; i++ {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("in-%02d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(60*time.Second),
		kgo.TransactionalID("ctp-1"), kgo.DefaultProduceTopic("txout2"), kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup("ctp"), kgo.ConsumeTopics("txin"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := 0
	for done < n {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := s.PollFetches(pctx)
		cancel()
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Value: []byte("out-" + strings.TrimPrefix(string(r.Value), "in-"))}, nil)
			done++
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("End: committed %v, %v", committed, err)
		}
	}
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("out-%02d", i))
	}
	if got := consumeIsolated(t, c, "txout2", kgo.ReadCommitted(), n); !slices.Equal(got, want) {
		t.Fatalf("output: %q, want each of %d inputs once", got, n)
	}
	offs, err := adm.FetchOffsets(ctx, "ctp")
	if err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, adm, "txin")
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset == 0 {
			return // nothing consumed there, nothing committed (as Kafka)
		}
		if o, ok := offs.Lookup("txin", e.Partition); !ok || o.At != e.Offset {
			t.Errorf("txin/%d: the group committed %+v (present %v), the partition ends at %d", e.Partition, o, ok, e.Offset)
		}
	})
}

// txnTransactionsSarama: sarama's transactional producer (a second client
// implementation): a committed transaction is read by read_committed consumers, an
// aborted one is not.
func txnTransactionsSarama(t *testing.T, c *Cluster) {
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 2, "stx"); err != nil {
		t.Fatal(err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-tx"
	cfg.Producer.Transaction.Retry.Max = 20
	cfg.Producer.Transaction.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Retry.Max = 20
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "stx", Value: sarama.StringEncoder(fmt.Sprintf("%s-%02d", prefix, i))}); err != nil {
				t.Fatalf("%s: %v", prefix, err)
			}
		}
		end := p.CommitTxn
		if !commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatalf("%s: end: %v", prefix, err)
		}
	}
	send("s1", 5, true)
	send("sa", 4, false)
	send("s2", 2, true)
	want := []string{"s1-00", "s1-01", "s1-02", "s1-03", "s1-04", "s2-00", "s2-01"}
	if got := consumeIsolated(t, c, "stx", kgo.ReadCommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_committed after sarama's transactions: %q, want %q", got, want)
	}
	if got := consumeIsolated(t, c, "stx", kgo.ReadUncommitted(), len(want)+4); len(got) != len(want)+4 {
		t.Fatalf("read_uncommitted after sarama's transactions: %q", got)
	}
}

// TestTransactionCoordinatorKilled: the broker coordinating an open transaction is
// killed (no graceful leave) after the producer wrote into three partitions; its
// __transaction_state partition fails over, the new coordinator loads the transaction
// from it, and the producer's commit (retried by franz-go until a coordinator answers)
// completes: read_committed readers see every record once; a later transaction of the
// same producer works. The time from the kill to the commit's answer is logged.
func TestTransactionCoordinatorKilled(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := txnCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 3, "fotx"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	p := newClient(t, c, kgo.TransactionalID("fo-tx"), kgo.DefaultProduceTopic("fotx"), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 9; i++ {
		v := fmt.Sprintf("k-%02d", i)
		want = append(want, v)
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 3)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	co := adm.FindTxnCoordinators(ctx, "fo-tx")["fo-tx"]
	if co.Err != nil {
		t.Fatal(co.Err)
	}
	killed := time.Now()
	c.KillBroker(int(co.NodeID) - 1)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator (broker %d) was killed: %v", co.NodeID, err)
	}
	t.Logf("commit answered %v after the coordinator (broker %d) was killed", time.Since(killed).Round(time.Millisecond), co.NodeID)
	if got := consumeIsolated(t, c, "fotx", kgo.ReadCommitted(), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_committed after the failover: %q, want %q", got, want)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("after"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("a transaction after the failover: %v", err)
	}
	if got := consumeIsolated(t, c, "fotx", kgo.ReadCommitted(), len(want)+1); len(got) != len(want)+1 {
		t.Fatalf("read_committed after the next transaction: %q", got)
	}
}

// txnTransactionTimeoutAborts: a producer that stalls past its transaction timeout has
// its transaction aborted by the coordinator (with its epoch bumped, a fence): its commit
// then fails, read_committed readers never see its records, and the partitions' last
// stable offset moves on, so another producer's later transaction is visible.
func txnTransactionTimeoutAborts(t *testing.T, c *Cluster) {
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 1, "totx"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	slow := newClient(t, c, kgo.TransactionalID("slow-tx"), kgo.DefaultProduceTopic("totx"), kgo.TransactionTimeout(2*time.Second))
	if err := slow.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := slow.ProduceSync(ctx, &kgo.Record{Value: []byte("stalled")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the coordinator aborts the stalled transaction", func() bool {
		d, err := adm.DescribeTransactions(ctx, "slow-tx")
		if err != nil {
			return false
		}
		st, ok := d["slow-tx"]
		return ok && st.State == "CompleteAbort"
	})
	if err := slow.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the stalled producer committed a transaction its coordinator aborted")
	}
	fast := newClient(t, c, kgo.TransactionalID("fast-tx"), kgo.DefaultProduceTopic("totx"))
	if err := fast.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := fast.ProduceSync(ctx, &kgo.Record{Value: []byte("later")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := fast.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeIsolated(t, c, "totx", kgo.ReadCommitted(), 1); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("read_committed after the timeout: %q, want only the later transaction", got)
	}
}

// TestTransactions runs the transaction tests that leave every broker up on one cluster
// (a cluster start costs seconds under the race detector).
func TestTransactions(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := txnCluster(t)
	t.Run("franz-go", func(t *testing.T) { txnTransactionsFranzGo(t, c) })
	t.Run("consume-transform-produce", func(t *testing.T) { txnTransactionsConsumeTransformProduce(t, c) })
	t.Run("sarama", func(t *testing.T) { txnTransactionsSarama(t, c) })
	t.Run("timeout", func(t *testing.T) { txnTransactionTimeoutAborts(t, c) })
	t.Run("late-batch", func(t *testing.T) { txnLateBatchRefused(t, c) })
}
