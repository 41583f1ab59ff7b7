package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
)

// A zone-tagged transactional producer whose partitions are led in other zones writes
// through its zone's proxy (every batch a link, counted by the proxy), with the
// guarantees of a direct produce: while a transaction is open the partitions' last
// stable offset stays at its first record; a committed transaction is seen by
// read_committed consumers (untagged ones reading the leaders, tagged ones their zone's
// replica), an aborted one only by read_uncommitted ones.
func TestTransactionsThroughZoneProxy(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		cfg.Registerer = reg
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.Transactions = true
			b.Txn.Partitions = 3
		}
	})
	adm := kadm.NewClient(newClient(t, c))
	const topic = "txzone"
	if err := createTopic(t, adm, 3, topic); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, topic)
	// The proxy: a broker that does not lead every partition; the producer writes only
	// to the partitions led elsewhere.
	var proxyID int32
	var remote []int32
	view := c.LeaderController().View()
	for _, br := range view.Brokers {
		var others []int32
		for _, p := range tp.Partitions {
			if p.Leader != br.ID {
				others = append(others, p.Index)
			}
		}
		if len(others) > len(remote) {
			proxyID, remote = br.ID, others
		}
	}
	proxy, _ := view.Broker(proxyID)
	t.Logf("producer in zone %s (broker %d), writing to partitions %v led elsewhere", proxy.Rack, proxyID, remote)
	linked := func() float64 {
		return counterSum(t, reg, "weir_broker_proxy_links_total", func(l map[string]string) bool {
			return l["node"] == fmt.Sprintf("broker-%d", proxyID) && l["result"] == "ok"
		})
	}
	before := linked()

	ctx := ctxFor(t, 2*time.Minute)
	p := newClient(t, c, kgo.ClientID("txapp,weir_az="+proxy.Rack), kgo.TransactionalID("tz-1"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := 0
	txn := func(prefix string, n int, commit bool, whileOpen func()) []string {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%02d", prefix, i)
			vals = append(vals, v)
			// One record per ProduceSync: one batch, one link.
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: remote[i%len(remote)]}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			produced++
		}
		if whileOpen != nil {
			whileOpen()
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := p.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end of transaction %s (commit %v): %v", prefix, commit, err)
		}
		return vals
	}
	// While the first transaction is open, read_committed offsets stop at its first
	// record (the LSO the leaders hold for the linked batches), the log end past them.
	committed := txn("c1", 2*len(remote), true, func() {
		testutil.Eventually(t, 10*time.Second, "the end offsets of the open transaction's partitions", func() bool {
			ends, err1 := adm.ListEndOffsets(ctx, topic)
			stable, err2 := adm.ListCommittedOffsets(ctx, topic)
			if err1 != nil || err2 != nil {
				return false
			}
			for _, part := range remote {
				e, _ := ends.Lookup(topic, part)
				s, _ := stable.Lookup(topic, part)
				if e.Err != nil || s.Err != nil || e.Offset != 2 || s.Offset != 0 {
					t.Logf("partition %d: end %d (%v), last stable %d (%v); want 2 and 0", part, e.Offset, e.Err, s.Offset, s.Err)
					return false
				}
			}
			return true
		})
	})
	aborted := txn("ab", 2*len(remote), false, nil)
	committed = append(committed, txn("c2", len(remote), true, nil)...)
	// Most batches went through the proxy. Not all need to: under load a proxy that
	// cannot forward (its lease late, the leader's link busy) answers NOT_LEADER, and
	// the client's retry may go to the leader directly, which is correct (CI saw 8 of 10).
	if n := linked() - before; n < float64(produced)/2 {
		t.Fatalf("broker %d linked %v batches of the %d produced: routing went direct", proxyID, n, produced)
	} else if n < float64(produced) {
		t.Logf("broker %d linked %v batches of the %d produced; the rest went to their leaders", proxyID, n, produced)
	}
	all := append(slices.Clone(committed), aborted...)
	slices.Sort(committed)
	slices.Sort(all)
	if got := consumeIsolated(t, c, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed: %q, want %q", got, committed)
	}
	if got := consumeIsolated(t, c, topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted: %q, want %q", got, all)
	}
	// A tagged consumer of the proxy's zone reads from its zone's read replica.
	if got := consumeIsolated(t, c, topic, kgo.ReadCommitted(), len(committed), kgo.ClientID("txread,weir_az="+proxy.Rack)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed in zone %s: %q, want %q", proxy.Rack, got, committed)
	}
	if n := c.Broker(int(proxyID) - 1).Broker.Replicas(); n != len(remote) {
		t.Fatalf("broker %d serves %d read replicas, want %d: the tagged consumer read elsewhere", proxyID, n, len(remote))
	}
}
