package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// TestConfigCommands: weir config describe, set and delete on a topic (a round trip the
// brokers' own DescribeConfigs confirms) and on a broker, whose configs are read-only
// in Weir: describe shows them STATIC_BROKER_CONFIG, set and delete fail with
// INVALID_REQUEST and say why.
func TestConfigCommands(t *testing.T) {
	c := startKafkaCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config := kafkaRunner(ctx, runConfig, "--bootstrap", c.Bootstrap(), "--timeout", "30s")
	ok := func(args ...string) string {
		t.Helper()
		out, err := config(args...)
		if err != nil {
			t.Fatalf("weir config %q: %v\n%s", args, err, out)
		}
		return out
	}
	describe := func(args ...string) resourceConfigs {
		t.Helper()
		var rc resourceConfigs
		if err := json.Unmarshal([]byte(ok(append([]string{"describe", "--json"}, args...)...)), &rc); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	values := func(rc resourceConfigs) map[string]string {
		m := map[string]string{}
		for _, e := range rc.Configs {
			m[e.Name] = *e.Value
		}
		return m
	}
	cl := newTestClient(t, c)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, -1, nil, "cfg"); err != nil {
		t.Fatal(err)
	}

	t.Run("topic round trip", func(t *testing.T) {
		if out := ok("set", "--topic", "cfg", "retention.ms=60000", "segment.ms=120000"); !strings.Contains(out, "updated") {
			t.Fatalf("set:\n%s", out)
		}
		// The brokers' own answer, not this command's: every broker has it once its view
		// of the metadata caught up (the change went through the controllers).
		testutil.Eventually(t, 20*time.Second, "every broker shows retention.ms=60000", func() bool {
			for id := 1; id <= len(c.KafkaAddrs()); id++ {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "cfg", []string{"retention.ms"}
				req.Resources = append(req.Resources, rr)
				resp, err := req.RequestWith(ctx, cl.Broker(id))
				if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 || deref(resp.Resources[0].Configs[0].Value) != "60000" {
					return false
				}
			}
			return true
		})
		rc := describe("--topic", "cfg")
		if m := values(rc); len(m) != 2 || m["retention.ms"] != "60000" || m["segment.ms"] != "120000" || rc.Configs[0].Source != "DYNAMIC_TOPIC_CONFIG" {
			t.Fatalf("describe: %+v", rc)
		}
		out := ok("describe", "--topic", "cfg")
		if f := tableRow(out, "retention.ms"); len(f) != 4 || f[1] != "60000" || f[2] != "DYNAMIC_TOPIC_CONFIG" || strings.Contains(out, "cleanup.policy") {
			t.Fatalf("describe's table:\n%s", out)
		}

		all := describe("--topic", "cfg", "--all")
		sources := map[string]string{}
		for _, e := range all.Configs {
			sources[e.Name] = e.Source
		}
		if len(all.Configs) != len(metadata.TopicConfigs) || sources["cleanup.policy"] != "DEFAULT_CONFIG" || sources["retention.ms"] != "DYNAMIC_TOPIC_CONFIG" {
			t.Fatalf("describe --all: %d configs (the catalogue has %d), sources %v", len(all.Configs), len(metadata.TopicConfigs), sources)
		}

		if out := ok("delete", "--topic", "cfg", "retention.ms"); !strings.Contains(out, "updated") {
			t.Fatalf("delete:\n%s", out)
		}
		testutil.Eventually(t, 20*time.Second, "retention.ms deleted", func() bool {
			m := values(describe("--topic", "cfg"))
			return len(m) == 1 && m["segment.ms"] == "120000"
		})
		var dry alteredConfigs
		if err := json.Unmarshal([]byte(ok("set", "--topic", "cfg", "retention.ms=1", "--dry-run", "--json")), &dry); err != nil || dry.Status != "valid" {
			t.Fatalf("--dry-run: %+v %v", dry, err)
		}
		if m := values(describe("--topic", "cfg")); len(m) != 1 {
			t.Fatalf("--dry-run changed the configs: %v", m)
		}
	})

	t.Run("topic refusals", func(t *testing.T) {
		out, err := config("set", "--topic", "cfg", "segment.ms=1000", "no.such.key=1", "--json")
		var res alteredConfigs
		if !errors.Is(err, kerr.InvalidConfig) || json.Unmarshal([]byte(out), &res) != nil || res.Error != "INVALID_CONFIG" || res.Status != "failed" || res.Hint == "" {
			t.Fatalf("an unknown key: %v\n%s", err, out)
		}
		if m := values(describe("--topic", "cfg")); m["segment.ms"] != "120000" {
			t.Fatalf("a refused change changed segment.ms: %v", m)
		}
		out, err = config("describe", "--topic", "nope")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(out, "UNKNOWN_TOPIC_OR_PARTITION") {
			t.Fatalf("describe of a missing topic: %v\n%s", err, out)
		}
		for _, args := range [][]string{{"describe"}, {"describe", "--topic", "cfg", "--broker", "1"}, {"describe", "--broker", "one"}, {"set", "--topic", "cfg"}, {"set", "--topic", "cfg", "novalue"}} {
			if _, err := config(args...); err == nil {
				t.Errorf("weir config %q accepted", args)
			}
		}
	})

	t.Run("broker", func(t *testing.T) {
		rc := describe("--broker", "2")
		if m := values(rc); m["broker.id"] != "2" || m["broker.rack"] == "" {
			t.Fatalf("broker 2's configs: %+v", rc)
		}
		for _, e := range rc.Configs {
			if e.Source != "STATIC_BROKER_CONFIG" || !e.ReadOnly {
				t.Errorf("%s: source %s read-only %v, want STATIC_BROKER_CONFIG and read-only", e.Name, e.Source, e.ReadOnly)
			}
		}
		if f := tableRow(ok("describe", "--broker", "3", "--all"), "broker.id"); len(f) != 4 || f[1] != "3" || f[3] != "true" {
			t.Errorf("broker 3's broker.id row: %q", f)
		}
		for _, args := range [][]string{{"set", "--broker", "2", "num.partitions=5"}, {"delete", "--broker", "2", "num.partitions"}} {
			out, err := config(args...)
			if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(out, "INVALID_REQUEST") || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("weir config %q: %v\n%s", args, err, out)
			}
		}
		if m := values(describe("--broker", "2")); m["num.partitions"] != "1" {
			t.Errorf("num.partitions changed: %v", m)
		}
		if _, err := config("describe", "--broker", "99"); err == nil || !strings.Contains(err.Error(), "weir admin describe") {
			t.Errorf("describe of a broker not in the cluster: %v", err)
		}
	})

	t.Run("help", func(t *testing.T) {
		if out := ok("--help"); !strings.Contains(out, "describe --topic") || !strings.Contains(out, "read-only") {
			t.Errorf("weir config --help:\n%s", out)
		}
		desc, _, _ := strings.Cut(ok("describe", "--help"), "Connection and output flags")
		set, _, _ := strings.Cut(ok("set", "--help"), "Connection and output flags")
		if !strings.Contains(desc, "  -all") || strings.Contains(desc, "-dry-run") || !strings.Contains(desc, "  -broker") {
			t.Errorf("describe --help's flags:\n%s", desc)
		}
		if !strings.Contains(set, "  -dry-run") || strings.Contains(set, "-all") || !strings.Contains(set, "  -topic") {
			t.Errorf("set --help's flags:\n%s", set)
		}
	})
}
