//go:build integration

// Runs the benchmarks for a few seconds against a live broker:
//
//	WEIR_BOOTSTRAP=127.0.0.1:9092 go test -tags integration -run Integration ./bench/
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func bootstrap(t *testing.T) string {
	b := os.Getenv("WEIR_BOOTSTRAP")
	if b == "" {
		t.Skip("WEIR_BOOTSTRAP is not set")
	}
	return b
}

// runJSON runs `weir bench ARGS --json` and decodes its stdout.
func runJSON(t *testing.T, args ...string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	args = append(args, "--json")
	if err := Main(ctx, args, &out, &progress); err != nil {
		t.Fatalf("weir bench %v: %v\n%s", args, err, progress.String())
	}
	t.Logf("weir bench %v:\n%s", args, progress.String())
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("weir bench %v: bad JSON: %v\n%s", args, err, out.String())
	}
	return &res
}

func freshTopic(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// Everything produce acks must be read back by consume from the start of a
// fresh topic, with and without a consumer group.
func TestIntegrationProduceConsume(t *testing.T) {
	b := bootstrap(t)
	topic := freshTopic("weir-bench-it")
	plot := filepath.Join(t.TempDir(), "produce.png")
	// No warmup: warmup records would be in the topic but not in the counts.
	pr := runJSON(t, "produce", "--bootstrap", b, "--topic", topic, "--partitions", "3",
		"--duration", "3s", "--warmup", "0s", "--rate", "2000", "--interval", "1s", "--plot", plot)
	p := pr.Produce
	if p == nil || p.RecordsAcked == 0 || p.RecordsFailed != 0 || p.RecordsAcked != p.RecordsSent {
		t.Fatalf("produce = %+v", p)
	}
	if p.Latency == nil || p.Latency.P50 <= 0 || len(p.Intervals) == 0 || p.Bytes != p.RecordsAcked*1024 {
		t.Fatalf("produce stats = %+v", p)
	}
	// The requests' split (breakdown.go): every measured Produce request has a round
	// trip, which no record's ack latency can undercut at the median.
	if r := p.Requests; r == nil || r.Requests == 0 || r.RoundTrip.Count != r.Requests || r.RoundTrip.P50 <= 0 || r.RoundTrip.P50 > p.Latency.P99 {
		t.Fatalf("produce requests = %+v (ack latency %+v)", p.Requests, p.Latency)
	}
	if _, err := os.Stat(plot); err != nil {
		t.Fatal(err)
	}

	for _, extra := range [][]string{nil, {"--group", freshTopic("weir-bench-it-group"), "--consumers", "2"}} {
		args := append([]string{"consume", "--bootstrap", b, "--topic", topic, "--from", "start",
			"--stop-at-end", "--warmup", "0s", "--interval", "1s", "--drain-timeout", "20s"}, extra...)
		cr := runJSON(t, args...)
		c := cr.Consume
		if c == nil || c.RecordsRead != p.RecordsAcked || !c.ReachedEnd || c.Bytes != p.Bytes {
			t.Fatalf("consume %v read %+v, produce acked %d", extra, c, p.RecordsAcked)
		}
	}
}

// e2e: every record acked after warmup is read, and each has a latency.
func TestIntegrationE2E(t *testing.T) {
	b := bootstrap(t)
	for _, extra := range [][]string{nil, {"--group", freshTopic("weir-bench-it-e2e")}} {
		topic := freshTopic("weir-bench-it-e2e")
		args := append([]string{"e2e", "--bootstrap", b, "--topic", topic, "--partitions", "3",
			"--duration", "3s", "--warmup", "1s", "--rate", "1000", "--consumers", "2", "--interval", "1s"}, extra...)
		res := runJSON(t, args...)
		p, c := res.Produce, res.Consume
		if p == nil || c == nil || p.RecordsAcked == 0 || p.RecordsFailed != 0 {
			t.Fatalf("e2e %v: produce %+v consume %+v", extra, p, c)
		}
		if c.RecordsRead != p.RecordsAcked || !c.ReachedEnd {
			t.Fatalf("e2e %v: read %d of %d acked (reached end %v)", extra, c.RecordsRead, p.RecordsAcked, c.ReachedEnd)
		}
		if c.Latency == nil || c.Latency.Count != c.RecordsRead || c.Latency.P50 <= 0 {
			t.Fatalf("e2e %v latency = %+v", extra, c.Latency)
		}
	}
}

// txn: for each partitions-per-txn value both producer kinds did work, and
// every successful transaction has one latency and one commit latency.
func TestIntegrationTxn(t *testing.T) {
	b := bootstrap(t)
	res := runJSON(t, "txn", "--bootstrap", b, "--topic", freshTopic("weir-bench-it-txn"),
		"--partitions-per-txn", "1,3", "--records-per-txn", "20", "--duration", "2s", "--warmup", "0s")
	tr := res.Txn
	if res.Mode != "txn" || tr == nil || len(tr.Runs) != 2 || tr.Runs[0].PartitionsPerTxn != 1 || tr.Runs[1].PartitionsPerTxn != 3 {
		t.Fatalf("txn result = %+v", tr)
	}
	for _, r := range tr.Runs {
		for name, m := range map[string]TxnModeResult{"idempotent": r.Idempotent, "transactional": r.Transactional} {
			if m.Transactions == 0 || m.Failed != 0 || m.Records != m.Transactions*20 || m.RecordsPerSec <= 0 || m.TransactionsPerSec <= 0 {
				t.Fatalf("%d partitions, %s = %+v", r.PartitionsPerTxn, name, m)
			}
			if m.Latency == nil || m.Latency.Count != m.Transactions || m.Latency.P50 <= 0 {
				t.Fatalf("%d partitions, %s latency = %+v", r.PartitionsPerTxn, name, m.Latency)
			}
		}
		if c := r.Transactional.CommitLatency; c == nil || c.Count != r.Transactional.Transactions || c.Max > r.Transactional.Latency.Max {
			t.Fatalf("%d partitions: commit latency %+v, transaction latency %+v", r.PartitionsPerTxn, c, r.Transactional.Latency)
		}
		if r.Idempotent.CommitLatency != nil || r.ThroughputRatio <= 0 {
			t.Fatalf("%d partitions: idempotent commit latency %+v, ratio %v", r.PartitionsPerTxn, r.Idempotent.CommitLatency, r.ThroughputRatio)
		}
	}
}
