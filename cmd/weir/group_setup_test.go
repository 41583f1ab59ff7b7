package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller"
)

// The cluster, clients and table parsing of TestGroupCommands.

// startGroupCluster starts 1 controller and 3 brokers. The controller's failure detection
// is as lenient as the cluster package's tests make it: on this busy 2-core machine a late
// heartbeat must not fence a broker in the middle of a CLI test.
func startGroupCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(cluster.Config{
		Dir: t.TempDir(), Controllers: 1, Brokers: 3, NoGossip: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BrokerConfig: func(b *broker.Config) {
			b.Group.InitialRebalanceDelay = 50 * time.Millisecond
			b.OffsetsTopicPartitions = 3
		},
		ControllerConfig: loadedTimeouts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loadedTimeouts gives an in-process cluster room on a loaded 2-core machine (the suite
// runs packages side by side): a broker late with its heartbeats by more than the
// production defaults allow is fenced and its partitions fail over, which is another
// test than the one written. Failover runs the same code, only later.
func loadedTimeouts(cc *controller.Config) {
	cc.SuspectTimeout, cc.ReportedTimeout, cc.LeaseTimeout = 1500*time.Millisecond, 2*time.Second, 3*time.Second
}

func newTestClient(t *testing.T, c *cluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceOrders creates "orders" (2 partitions) and writes two batches per partition,
// timestamped t0 and t0+1h (partition 0: 10 and 10 records, partition 1: 5 and 5), then
// moves partition 0's log start to 2.
func produceOrders(ctx context.Context, t *testing.T, c *cluster.Cluster, adm *kadm.Client, t0 time.Time) {
	t.Helper()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatalf("create orders: %v", err)
	}
	prod := newTestClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, ts := range []time.Time{t0, t0.Add(time.Hour)} {
		var recs []*kgo.Record
		for p, n := range []int{10, 5} {
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(p), Timestamp: ts, Value: []byte("v")})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	resp, err := adm.DeleteRecords(ctx, kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 2, LeaderEpoch: -1}}})
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
}

// consumeAndCommit polls as a group member until it has read offset 6 of partition 0 and
// offset 2 of partition 1, commits those (7 and 3 are committed) and returns its member id.
func consumeAndCommit(ctx context.Context, t *testing.T, cons *kgo.Client) string {
	t.Helper()
	var r0, r1 *kgo.Record
	for r0 == nil || r1 == nil {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming: %v", ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Partition == 0 && r.Offset == 6:
				r0 = r
			case r.Partition == 1 && r.Offset == 2:
				r1 = r
			}
		})
	}
	if err := cons.CommitRecords(ctx, r0, r1); err != nil {
		t.Fatalf("commit: %v", err)
	}
	id, _ := cons.GroupMetadata()
	return id
}

func coordinatorOf(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	r := adm.FindGroupCoordinators(ctx, group)[group]
	if r.Err != nil {
		t.Fatalf("FindCoordinator: %v", r.Err)
	}
	return r.NodeID
}

// tableRow is the fields of the first line of a table that starts with the fields first,
// or nil.
func tableRow(table string, first ...string) []string {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(first) && slices.Equal(f[:len(first)], first) {
			return f
		}
	}
	return nil
}

// cells is row's fields from index i on, joined by spaces ("" past its end).
func cells(row []string, i int) string {
	return strings.Join(row[min(i, len(row)):], " ")
}

func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
}

// resetJSON decodes reset-offsets --json with the field names scripts rely on.
func resetJSON(t *testing.T, out string) (plan struct {
	Group      string `json:"group"`
	Executed   bool   `json:"executed"`
	Partitions []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		CurrentOffset int64  `json:"current_offset"`
		NewOffset     int64  `json:"new_offset"`
	} `json:"partitions"`
}) {
	t.Helper()
	decodeJSON(t, out, &plan)
	if len(plan.Partitions) != 2 {
		t.Fatalf("reset-offsets --json: want 2 partitions:\n%s", out)
	}
	return plan
}
