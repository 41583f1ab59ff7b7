package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/testutil"
)

// BenchmarkGroupLoadAfterRestart measures what a coordinator spends loading one
// __consumer_offsets partition from its WAL when it gains it (here: a restart), read and
// replay together: from Start until the partition's groups are served. Two logs, written
// through the broker's own group store:
//
//   - commits-100k: 100,000 commits of 50 offsets by 64 groups (what an uncompacted log
//     of a busy group holds; compaction keeps a log far shorter);
//
//   - groups-10k: 10,000 groups, one Full record each (3 members with assignments and 50
//     offsets): what compaction leaves of 10,000 groups on one partition.
//
//     go test -run XXX -bench GroupLoadAfterRestart -benchtime 1x ./broker/
func BenchmarkGroupLoadAfterRestart(b *testing.B) {
	now := time.Now()
	offsets := func(base int64) []group.Offset {
		out := make([]group.Offset, 50)
		for i := range out {
			out[i] = group.Offset{Topic: "orders", Partition: int32(i), Offset: base + int64(i), LeaderEpoch: 3, CommitTime: now, TopicID: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"}
		}
		return out
	}
	full := func(i int) (string, group.Record) {
		m := &group.Meta{Generation: 7, ProtocolType: "consumer", Protocol: "cooperative-sticky", Leader: "m0", Time: now}
		for j := 0; j < 3; j++ {
			m.Members = append(m.Members, group.MemberMeta{ID: fmt.Sprintf("m%d", j), ClientID: "svc", ClientHost: "/10.0.0.1",
				SessionTimeout: 45 * time.Second, RebalanceTimeout: time.Minute,
				Protocols:  []group.ProtocolMeta{{Name: "cooperative-sticky", Metadata: make([]byte, 64)}},
				Assignment: make([]byte, 120)})
		}
		return fmt.Sprintf("group-%d", i), group.Record{Full: true, Meta: m, Offsets: offsets(1000)}
	}
	commit := func(i int) (string, group.Record) { return "g", group.Record{Offsets: offsets(int64(i))} }
	for _, c := range []struct {
		name string
		n    int
		rec  func(int) (string, group.Record)
	}{{"commits-100k", 100_000, commit}, {"groups-10k", 10_000, full}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			mod := func(cfg *Config) {
				cfg.OffsetsTopicPartitions = 1
				cfg.OffsetsCompactBytes = 0 // measure the whole log
				cfg.WAL.SegmentSize = 64 << 20
			}
			br := startBroker(b, dir, mod)
			ctx := context.Background()
			if _, _, err := br.coordinatorPartition(ctx, "g", true); err != nil {
				b.Fatal(err)
			}
			testutil.Eventually(b, time.Minute, "the offsets partition served", func() bool { return br.groupStatus("g") == group.Owned })
			var wg sync.WaitGroup
			work := make(chan int)
			var bytes int64
			var mu sync.Mutex
			for w := 0; w < 64; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						name, rec := c.rec(i)
						if c.name == "commits-100k" {
							name = fmt.Sprintf("g%d", i%64) // one writer per group: stores are per group
						}
						if err := (offsetStore{br.Broker}).Write(ctx, name, rec); err != nil {
							b.Error(err)
							return
						}
						v, _ := group.EncodeRecord(rec)
						mu.Lock()
						bytes += int64(len(v))
						mu.Unlock()
					}
				}()
			}
			start := time.Now()
			for i := 0; i < c.n; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			b.Logf("%s: wrote %d records (%.1f MiB of values) in %v", c.name, c.n, float64(bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
			br.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				br2 := startBroker(b, dir, mod)
				testutil.Eventually(b, 5*time.Minute, "groups loaded", func() bool { return br2.groupStatus("g") == group.Owned })
				took := time.Since(start)
				b.ReportMetric(took.Seconds(), "s/load")
				b.ReportMetric(float64(bytes)/(1<<20)/took.Seconds(), "MiB/s")
				br2.Close()
			}
		})
	}
}
