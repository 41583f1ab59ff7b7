package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/internal/testutil"
)

// startKafkaCluster starts the in-process cluster a weir topic or config test talks to:
// one controller (fast to start), three brokers.
func startKafkaCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(cluster.Config{Dir: t.TempDir(), Controllers: 1, Brokers: 3, NoGossip: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ControllerConfig: loadedTimeouts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// kafkaRunner runs a weir command (runTopic, runConfig) against bootstrap; extra flags
// follow the arguments, as a user may put them.
func kafkaRunner(ctx context.Context, run func(context.Context, []string, io.Writer) error, extra ...string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(append([]string{}, args...), extra...), &out)
		return out.String(), err
	}
}

// TestTopicCommands: weir topic create, list, describe, add-partitions and delete against
// a real cluster, table and --json, and their refusals with the Kafka error names.
func TestTopicCommands(t *testing.T) {
	c := startKafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := kafkaRunner(ctx, runTopic, "--bootstrap", c.Bootstrap(), "--timeout", "30s")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// partitionsOf is the partition count of name every broker's Metadata shows, -1 for
	// no such topic, -2 while they disagree (their views of the metadata catch up).
	partitionsOf := func(name string) int {
		counts := map[int]bool{}
		for id := 1; id <= len(c.KafkaAddrs()); id++ {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(id))
			switch {
			case err != nil || len(resp.Topics) != 1:
				return -2
			case resp.Topics[0].ErrorCode != 0:
				counts[-1] = true
			default:
				counts[len(resp.Topics[0].Partitions)] = true
			}
		}
		for n := range counts {
			if len(counts) == 1 {
				return n
			}
		}
		return -2
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := topic(args...)
		if err != nil {
			t.Fatalf("weir topic %q: %v\n%s", args, err, out)
		}
		return out
	}

	t.Run("create", func(t *testing.T) {
		out := ok("create", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
		if !strings.Contains(out, "orders") || !strings.Contains(out, "created") {
			t.Fatalf("create's table:\n%s", out)
		}
		testutil.Eventually(t, 20*time.Second, "Metadata shows orders with 3 partitions", func() bool { return partitionsOf("orders") == 3 })

		var rows []createdTopic
		if err := json.Unmarshal([]byte(ok("create", "--json", "events", "--partitions", "2", "--replication-factor", "3")), &rows); err != nil {
			t.Fatal(err)
		}
		// The replication factor printed is the broker's answer to the same request, not
		// the 3 asked for.
		want, err := adm.ValidateCreateTopics(ctx, 2, 3, nil, "other")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Topic != "events" || rows[0].Status != "created" || rows[0].Partitions != 2 || rows[0].TopicID == "" ||
			rows[0].ReplicationFactor != want["other"].ReplicationFactor || rows[0].Error != "" {
			t.Fatalf("create --json: %+v (the broker answers replication factor %d)", rows, want["other"].ReplicationFactor)
		}
		// Asked 3, answered 1: the broker's note says so, in --json and in the table.
		if rows[0].ReplicationFactor != 1 || !strings.Contains(rows[0].Note, "recorded as 1") {
			t.Fatalf("create --replication-factor 3: %+v, want 1 with the broker's note", rows[0])
		}
		if out := ok("create", "events3", "--replication-factor", "3"); !strings.Contains(out, "events3: replication factor 3 recorded as 1") {
			t.Fatalf("create --replication-factor 3, the table has no note:\n%s", out)
		}
		testutil.Eventually(t, 20*time.Second, "Metadata shows events", func() bool { return partitionsOf("events") == 2 })

		if out := ok("create", "dry", "--dry-run", "--partitions", "4"); !strings.Contains(out, "valid") {
			t.Fatalf("--dry-run:\n%s", out)
		}
		if n := partitionsOf("dry"); n != -1 {
			t.Fatalf("--dry-run created the topic (%d partitions)", n)
		}
	})

	t.Run("create refusals", func(t *testing.T) {
		out, err := topic("create", "orders", "fresh")
		if !errors.Is(err, kerr.TopicAlreadyExists) || !strings.Contains(err.Error(), "1 of 2 topics failed") {
			t.Fatalf("create of an existing topic: %v", err)
		}
		if !strings.Contains(out, "TOPIC_ALREADY_EXISTS") || !strings.Contains(out, "weir topic describe orders") || !strings.Contains(out, "fresh") {
			t.Fatalf("the table lacks the error, its hint or the created topic:\n%s", out)
		}
		out, err = topic("create", "bad", "--config", "no.such.key=1", "--json")
		var rows []createdTopic
		if !errors.Is(err, kerr.InvalidConfig) || json.Unmarshal([]byte(out), &rows) != nil || rows[0].Error != "INVALID_CONFIG" || rows[0].Hint == "" {
			t.Fatalf("an unknown config: %v\n%s", err, out)
		}
		if _, err := topic("create", "x", "--partitions", "0"); err == nil {
			t.Fatal("--partitions 0 accepted")
		}
	})

	t.Run("list", func(t *testing.T) {
		// __consumer_offsets exists once a group commits.
		offs := kadm.Offsets{}
		offs.AddOffset("orders", 0, 0, -1)
		if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 20*time.Second, "every broker knows fresh", func() bool { return partitionsOf("fresh") == 1 })
		out := ok("list")
		for _, want := range []string{"TOPIC", "orders", "events", "fresh"} {
			if !strings.Contains(out, want) {
				t.Errorf("list lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "__consumer_offsets") {
			t.Errorf("list shows an internal topic without --internal:\n%s", out)
		}
		var rows []listedTopic
		testutil.Eventually(t, 20*time.Second, "list --internal shows __consumer_offsets", func() bool {
			rows = nil
			return json.Unmarshal([]byte(ok("list", "--internal", "--json")), &rows) == nil && rowsHave(rows, "__consumer_offsets")
		})
		for _, r := range rows {
			if r.Topic == "orders" && (r.Partitions != 3 || r.Internal || r.Replicas < 1) {
				t.Errorf("orders listed as %+v", r)
			}
			if r.Topic == "__consumer_offsets" && !r.Internal {
				t.Errorf("__consumer_offsets not internal: %+v", r)
			}
		}
	})

	t.Run("describe", func(t *testing.T) {
		produced := []int{4, 0, 7} // records per partition of orders
		p, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var recs []*kgo.Record
		for part, n := range produced {
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(part), Value: []byte("v")})
			}
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		var got []describedTopic
		if err := json.Unmarshal([]byte(ok("describe", "orders", "--json")), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Topic != "orders" || len(got[0].Partitions) != 3 || got[0].TopicID == "" {
			t.Fatalf("describe --json: %+v", got)
		}
		for i, dp := range got[0].Partitions {
			if dp.Partition != int32(i) || dp.HighWatermark != int64(produced[i]) || dp.LogStartOffset != 0 || dp.Leader < 1 || dp.LeaderEpoch < 0 || dp.Error != "" {
				t.Errorf("partition %d: %+v, want high watermark %d", i, dp, produced[i])
			}
		}
		if cf := got[0].Configs; len(cf) != 1 || cf[0].Name != "retention.ms" || *cf[0].Value != "3600000" || cf[0].Source != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("non-default configs: %+v", cf)
		}
		out := ok("describe", "orders")
		for _, want := range []string{"TOPIC orders (id " + got[0].TopicID + ", 3 partitions)", "HIGH WATERMARK", "retention.ms", "DYNAMIC_TOPIC_CONFIG"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe's table lacks %q:\n%s", want, out)
			}
		}
		if f := tableRow(out, "2"); len(f) < 6 || f[4] != "0" || f[5] != "7" {
			t.Errorf("partition 2's row %q, want log start 0 and high watermark 7:\n%s", f, out)
		}
		out, err = topic("describe", "orders", "nope")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(out, "weir topic list") {
			t.Fatalf("describe of a missing topic: %v\n%s", err, out)
		}
	})

	t.Run("add-partitions", func(t *testing.T) {
		if out := ok("add-partitions", "orders", "--num", "2"); !strings.Contains(out, "3 -> 5") {
			t.Fatalf("--num 2:\n%s", out)
		}
		testutil.Eventually(t, 20*time.Second, "orders has 5 partitions", func() bool { return partitionsOf("orders") == 5 })
		var rows []grownTopic
		if err := json.Unmarshal([]byte(ok("add-partitions", "orders", "--total", "6", "--json")), &rows); err != nil || rows[0].Before != 5 || rows[0].After != 6 {
			t.Fatalf("--total 6: %+v %v", rows, err)
		}
		testutil.Eventually(t, 20*time.Second, "orders has 6 partitions", func() bool { return partitionsOf("orders") == 6 })
		out, err := topic("add-partitions", "orders", "--total", "4")
		if !errors.Is(err, kerr.InvalidPartitions) || !strings.Contains(out, "INVALID_PARTITIONS") {
			t.Fatalf("shrinking: %v\n%s", err, out)
		}
		if _, err := topic("add-partitions", "orders", "--num", "1", "--total", "9"); err == nil {
			t.Fatal("--num with --total accepted")
		}
	})

	t.Run("delete", func(t *testing.T) {
		out, err := topic("delete", "events", "nope")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(out, "deleted") || !strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("delete events nope: %v\n%s", err, out)
		}
		testutil.Eventually(t, 20*time.Second, "events is gone", func() bool { return partitionsOf("events") == -1 })
	})

	t.Run("help", func(t *testing.T) {
		out := ok("--help")
		for _, sub := range []string{"create", "list", "describe", "delete", "add-partitions"} {
			if !strings.Contains(out, "  "+sub) {
				t.Errorf("weir topic --help lacks %s:\n%s", sub, out)
			}
		}
		out = ok("create", "--help")
		own, shared, _ := strings.Cut(out, "Connection and output flags")
		for _, f := range []string{"-partitions", "-replication-factor", "-config", "-dry-run"} {
			if !strings.Contains(own, f) {
				t.Errorf("create --help lacks %s among its flags:\n%s", f, out)
			}
		}
		if strings.Contains(out, "-num") || strings.Contains(out, "-internal") || !strings.Contains(shared, "-sasl-mechanism") {
			t.Errorf("create --help shows another command's flags, or not the shared ones:\n%s", out)
		}
		if out := ok("add-partitions", "--help"); !strings.Contains(out, "  -total") || strings.Contains(out, "  -partitions") {
			t.Errorf("add-partitions --help:\n%s", out)
		}
	})
}

func rowsHave(rows []listedTopic, name string) bool {
	for _, r := range rows {
		if r.Topic == name {
			return true
		}
	}
	return false
}
