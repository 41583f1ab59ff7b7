package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/ackcheck"
)

// verifiedLoad produces unique values to every partition of a topic with idempotent
// producers (acks=all, retried until acked) and records every ack in a checker, and when
// each partition was last and first acked around a fault.
type verifiedLoad struct {
	t          *testing.T
	topic      string
	partitions int
	chk        *ackcheck.Checker
	cls        []*kgo.Client
	stop       context.CancelFunc
	wg         sync.WaitGroup
	pending    sync.WaitGroup

	mu     sync.Mutex
	ackAt  map[int32][]time.Time // ack times per partition
	failed atomic.Int64
}

// startLoad runs producers goroutines, each producing one record per interval to each
// partition in turn; opts adjust the producers' clients.
func startLoad(t *testing.T, c *Cluster, topic string, partitions, producers int, interval time.Duration, opts ...kgo.Opt) *verifiedLoad {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &verifiedLoad{t: t, topic: topic, partitions: partitions, chk: ackcheck.New(), stop: stop, ackAt: map[int32][]time.Time{}}
	for w := 0; w < producers; w++ {
		cl := newClient(t, c, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordRetries(1 << 30), kgo.RetryTimeout(5 * time.Minute), kgo.ProducerLinger(0),
			// franz-go refreshes metadata at most every 5 s by default; a leader change is
			// then seen that late whatever the broker does (Java and librdkafka refresh on
			// the error, after a 100 ms backoff).
			kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
		l.cls = append(l.cls, cl)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tk := time.NewTicker(interval)
			defer tk.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
				}
				p := int32(seq % partitions)
				v := fmt.Sprintf("w%d-%07d", w, seq)
				l.pending.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
					defer l.pending.Done()
					if err != nil {
						l.failed.Add(1)
						l.chk.Failed()
						t.Logf("produce %s failed: %v", v, err)
						return
					}
					l.chk.Acked(ackcheck.TP{Topic: topic, Partition: r.Partition}, r.Offset, v)
					l.mu.Lock()
					l.ackAt[r.Partition] = append(l.ackAt[r.Partition], time.Now())
					l.mu.Unlock()
				})
			}
		}()
	}
	return l
}

// finish stops producing and waits for every record to be acked or failed.
func (l *verifiedLoad) finish() {
	l.stop()
	l.wg.Wait()
	done := make(chan struct{})
	go func() { l.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		l.t.Fatal("produces still pending 3 minutes after the load stopped")
	}
}

// acks returns the number of acks so far.
func (l *verifiedLoad) acks() int {
	a, _ := l.chk.Counts()
	return a
}

// unavailability is, per partition, the time from the fault to the first ack after it.
func (l *verifiedLoad) unavailability(fault time.Time) map[int32]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]time.Duration{}
	for p, ts := range l.ackAt {
		for _, at := range ts {
			if at.After(fault) {
				out[p] = at.Sub(fault)
				break
			}
		}
	}
	return out
}

// verify reads every partition from its start and checks it against the acks.
func (l *verifiedLoad) verify(c *Cluster) ackcheck.Report {
	t := l.t
	t.Helper()
	adm := kadm.NewClient(newClient(t, c))
	ends := endOffsets(t, adm, l.topic)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %d: %v", o.Partition, o.Err)
		}
		want[o.Partition] = o.Offset
	})
	offs := map[string]map[int32]kgo.Offset{l.topic: {}}
	for p := range want {
		offs[l.topic][p] = kgo.NewOffset().AtStart()
	}
	cons := newClient(t, c, kgo.ConsumePartitions(offs))
	got := map[int32]int64{}
	ctx := ctxFor(t, 2*time.Minute)
	done := func() bool {
		for p, end := range want {
			if got[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v of %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			l.chk.Read(ackcheck.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, string(r.Value))
			got[r.Partition] = max(got[r.Partition], r.Offset+1)
		})
	}
	return l.chk.Verify()
}

// percentiles formats p50, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d partitions)", at(0.5).Round(time.Millisecond), at(0.99).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
}
