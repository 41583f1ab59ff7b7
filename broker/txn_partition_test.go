package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
)

// appendInternal appends batch to partition index of topic through the broker's WAL
// path (as the WriteTxnMarkers handler will) and returns its base offset.
func (tb *testBroker) appendInternal(t *testing.T, topic string, index int32, batch []byte) int64 {
	t.Helper()
	var p *partlog.Partition
	testutil.Eventually(t, 20*time.Second, "the partition is served", func() bool {
		if tp := tb.meta.View().Topics[topic]; tp != nil {
			p = tb.parts.Get(tp.ID, index)
		}
		return p != nil && p.State() == partlog.Ready
	})
	h, err := recbatch.Parse(batch)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		base int64
		err  error
	}
	ch := make(chan res, 1)
	tb.appendBatch(p, &h, batch, false, func(base, _, _ int64, err error) { ch <- res{base, err} })
	r := <-ch
	if r.err != nil {
		t.Fatalf("internal append: %v", r.err)
	}
	return r.base
}

// consumeValues reads topic/0 from the start at isolation level iso until want values
// came, then for settle more; it returns the values in offset order.
func consumeValues(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int, settle time.Duration) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	ctx := testCtx(t)
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %q, want %d values", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	quiet, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	for quiet.Err() == nil {
		cl.PollFetches(quiet).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestTxnReadCommittedEndToEnd appends transactional batches and markers to a real
// broker's partition through its WAL path, and reads it with franz-go consumers: a
// read_committed one never sees the aborted records nor anything from the open
// transaction on, a read_uncommitted one sees every record. After the data moved to
// objects and the broker restarted from them (the WAL trimmed), the same holds, from
// the producer snapshot and the object ranges; the open transaction's commit then
// releases the rest.
func TestTxnReadCommittedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	store := faultyLocal(t)
	b := tierBroker(t, dir, store, nil)
	createTopic(t, b.admin(t), "txn", 1, nil)
	marker := func(pid int64, commit bool) []byte {
		return recbatch.EncodeMarker(recbatch.Marker{ProducerID: pid, Commit: commit}, time.Now().UnixMilli())
	}
	for _, batch := range [][]byte{
		kafkatest.TxnBatch(1, 0, 0, []byte("c1"), []byte("c2")), // 0-1: producer 1, committed
		kafkatest.TxnBatch(2, 0, 0, []byte("a1")),               // 2: producer 2, aborted
		kafkatest.Batch(-1, -1, -1, []byte("p1")),               // 3
		kafkatest.TxnBatch(2, 0, 1, []byte("a2")),               // 4
		marker(2, false), // 5
		marker(1, true),  // 6
		kafkatest.TxnBatch(3, 0, 0, []byte("o1")), // 7: producer 3, left open
		kafkatest.Batch(-1, -1, -1, []byte("p2")), // 8
	} {
		b.appendInternal(t, "txn", 0, batch)
	}
	committed := []string{"c1", "c2", "p1"}
	all := []string{"c1", "c2", "a1", "p1", "a2", "o1", "p2"}
	check := func(phase string, addr string) {
		t.Helper()
		if got := consumeValues(t, addr, "txn", kgo.ReadCommitted(), len(committed), time.Second); !slices.Equal(got, committed) {
			t.Fatalf("%s: read_committed consumed %q, want %q", phase, got, committed)
		}
		if got := consumeValues(t, addr, "txn", kgo.ReadUncommitted(), len(all), 300*time.Millisecond); !slices.Equal(got, all) {
			t.Fatalf("%s: read_uncommitted consumed %q, want %q", phase, got, all)
		}
	}
	check("hot", b.addr())

	// Enough other data to roll WAL segments: once everything is uploaded, the WAL is
	// trimmed past the transactional batches.
	createTopic(t, b.admin(t), "filler", 1, nil)
	produceN(t, b.client(t), "filler", 1, 800, 1000)
	testutil.Eventually(t, time.Minute, "everything uploaded and the WAL trimmed", func() bool {
		return b.allUploaded() && b.wal.Start() > 0
	})
	b.Close()

	b2 := tierBroker(t, dir, store, nil)
	check("from objects", b2.addr())
	if got := b2.appendInternal(t, "txn", 0, marker(3, true)); got != 9 {
		t.Fatalf("producer 3's commit marker at %d, want 9", got)
	}
	withOpen := []string{"c1", "c2", "p1", "o1", "p2"}
	if got := consumeValues(t, b2.addr(), "txn", kgo.ReadCommitted(), len(withOpen), 300*time.Millisecond); !slices.Equal(got, withOpen) {
		t.Fatalf("after the commit: read_committed consumed %q, want %q", got, withOpen)
	}
}
