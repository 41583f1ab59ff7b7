package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weir-io/weir/bench"
)

// runBench runs `weir bench ARGS --json` in-process and decodes its stdout.
func runBench(t *testing.T, args ...string) *bench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, progress bytes.Buffer
	args = append(args, "--json", "--interval", "1s")
	if err := bench.Main(ctx, args, &out, &progress); err != nil {
		t.Fatalf("weir bench %v: %v\n%s", args, err, progress.String())
	}
	if testing.Verbose() {
		t.Logf("weir bench %v:\n%s", args, progress.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("weir bench %v: bad JSON: %v\n%s", args, err, out.String())
	}
	return &res
}

// `weir bench produce`, `consume` and `e2e` against a 3-broker cluster: what produce
// reports acked is what the topic holds and what consume reads back from its start, and
// e2e reads every record it produced.
func TestBenchAgainstCluster(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := startCluster(t, nil)
	boot := c.Bootstrap()
	const size = 256

	pr := runBench(t, "produce", "--bootstrap", boot, "--topic", "bench-produce", "--partitions", "6",
		"--record-size", strconv.Itoa(size), "--rate", "2000", "--duration", "3s", "--warmup", "0s")
	p := pr.Produce
	if p == nil || p.RecordsAcked == 0 || p.RecordsFailed != 0 || p.RecordsAcked != p.RecordsSent || p.Bytes != p.RecordsAcked*size {
		t.Fatalf("produce = %+v", p)
	}
	if p.Latency == nil || p.Latency.Count != p.RecordsAcked {
		t.Fatalf("produce latency = %+v for %d acked", p.Latency, p.RecordsAcked)
	}
	// The split of the requests' latency (client wait, round trip): a record's ack
	// comes after its request's round trip, so no round trip exceeds the slowest ack.
	if r := p.Requests; r == nil || r.Requests == 0 || r.RoundTrip.Count != r.Requests || r.RoundTrip.P50 <= 0 || r.RoundTrip.Max > p.Latency.Max {
		t.Fatalf("produce requests = %+v (ack latency %+v)", p.Requests, p.Latency)
	}
	// Independently of the bench's own counting: the fresh topic holds exactly that many.
	adm := kadm.NewClient(newClient(t, c))
	ends := endOffsets(t, adm, "bench-produce")
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end != p.RecordsAcked {
		t.Fatalf("topic holds %d records, produce acked %d", end, p.RecordsAcked)
	}

	for _, extra := range [][]string{nil, {"--group", "bench-group", "--consumers", "2"}} {
		args := append([]string{"consume", "--bootstrap", boot, "--topic", "bench-produce", "--from", "start",
			"--stop-at-end", "--warmup", "0s", "--drain-timeout", "20s"}, extra...)
		cr := runBench(t, args...).Consume
		if cr == nil || cr.RecordsRead != p.RecordsAcked || !cr.ReachedEnd || cr.Bytes != p.Bytes {
			t.Fatalf("consume %v read %+v; produce acked %d records, %d bytes", extra, cr, p.RecordsAcked, p.Bytes)
		}
	}

	er := runBench(t, "e2e", "--bootstrap", boot, "--topic", "bench-e2e", "--partitions", "3",
		"--record-size", strconv.Itoa(size), "--rate", "1000", "--duration", "3s", "--warmup", "0s", "--consumers", "2")
	ep, ec := er.Produce, er.Consume
	if ep == nil || ec == nil || ep.RecordsAcked == 0 || ep.RecordsFailed != 0 || ep.RecordsAcked != ep.RecordsSent {
		t.Fatalf("e2e: produce %+v consume %+v", ep, ec)
	}
	if ec.RecordsRead != ep.RecordsAcked || !ec.ReachedEnd {
		t.Fatalf("e2e: read %d of %d produced (reached end %v)", ec.RecordsRead, ep.RecordsAcked, ec.ReachedEnd)
	}
	if ec.Latency == nil || ec.Latency.Count != ec.RecordsRead || ec.Latency.Max <= 0 {
		t.Fatalf("e2e latency = %+v for %d read", ec.Latency, ec.RecordsRead)
	}
}
