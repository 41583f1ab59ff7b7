package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
)

// compactCluster: small WAL segments and objects, and a cleaner that runs often, so a
// compacted topic's data is uploaded, trimmed from the WAL, cleaned and collected
// within seconds.
func compactCluster(t *testing.T) *Cluster {
	return startCluster(t, func(c *Config) {
		base := c.BrokerConfig
		c.BrokerConfig = func(b *broker.Config) {
			base(b)
			b.WAL.SegmentSize = 256 << 10
			b.TailCacheBytes = 64 << 10
			b.Tier.TargetObjectBytes = 64 << 10
			b.Tier.MaxObjectBytes = 1 << 20
			b.Tier.MaxUploadDelay = 200 * time.Millisecond
			b.Tier.CheckInterval = 20 * time.Millisecond
			b.Tier.RetentionInterval = 500 * time.Millisecond
			b.Tier.CompactInterval = 200 * time.Millisecond
		}
	})
}

// readAll consumes partition 0 of topic from offset 0 up to end (exclusive) and returns
// offset → key=value for every record; opts add to the consumer's options (an isolation
// level). The record at end-1 must be one the consumer gets (not a marker, not cleaned).
func readAll(t *testing.T, c *Cluster, topic string, end int64, opts ...kgo.Opt) (map[int64]string, error) {
	t.Helper()
	cl := newClient(t, c, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}})}, opts...)...)
	defer cl.Close()
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := int64(-1)
	for last < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, fmt.Errorf("read to offset %d of %d: %w", last, end, ctx.Err())
		}
		for _, e := range fs.Errors() {
			return got, fmt.Errorf("fetch: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Errorf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			v := "<tombstone>"
			if r.Value != nil {
				v = string(r.Value[:min(len(r.Value), 12)])
			}
			got[r.Offset] = string(r.Key) + "=" + v
		})
	}
	return got, nil
}

// TestCompactedTopicKeepsLatestPerKey writes ten values for each of 20 keys (and a
// tombstone for one of them) to a compacted topic, then unique filler records so the
// WAL rolls and its old segments are trimmed, and waits until a consumer reading from
// offset 0 gets exactly each key's latest record at its acked offset (the tombstone too:
// delete.retention.ms is a day) and every filler record: the objects were rewritten and
// the old ones serve no more. Then the partition's leader is killed and the new leader
// serves the same records.
func TestCompactedTopicKeepsLatestPerKey(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := compactCluster(t)
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t, 3*time.Minute)
	cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.01")}
	if _, err := adm.CreateTopic(ctx, 1, 1, cfg, "cmp"); err != nil {
		t.Fatal(err)
	}
	// Incompressible values, so the WAL rolls and its old segments are trimmed.
	padFor := func() string {
		raw := make([]byte, 1000)
		rand.Read(raw)
		return hex.EncodeToString(raw)
	}
	want := map[int64]string{}
	latest := map[string]int64{}
	produce := func(key, val string, tomb bool) {
		pad := padFor()
		r := &kgo.Record{Topic: "cmp", Key: []byte(key), Value: []byte(val + pad)}
		if tomb {
			r.Value = nil
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if old, ok := latest[key]; ok {
			delete(want, old)
		}
		latest[key] = r.Offset
		v := "<tombstone>"
		if !tomb {
			v = (val + pad)[:12]
		}
		want[r.Offset] = key + "=" + v
	}
	for round := 0; round < 10; round++ {
		for k := 0; k < 20; k++ {
			produce(fmt.Sprintf("k%02d", k), fmt.Sprintf("v%02d-%02d-", k, round), false)
		}
	}
	produce("k07", "", true)
	for i := 0; i < 400; i++ {
		produce(fmt.Sprintf("f%04d", i), "filler-", false)
	}
	end := int64(0)
	for o := range want {
		end = max(end, o+1)
	}
	check := func(when string) {
		testutil.EventuallyNoError(t, 90*time.Second, "the compacted partition read back "+when, func() error {
			got, err := readAll(t, c, "cmp", end)
			if err != nil {
				return err
			}
			for o, w := range want {
				if got[o] != w {
					return fmt.Errorf("offset %d: %q, want %q (%d records, want %d)", o, got[o], w, len(got), len(want))
				}
			}
			if len(got) != len(want) {
				return fmt.Errorf("%d records, want %d", len(got), len(want))
			}
			return nil
		})
	}
	check("after the clean")

	leader := c.LeaderController().View().Topics["cmp"].Partitions[0].Leader
	if err := c.KillBroker(int(leader) - 1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "a new leader", func() bool {
		i := c.LeaderIndex()
		if i < 0 {
			return false
		}
		p := c.Controller(i).View().Topics["cmp"].Partitions[0]
		return p.Leader != leader && p.Leader > 0 && !p.Recovering
	})
	check("after the leader was killed")
}
