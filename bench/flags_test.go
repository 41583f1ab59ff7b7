package bench

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) *config {
	t.Helper()
	cfg, err := parseArgs(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("parseArgs(%q): %v", args, err)
	}
	return cfg
}

func TestProduceDefaults(t *testing.T) {
	c := parse(t, "produce")
	if c.bootstrap != "127.0.0.1:9092" || c.topic != "weir-bench" || c.partitions != 1 || c.recordSize != 1024 ||
		c.rate != 0 || c.producers != 1 || c.acks != "all" || !c.idempotent || c.compression != "none" ||
		c.duration != 30*time.Second || c.warmup != 5*time.Second || c.interval != 5*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	if c.settings["record-size"] != "1024" || c.settings["acks"] != "all" {
		t.Fatalf("settings = %v", c.settings)
	}
}

func TestPresetAndOverrides(t *testing.T) {
	c := parse(t, "produce", "--preset", "1-topic-100-partitions-1kb")
	if c.partitions != 100 || c.recordSize != 1024 || c.topic != "weir-bench-1-topic-100-partitions-1kb" || c.rate != 50000 {
		t.Fatalf("preset not applied: %+v", c)
	}
	// Explicit flags win, before or after --preset.
	c = parse(t, "produce", "--partitions", "7", "--preset", "1-topic-1024-partitions-1kb", "--record-size", "4KiB", "--topic", "mine", "--rate", "0")
	if c.partitions != 7 || c.recordSize != 4096 || c.topic != "mine" || c.rate != 0 {
		t.Fatalf("explicit flags lost to preset: %+v", c)
	}
	if c.settings["partitions"] != "7" || c.settings["preset"] != "1-topic-1024-partitions-1kb" {
		t.Fatalf("settings = %v", c.settings)
	}
	// consume has no --partitions flag; the preset must still apply.
	c = parse(t, "consume", "--preset", "1-topic-1-partition-1kb", "--consumers", "3")
	if c.topic != "weir-bench-1-topic-1-partition-1kb" || c.consumers != 3 {
		t.Fatalf("consume preset: %+v", c)
	}
	if _, err := parseArgs([]string{"produce", "--preset", "nope"}, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestDerivedDefaults(t *testing.T) {
	if c := parse(t, "produce", "--records", "1000"); c.duration != 0 {
		t.Errorf("--records alone should lift the duration limit, got %v", c.duration)
	}
	if c := parse(t, "produce", "--records", "1000", "--duration", "10s"); c.duration != 10*time.Second {
		t.Errorf("explicit --duration lost: %v", c.duration)
	}
	if c := parse(t, "consume", "--stop-at-end"); c.duration != 0 {
		t.Errorf("--stop-at-end alone should lift the duration limit, got %v", c.duration)
	}
	if c := parse(t, "produce", "--acks", "1"); c.idempotent {
		t.Error("--acks 1 should turn idempotence off")
	}
	if c := parse(t, "produce", "--acks", "-1"); c.acks != "all" || !c.idempotent {
		t.Errorf("--acks -1: %+v", c)
	}
	for _, bad := range [][]string{
		{"produce", "--acks", "1", "--idempotent"},
		{"produce", "--acks", "2"},
		{"produce", "--max-inflight", "3"},
		{"produce", "--compression", "brotli"},
		{"produce", "--duration", "0"},
		{"produce", "--record-size", "0"},
		{"produce", "--record-size", "1XB"},
		{"consume", "--from", "middle"},
		{"produce", "extra"},
		{"disk"},
		{"disk", "a", "b"},
		{"nosuch"},
	} {
		if _, err := parseArgs(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if c := parse(t, "produce", "--idempotent=false", "--max-inflight", "3"); c.maxInflight != 3 {
		t.Errorf("max-inflight: %+v", c)
	}
}

// --client-id and --rack exist for produce, consume and e2e; the defaults stay
// "weir-bench" and no rack.
func TestClientIDAndRack(t *testing.T) {
	for _, mode := range []string{"produce", "consume", "e2e"} {
		c := parse(t, mode)
		if c.clientID != "weir-bench" || c.rack != "" {
			t.Errorf("%s defaults: client-id %q, rack %q", mode, c.clientID, c.rack)
		}
		c = parse(t, mode, "--client-id", "weir_az=b", "--rack", "b")
		if c.clientID != "weir_az=b" || c.rack != "b" || c.settings["client-id"] != "weir_az=b" || c.settings["rack"] != "b" {
			t.Errorf("%s: client-id %q, rack %q, settings %v", mode, c.clientID, c.rack, c.settings)
		}
		if _, err := parseArgs([]string{mode, "--client-id", ""}, io.Discard, io.Discard); err == nil {
			t.Errorf("%s: empty --client-id accepted", mode)
		}
	}
}

func TestDiskArgs(t *testing.T) {
	c := parse(t, "disk", "/some/dir", "--sizes", "4KiB,1MiB,512", "--count", "10")
	if c.dir != "/some/dir" || c.count != 10 || len(c.sizes) != 3 || c.sizes[0] != 4096 || c.sizes[1] != 1<<20 || c.sizes[2] != 512 {
		t.Fatalf("disk cfg = %+v", c)
	}
	c = parse(t, "disk", "--duration", "1s", "/d")
	if c.dir != "/d" || c.duration != time.Second || len(c.sizes) != 5 || c.sizes[4] != 1<<20 {
		t.Fatalf("disk defaults = %+v", c)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "1024": 1024, "16KiB": 16384, "4k": 4096, "1MiB": 1 << 20, "2mb": 2000000, "1KB": 1000, "3 KiB": 3072} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "-1", "0", "1.5KiB", "1TB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	if s := formatSize(1 << 20); s != "1MiB" {
		t.Errorf("formatSize = %s", s)
	}
	if s := humanSize(1000012); s != "976.6KiB" {
		t.Errorf("humanSize = %s", s)
	}
}

// Every flag of every subcommand must be explained, with its default, in
// `weir bench --help`; `weir bench produce --help` covers produce's flags.
func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := Main(context.Background(), []string{"--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	top := out.String()
	for _, mode := range subcommands() {
		fs := newFlagSet(mode, &config{}, io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(top, "  -"+f.Name+" ") && !strings.Contains(top, "  -"+f.Name+"\n") {
				t.Errorf("--help lacks %s --%s", mode, f.Name)
			}
			if f.Usage == "" {
				t.Errorf("%s --%s has no description", mode, f.Name)
			}
		})
	}
	for _, p := range presetNames() {
		if !strings.Contains(top, p) {
			t.Errorf("--help lacks preset %s", p)
		}
	}
	out.Reset()
	if err := Main(context.Background(), []string{"produce", "--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-rate records/s", "(default 1024)", "(default 30s)", "(default \"127.0.0.1:9092\")", "-wal-dir DIR", "-max-inflight", "coordinated omission"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("produce --help lacks %q:\n%s", want, out.String())
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("help wrote to stderr: %s", errOut.String())
	}
	if err := Main(context.Background(), nil, &out, &errOut); err == nil || !strings.Contains(errOut.String(), "Usage") {
		t.Errorf("no subcommand: err %v, stderr %q", err, errOut.String())
	}
}

func TestTxnFlags(t *testing.T) {
	c := parse(t, "txn")
	if c.partitionsPerTxn.String() != "1,10" || c.recordsPerTxn != 100 || c.producers != 1 || c.recordSize != 1024 ||
		c.settings["partitions-per-txn"] != "1,10" {
		t.Fatalf("txn defaults = %+v", c)
	}
	c = parse(t, "txn", "--partitions-per-txn", "2, 5", "--records-per-txn", "7", "--producers", "3")
	if c.partitionsPerTxn.String() != "2,5" || c.recordsPerTxn != 7 || c.producers != 3 {
		t.Fatalf("txn flags = %+v", c)
	}
	// Flags of the other modes are not registered for txn.
	for _, bad := range [][]string{
		{"txn", "--rate", "10"}, {"txn", "--preset", "1-topic-1-partition-1kb"},
		{"txn", "--partitions-per-txn", "0"}, {"txn", "--partitions-per-txn", ""}, {"txn", "--records-per-txn", "0"},
	} {
		if _, err := parseArgs(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
}
