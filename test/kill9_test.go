package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// minLoad is the fewest acks a kill test needs before (and after) its kill to mean
// anything.
const minLoad = 1000

// awaitLoad waits until count() reaches want or, on a machine too slow for that, minLoad
// once patience has passed: how a kill test lets load build up before it kills.
func awaitLoad(t testing.TB, count func() int, want int, patience time.Duration) {
	t.Helper()
	start := time.Now()
	testutil.Eventually(t, patience+time.Minute, fmt.Sprintf("%d acks (or %d after %v)", want, minLoad, patience), func() bool {
		n := count()
		return n >= want || n >= minLoad && time.Since(start) > patience
	})
}

type ack struct {
	partition int32
	offset    int64
}

// TestKill9LosesNothingAcked produces under load with idempotent acks=all producers,
// kills the broker with SIGKILL mid-stream, restarts it on the same data, and checks that
// every acked record is at its acked offset and that offsets are dense.
func TestKill9LosesNothingAcked(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	dir := t.TempDir()
	p := startWeir(t, dir, "")
	const partitions = 8
	adm, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctxT(t, 30*time.Second), partitions, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}
	adm.Close()

	var mu sync.Mutex
	acked := map[string]ack{}
	var sent atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("crash"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond),
			kgo.RecordRetries(3), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer cl.Close()
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("w%d-%08d", w, i)
				sent.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[v] = ack{r.Partition, r.Offset}
						mu.Unlock()
					}
				})
				if i%2000 == 1999 {
					time.Sleep(time.Millisecond) // keep the buffer from growing without bound
				}
			}
		}(w)
	}
	// Let load build up, then kill mid-stream.
	awaitLoad(t, func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }, 20000, 30*time.Second)
	p.kill()
	// on purpose: in-flight produces fail against the dead broker before the producers
	// stop (nothing to wait for: a failed record's callback records nothing)
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	mu.Lock()
	snapshot := make(map[string]ack, len(acked))
	for k, v := range acked {
		snapshot[k] = v
	}
	mu.Unlock()
	if len(snapshot) < minLoad {
		t.Fatalf("only %d records acked before the kill; the test needs load", len(snapshot))
	}
	t.Logf("sent %d, acked %d before SIGKILL", sent.Load(), len(snapshot))

	p2 := startWeir(t, dir, p.addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p2.addr), kgo.ConsumeTopics("crash"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctxT(t, 30*time.Second), "crash")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total < int64(len(snapshot)) {
		t.Fatalf("log holds %d records, fewer than the %d acked", total, len(snapshot))
	}
	read := map[string]ack{}
	next := map[int32]int64{}
	rctx := ctxT(t, 120*time.Second)
	for int64(len(read)) < total {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %d of %d records before timing out", len(read), total)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d (gap or repeat)", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			if prev, dup := read[string(r.Value)]; dup {
				t.Fatalf("%s stored twice: %v and %d/%d", r.Value, prev, r.Partition, r.Offset)
			}
			read[string(r.Value)] = ack{r.Partition, r.Offset}
		})
	}
	for v, a := range snapshot {
		got, ok := read[v]
		if !ok {
			t.Fatalf("acked record %s (%d/%d) lost", v, a.partition, a.offset)
		}
		if got != a {
			t.Fatalf("acked record %s at %d/%d, read back at %d/%d", v, a.partition, a.offset, got.partition, got.offset)
		}
	}
}
