// Package bench implements `weir bench`: load generators and a disk probe that
// measure what a Weir (or any Kafka-compatible) broker and its WAL disk can do.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Main runs `weir bench` with args being everything after "bench".
// Progress and summaries go to stdout (stderr when --json is set, so that
// stdout carries only the JSON object); usage errors go to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return errors.New("weir bench: missing subcommand (produce, consume, e2e, txn or disk)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printUsage(stdout)
		return nil
	case "failover":
		return runFailover(ctx, args[1:], stdout, stderr)
	case "suite":
		return runSuite(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseArgs(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	switch cfg.mode {
	case "disk":
		return runDisk(ctx, cfg, stdout, stderr)
	case "produce":
		return runProduce(ctx, cfg, stdout, stderr)
	case "consume":
		return runConsume(ctx, cfg, stdout, stderr)
	case "txn":
		return runTxn(ctx, cfg, stdout, stderr)
	default:
		return runE2E(ctx, cfg, stdout, stderr)
	}
}

// config holds every setting of one bench run; subcommands ignore fields
// they do not register flags for.
type config struct {
	mode string

	bootstrap  string
	sec        ClientSecurity // TLS and SASL of every client (security.go)
	secOpts    []kgo.Opt      // sec as franz-go options, built by parseArgs
	clientID   string
	rack       string
	topic      string
	partitions int
	recordSize byteSize
	preset     string

	rate         float64
	producers    int
	acks         string
	linger       time.Duration
	batchBytes   byteSize
	compression  string
	idempotent   bool
	maxInflight  int
	maxBuffered  int
	records      int64
	walDir       string
	walDuration  time.Duration
	drainTimeout time.Duration

	consumers int
	group     string
	from      string
	stopAtEnd bool

	duration time.Duration
	warmup   time.Duration
	interval time.Duration
	json     bool
	plot     string

	dir   string
	sizes sizeList
	count int

	partitionsPerTxn intList // txn: one measurement per value
	recordsPerTxn    int

	// explicit records which flags the user typed, so presets and
	// derived defaults never override them.
	explicit map[string]bool
	// settings is every flag's final value, echoed in the JSON result.
	settings map[string]string
}

// preset is a named set of flag values; explicit flags win over it.
type preset struct {
	desc   string
	values map[string]string
}

// presets mirrors the OpenMessaging Benchmark workloads of the same names
// (1 producer, 1 consumer, 50,000 records/s of 1 KiB, no key) so that Weir
// numbers can be compared with published OMB results for Kafka.
func presets() map[string]preset {
	mk := func(name string, parts int) map[string]string {
		return map[string]string{
			"topic":       "weir-bench-" + name,
			"partitions":  strconv.Itoa(parts),
			"record-size": "1024",
			"rate":        "50000",
			"producers":   "1",
			"consumers":   "1",
		}
	}
	out := map[string]preset{}
	for _, parts := range []int{1, 100, 1024} {
		name := fmt.Sprintf("1-topic-%d-partitions-1kb", parts)
		desc := fmt.Sprintf("1 topic, %d partitions, 1 KiB records, 1 producer and 1 consumer, 50,000 rec/s", parts)
		if parts == 1 {
			name, desc = "1-topic-1-partition-1kb", "1 topic, 1 partition, 1 KiB records, 1 producer and 1 consumer, 50,000 rec/s"
		}
		out[name] = preset{desc, mk(name, parts)}
	}
	return out
}

func presetNames() []string {
	var names []string
	for n := range presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func subcommands() []string { return []string{"produce", "consume", "e2e", "txn", "disk"} }

// newFlagSet builds the FlagSet of one subcommand, bound to cfg.
func newFlagSet(mode string, cfg *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("weir bench "+mode, flag.ContinueOnError)
	fs.SetOutput(out)
	cfg.mode = mode
	cfg.recordSize = 1024
	cfg.batchBytes = 1000012
	cfg.sizes = sizeList{1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20}

	if mode == "disk" {
		fs.Var(&cfg.sizes, "sizes", "comma-separated `sizes` of the writes, each with an optional unit B, KiB, MiB (or KB, MB = powers of 10); one run per size")
		fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "how long to write at each size (ignored when --count is set)")
		fs.IntVar(&cfg.count, "count", 0, "`writes` (write+fdatasync operations) per size; 0 = run for --duration instead")
		fs.BoolVar(&cfg.json, "json", false, "print one JSON object with all results to stdout at the end (progress lines go to stderr)")
		fs.Usage = func() {
			usageOf(fs, "disk [flags] DIR", "Measures the physical limit of a WAL directory: sequential appends to a scratch file in DIR, each followed by fdatasync.\nThe file is removed afterwards. MB = 10^6 bytes; latency is per write+fdatasync, in ms.")
		}
		return fs
	}

	fs.StringVar(&cfg.bootstrap, "bootstrap", "127.0.0.1:9092", "comma-separated seed brokers, each `host:port`")
	cfg.sec.BindFlags(fs)
	fs.StringVar(&cfg.clientID, "client-id", defaultClientID, "Kafka client.id of every client the bench opens; Weir reads a zone tag in it (e.g. weir_az=us-east-1a) and routes the client to brokers of that zone")
	fs.StringVar(&cfg.topic, "topic", "weir-bench", "`name` of the topic to use")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object with all results to stdout at the end (progress lines go to stderr)")
	if mode == "txn" {
		bindTxnFlags(fs, cfg)
		return fs
	}
	fs.StringVar(&cfg.rack, "rack", "", "the clients' rack (Kafka client.rack, `zone`), sent with fetches (KIP-392): consumers read from a replica in that zone; empty = none")
	fs.StringVar(&cfg.preset, "preset", "", "OpenMessaging Benchmark workload `name` to mimic: "+strings.Join(presetNames(), ", ")+"; sets topic, partitions, record-size, rate, producers and consumers unless those flags are given")
	fs.DurationVar(&cfg.interval, "interval", 5*time.Second, "time between progress lines (and points of the per-interval series)")
	fs.StringVar(&cfg.plot, "plot", "", "write a PNG chart to `FILE.png`: latency p50/p99 per interval and the latency percentile distribution")

	if mode == "produce" || mode == "e2e" {
		fs.IntVar(&cfg.partitions, "partitions", 1, "partitions of the topic if the bench has to create it (an existing topic is used as it is)")
		fs.Var(&cfg.recordSize, "record-size", "value size of each record in `bytes` (units B, KiB, MiB accepted); values are incompressible random bytes whose first 8 bytes carry the send time")
		fs.Float64Var(&cfg.rate, "rate", 0, "target `records/s` summed over all producers; 0 = unlimited (closed loop). With a target, sends are scheduled open-loop and latency is measured from the scheduled send time, so stalls are not hidden (no coordinated omission)")
		fs.IntVar(&cfg.producers, "producers", 1, "number of producer clients, each with its own connections; --rate is split evenly between them")
		fs.StringVar(&cfg.acks, "acks", "all", "acks required from the broker: `all|1|0` (0: the ack is the request being written to the socket)")
		fs.DurationVar(&cfg.linger, "linger", time.Millisecond, "how long a partition's batch waits for more records before it is sent (Kafka linger.ms)")
		fs.Var(&cfg.batchBytes, "batch-bytes", "maximum `bytes` of one record batch (Kafka batch.size; units B, KiB, MiB accepted)")
		fs.StringVar(&cfg.compression, "compression", "none", "batch compression `codec`: none, gzip, snappy, lz4 or zstd")
		fs.BoolVar(&cfg.idempotent, "idempotent", true, "idempotent producer (needs --acks all; turned off automatically for --acks 1 or 0 unless this flag is given)")
		fs.IntVar(&cfg.maxInflight, "max-inflight", 0, "produce requests in flight per broker connection; 0 = client default (5 when idempotent, 1 otherwise); other values need --idempotent=false")
		fs.IntVar(&cfg.maxBuffered, "max-buffered", 50000, "records buffered in each producer client before a send blocks (blocked time counts as latency)")
		fs.Int64Var(&cfg.records, "records", 0, "stop after this many `records` (after warmup); 0 = stop after --duration")
		fs.DurationVar(&cfg.warmup, "warmup", 5*time.Second, "sending time before measuring starts; records sent during warmup are excluded from all results")
		fs.DurationVar(&cfg.duration, "duration", 30*time.Second, "measured sending time after warmup; 0 = no limit (use --records); defaults to 0 when only --records is given")
		drainDesc := "after sending stops, how long to wait for outstanding acks"
		if mode == "e2e" {
			drainDesc += ", and for consumers to read every acked record (measured from the last record read)"
		}
		fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 30*time.Second, drainDesc)
	}
	if mode == "produce" {
		fs.StringVar(&cfg.walDir, "wal-dir", "", "after the run, also measure the disk limit of `DIR` (as weir bench disk does) at the record size and at the average batch size seen, and print throughput as a ratio of it")
		fs.DurationVar(&cfg.walDuration, "wal-duration", 3*time.Second, "duration of each --wal-dir disk measurement")
	}
	if mode == "consume" || mode == "e2e" {
		fs.IntVar(&cfg.consumers, "consumers", 1, "number of consumer clients; without --group the partitions are split between them round-robin")
		fs.StringVar(&cfg.group, "group", "", "consumer group `name` to join (offsets are committed, so reusing a group resumes where it stopped); empty = assign partitions directly")
	}
	if mode == "consume" {
		fs.StringVar(&cfg.from, "from", "start", "where to start reading: `start|end` (oldest record, or only records produced from now on); a --group with committed offsets resumes from those")
		fs.BoolVar(&cfg.stopAtEnd, "stop-at-end", false, "stop once every partition is read up to the end offsets seen at start; --duration then defaults to 0 (no limit)")
		fs.Int64Var(&cfg.records, "records", 0, "stop after reading this many `records` (after warmup); 0 = no record limit")
		fs.DurationVar(&cfg.warmup, "warmup", 0, "reading time before measuring starts; records read during warmup are excluded from all results")
		fs.DurationVar(&cfg.duration, "duration", 30*time.Second, "measured reading time after warmup; 0 = no limit")
		fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 30*time.Second, "with --stop-at-end, give up when no record arrived for this long")
	}
	switch mode {
	case "produce":
		fs.Usage = func() {
			usageOf(fs, "produce [flags]", "Produces records as fast as possible or at --rate and measures throughput and ack latency\n(time from the send, or its scheduled time, to the broker's ack). MB = 10^6 bytes; latency in ms.")
		}
	case "consume":
		fs.Usage = func() {
			usageOf(fs, "consume [flags]", "Reads a topic and measures records/s and MB/s (MB = 10^6 bytes of record values).")
		}
	case "e2e":
		fs.Usage = func() {
			usageOf(fs, "e2e [flags]", "Produces and consumes at once: producers stamp the send time (unix ns) in the first 8 bytes of each value\nand consumers measure end-to-end latency = receipt time - send time. Consumers start at the end of the topic.")
		}
	}
	return fs
}

func usageOf(fs *flag.FlagSet, synopsis, desc string) {
	out := fs.Output()
	fmt.Fprintf(out, "Usage: weir bench %s\n\n%s\n\nFlags:\n", synopsis, desc)
	fs.PrintDefaults()
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: weir bench <produce|consume|e2e|txn|disk|failover|suite> [flags]

Benchmarks a Kafka-compatible broker (normally Weir) and its WAL disk.
  produce   produce records, report throughput and ack latency
  consume   consume records, report throughput
  e2e       produce and consume at once, report end-to-end latency
  txn       transactional produce beside idempotent produce: throughput, commit latency
  disk      measure sequential write+fdatasync limits of a directory
  failover  run a cluster of processes, SIGKILL a broker, move partitions, restart,
            SIGSTOP, kill the controller leader: time how long partitions stay
            unwritable, each figure beside its target (weir bench failover --help)
  suite     run the performance suite (standalone produce beside the disk's limit,
            throughput per core, end to end on 3+3, scaling, cold reads) and print one
            table of ratios and targets (weir bench suite --help; make bench)

Every subcommand prints a progress line every --interval (txn: one per measurement) and a summary at the end;
--json prints the results as one JSON object instead, --plot draws them to a PNG.
Presets (--preset) after OpenMessaging Benchmark workloads:
`)
	p := presets()
	for _, n := range presetNames() {
		fmt.Fprintf(w, "  %-28s %s\n", n, p[n].desc)
	}
	for _, mode := range subcommands() {
		fmt.Fprintln(w)
		fs := newFlagSet(mode, &config{}, w)
		fs.Usage()
	}
}

// parseArgs parses one subcommand's flags, applies the preset and the
// defaults that depend on which flags were given, and validates the result.
func parseArgs(args []string, stdout, stderr io.Writer) (*config, error) {
	mode := args[0]
	known := false
	for _, m := range subcommands() {
		known = known || m == mode
	}
	if !known {
		printUsage(stderr)
		return nil, fmt.Errorf("weir bench: unknown subcommand %q", mode)
	}
	cfg := &config{}
	fs := newFlagSet(mode, cfg, stderr)
	// Help goes to stdout (it was asked for); errors to stderr.
	for _, a := range args[1:] {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
	}
	rest := args[1:]
	var positional []string
	// The flag package stops at the first non-flag; keep parsing after it so
	// that `disk DIR --sizes 4KiB` works as well as `disk --sizes 4KiB DIR`.
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	cfg.explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.explicit[f.Name] = true })

	if cfg.preset != "" {
		p, ok := presets()[cfg.preset]
		if !ok {
			return nil, fmt.Errorf("unknown --preset %q (known: %s)", cfg.preset, strings.Join(presetNames(), ", "))
		}
		for name, v := range p.values {
			if cfg.explicit[name] || fs.Lookup(name) == nil {
				continue
			}
			if err := fs.Set(name, v); err != nil {
				return nil, fmt.Errorf("preset %s: %w", cfg.preset, err)
			}
		}
	}
	if mode == "disk" {
		if len(positional) != 1 {
			return nil, errors.New("weir bench disk: exactly one DIR argument is required")
		}
		cfg.dir = positional[0]
	} else if len(positional) > 0 {
		return nil, fmt.Errorf("weir bench %s: unexpected argument %q", mode, positional[0])
	}
	cfg.applyDerivedDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if mode != "disk" {
		opts, err := cfg.sec.Opts()
		if err != nil {
			return nil, err
		}
		cfg.secOpts = opts
	}
	cfg.settings = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { cfg.settings[f.Name] = f.Value.String() })
	if cfg.settings["sasl-password"] != "" {
		cfg.settings["sasl-password"] = "(redacted)" // results are shared; secrets are not
	}
	if mode == "disk" {
		cfg.settings["dir"] = cfg.dir
	}
	return cfg, nil
}

// applyDerivedDefaults resolves defaults that depend on other flags.
func (c *config) applyDerivedDefaults() {
	// A record budget or a read-to-end goal replaces the time limit unless a
	// duration was asked for too.
	if !c.explicit["duration"] && ((c.mode != "disk" && c.records > 0) || c.stopAtEnd) {
		c.duration = 0
	}
	if c.acks == "-1" {
		c.acks = "all"
	}
	// Kafka only allows idempotence with acks=all.
	if (c.mode == "produce" || c.mode == "e2e") && c.acks != "all" && !c.explicit["idempotent"] {
		c.idempotent = false
	}
}

func (c *config) validate() error {
	if c.mode == "disk" {
		if len(c.sizes) == 0 {
			return errors.New("--sizes is empty")
		}
		if c.duration <= 0 && c.count <= 0 {
			return errors.New("one of --duration or --count must be positive")
		}
		return nil
	}
	if c.mode != "txn" && c.interval <= 0 {
		return errors.New("--interval must be positive")
	}
	if c.bootstrap == "" || c.topic == "" {
		return errors.New("--bootstrap and --topic must not be empty")
	}
	if c.clientID == "" {
		return errors.New("--client-id must not be empty")
	}
	if err := c.sec.Validate(); err != nil {
		return err
	}
	if c.warmup < 0 || c.duration < 0 || c.drainTimeout < 0 {
		return errors.New("durations must not be negative")
	}
	if c.mode == "txn" {
		return c.validateTxn()
	}
	if c.mode == "produce" || c.mode == "e2e" {
		if c.producers < 1 || c.partitions < 1 {
			return errors.New("--producers and --partitions must be at least 1")
		}
		if c.recordSize < 1 {
			return errors.New("--record-size must be at least 1 byte")
		}
		if c.rate < 0 {
			return errors.New("--rate must not be negative")
		}
		if c.duration == 0 && c.records <= 0 {
			return errors.New("give --duration or --records, or the run never ends")
		}
		switch c.acks {
		case "all", "-1", "1", "0":
		default:
			return fmt.Errorf("--acks must be all, 1 or 0, not %q", c.acks)
		}
		if c.idempotent && c.acks != "all" {
			return errors.New("--idempotent needs --acks all (Kafka rejects idempotence with acks 1 or 0)")
		}
		if c.idempotent && c.maxInflight != 0 && c.maxInflight != 5 {
			return errors.New("--max-inflight can only be changed with --idempotent=false (idempotent producers always allow 5)")
		}
		if c.maxInflight < 0 || c.maxBuffered < 1 {
			return errors.New("--max-inflight must be >= 0 and --max-buffered >= 1")
		}
		if _, err := codec(c.compression); err != nil {
			return err
		}
	}
	if c.mode == "consume" || c.mode == "e2e" {
		if c.consumers < 1 {
			return errors.New("--consumers must be at least 1")
		}
	}
	if c.mode == "consume" && c.from != "start" && c.from != "end" {
		return fmt.Errorf("--from must be start or end, not %q", c.from)
	}
	return nil
}
