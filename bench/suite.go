package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// `weir bench suite` runs issue 14's measurements one after another and prints one
// table: each figure beside the physical limit it is judged against, as a ratio, with
// the target and a pass/fail mark. It orchestrates the other modes (produce, e2e,
// disk) against processes of this binary; the figures other commands measure (partition
// scaling, cold reads) are run by name.

// SuiteConfig is the configuration of `weir bench suite`.
type SuiteConfig struct {
	Bin, Dir      string
	Keep, JSON    bool
	Quick         bool
	Warmup        time.Duration
	Duration      time.Duration
	RecordSize    int
	Partitions    int // standalone topic
	Producers     int
	E2EPartitions int
	E2ERate       float64 // 0: the standalone fixed rate
	Skip          string  // comma-separated steps not to run
	ScaleCmd      string
	ColdCmd       string
	Verbose       bool
}

// Suite steps, in the order they run.
const (
	stepClosed = "closed"
	stepFixed  = "fixed"
	stepScale  = "scale"
	stepE2E    = "e2e"
	stepCold   = "cold"
)

// DefaultScaleCmd is the partition-scaling benchmark the suite calls by name
// (cluster/scale_bench_test.go: 100 and 10,000 partitions on an in-process 3+3 cluster).
const DefaultScaleCmd = "go test ./cluster/ -run '^$' -bench BenchmarkScale -benchtime 1x -timeout 15m"

// DefaultColdCmd is the cold-read benchmark (cluster/tier_bench_test.go on MinIO, its
// own defaults: 512 MiB, the best of several fetch settings), run from the module root;
// its output's coldread_MBps and rawget1_MBps become a row. QuickColdCmd is the --quick
// variant: 128 MiB, one setting.
const (
	DefaultColdCmd = "go test ./cluster/ -run '^$' -bench TierColdRead -benchtime 1x -timeout 15m"
	QuickColdCmd   = "WEIR_BENCH_MB=128 WEIR_BENCH_FETCH=64/4 WEIR_BENCH_WARMUP=1 " + DefaultColdCmd
)

// DefaultSuiteConfig is the full run (`make bench`, about 4 minutes on 2 cores).
func DefaultSuiteConfig() SuiteConfig {
	self, _ := os.Executable()
	return SuiteConfig{Bin: self, Warmup: 5 * time.Second, Duration: 30 * time.Second, RecordSize: 1024,
		Partitions: 8, Producers: 4, E2EPartitions: 12, ScaleCmd: DefaultScaleCmd, ColdCmd: DefaultColdCmd}
}

// BindFlags binds the suite's flags on fs.
func (c *SuiteConfig) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Bin, "weir", c.Bin, "the weir binary to run brokers and clusters with")
	fs.StringVar(&c.Dir, "dir", c.Dir, "directory for data and logs (default: a temporary one, removed afterwards unless --keep)")
	fs.BoolVar(&c.Keep, "keep", c.Keep, "keep the data directory and logs")
	fs.BoolVar(&c.JSON, "json", c.JSON, "print the rows and the raw results as one JSON object to stdout (progress goes to stderr)")
	fs.BoolVar(&c.Quick, "quick", c.Quick, "about 2 minutes: 2s warmups, 10s runs, a smaller cold read (noisier; for before/after checks while working)")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "warmup of every load run (not measured)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measured time of every load run")
	fs.IntVar(&c.RecordSize, "record-size", c.RecordSize, "record value bytes")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the standalone broker's topics")
	fs.IntVar(&c.Producers, "producers", c.Producers, "idempotent producer clients of every load run")
	fs.IntVar(&c.E2EPartitions, "e2e-partitions", c.E2EPartitions, "partitions of the end-to-end topic on the 3+3 cluster")
	fs.Float64Var(&c.E2ERate, "e2e-rate", c.E2ERate, "records/s of the end-to-end run; 0 = the standalone fixed rate (half the limit)")
	fs.StringVar(&c.Skip, "skip", c.Skip, "comma-separated steps to leave out: closed, fixed, scale, e2e, cold")
	fs.StringVar(&c.ScaleCmd, "scale-cmd", c.ScaleCmd, "shell command of the partition-scaling benchmark ({weir} = the weir binary); empty = leave the row out")
	fs.StringVar(&c.ColdCmd, "cold-cmd", c.ColdCmd, "shell command of the cold-read benchmark, run in the module root; it must print coldread_MBps and rawget1_MBps metrics; empty = leave the row out")
	fs.BoolVar(&c.Verbose, "v", c.Verbose, "show the progress lines of every run")
}

// Validate checks the configuration.
func (c *SuiteConfig) Validate() error {
	if c.Bin == "" {
		return errors.New("weir bench suite: --weir is empty")
	}
	if c.Warmup < 0 || c.Duration <= 0 {
		return errors.New("weir bench suite: --warmup must be >= 0 and --duration > 0")
	}
	if c.RecordSize < 16 || c.Partitions < 1 || c.Producers < 1 || c.E2EPartitions < 1 || c.E2ERate < 0 {
		return errors.New("weir bench suite: --record-size >= 16, --partitions, --producers, --e2e-partitions >= 1 and --e2e-rate >= 0 needed")
	}
	for _, s := range strings.Split(c.Skip, ",") {
		switch strings.TrimSpace(s) {
		case "", stepClosed, stepFixed, stepScale, stepE2E, stepCold:
		default:
			return fmt.Errorf("weir bench suite: unknown step %q in --skip", s)
		}
	}
	return nil
}

func (c *SuiteConfig) skips(step string) bool {
	for _, s := range strings.Split(c.Skip, ",") {
		if strings.TrimSpace(s) == step {
			return true
		}
	}
	return false
}

// SuiteResult is what `weir bench suite --json` prints.
type SuiteResult struct {
	StartedAt time.Time          `json:"started_at"`
	Machine   Machine            `json:"machine"`
	Commit    string             `json:"commit,omitempty"`
	Rows      []SuiteRow         `json:"rows"`
	FixedRate float64            `json:"fixed_rate_records_per_s,omitempty"`
	RateBasis string             `json:"fixed_rate_basis,omitempty"`
	Runs      map[string]*Result `json:"runs"`
	Outputs   map[string]string  `json:"outputs,omitempty"`
}

// Machine describes where the suite ran.
type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	Kernel string `json:"kernel"`
	Disk   string `json:"disk"`
}

func runSuite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultSuiteConfig()
	fs := flag.NewFlagSet("weir bench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: weir bench suite [flags]

Runs the performance suite (issues 14 and 27) and prints one table, each figure beside
its physical limit (or the issue's target) as a ratio, with the target and pass/fail:
  closed  closed-loop produce on a standalone broker (a separate process): MB/s per
          broker CPU core (CPU seconds from /proc/<pid>/stat)
  fixed   the disk's limit (write+fdatasync of the average batch, weir bench disk), then
          produce at half of it (or of the closed-loop MB/s if lower): client ack
          p50/p99/p99.9 and the broker's own Produce p99 (its request-duration histogram)
          beside the raw fdatasync p50/p99 measured in the same run
  scale   100 vs 10,000 partitions produce p99: runs --scale-cmd
  e2e     3 controllers + 3 brokers as processes (zones a, b, c), weir bench e2e at the
          fixed rate: end-to-end p99 beside produce p99 of the same run; from the
          brokers' counters over the measured window: S3 PUTs per GB produced and the
          WAL's held bytes as seconds of produce. Then a shorter run with the clients in
          zone b (zone routing, a consumer on b's read replicas): its e2e p99 and the WAL
          file system's reads per produced byte
  cold    cold reads from objects beside one raw GET stream, PUTs per GB of its closed-loop
          produce and GETs per GB of cold read: runs --cold-cmd
A shared or busy machine makes every figure worse; compare runs made back to back.

Flags:
`)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if cfg.Quick {
		if !explicit["warmup"] {
			cfg.Warmup = 2 * time.Second
		}
		if !explicit["duration"] {
			cfg.Duration = 10 * time.Second
		}
		if !explicit["cold-cmd"] {
			cfg.ColdCmd = QuickColdCmd
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("weir bench suite: unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	out := stdout
	if cfg.JSON {
		out = stderr
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "weir-suite-")
		if err != nil {
			return err
		}
		cfg.Dir = d
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
	}
	s := &suite{cfg: cfg, out: out, res: &SuiteResult{StartedAt: time.Now().UTC(), Runs: map[string]*Result{}, Outputs: map[string]string{}}}
	s.res.Machine = machine(cfg.Dir)
	s.res.Commit = commit()
	err := s.run(ctx)
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(s.res); jerr != nil {
			return errors.Join(err, jerr)
		}
	}
	{ // the table goes with the progress (stderr under --json): people read it either way
		fmt.Fprintf(out, "\n== weir bench suite, %s, commit %s\n   %d CPUs (%s), kernel %s, disk %s\n",
			s.res.StartedAt.Format(time.RFC3339), s.res.Commit, s.res.Machine.CPUs, s.res.Machine.CPU, s.res.Machine.Kernel, s.res.Machine.Disk)
		if s.res.FixedRate > 0 {
			fmt.Fprintf(out, "   fixed rate %s rec/s of %d B (%s)\n", Commas(int64(s.res.FixedRate)), cfg.RecordSize, s.res.RateBasis)
		}
		fmt.Fprintln(out)
		printSuiteTable(out, s.res.Rows)
	}
	if err != nil {
		fmt.Fprintf(out, "logs: %s (removed unless --keep)\n", cfg.Dir)
	}
	return err
}

type suite struct {
	cfg SuiteConfig
	out io.Writer
	res *SuiteResult

	closedMBps float64
}

func (s *suite) add(rows ...SuiteRow) { s.res.Rows = append(s.res.Rows, rows...) }

func (s *suite) step(format string, a ...any) {
	fmt.Fprintf(s.out, "-- %s: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

// bench runs one `weir bench` mode in this process and returns its JSON result.
func (s *suite) bench(ctx context.Context, name string, args ...string) (*Result, error) {
	var buf bytes.Buffer
	progress := io.Discard
	if s.cfg.Verbose {
		progress = s.out
	}
	args = append(args, "--json")
	if err := Main(ctx, args, &buf, progress); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var res Result
	if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s: decoding its result: %w", name, err)
	}
	s.res.Runs[name] = &res
	return &res, nil
}

func (s *suite) loadArgs(mode, bootstrap, topic string, partitions int, rate float64) []string {
	return []string{mode, "--bootstrap", bootstrap, "--topic", topic, "--partitions", strconv.Itoa(partitions),
		"--record-size", strconv.Itoa(s.cfg.RecordSize), "--producers", strconv.Itoa(s.cfg.Producers),
		"--rate", strconv.FormatFloat(rate, 'f', 0, 64), "--warmup", s.cfg.Warmup.String(), "--duration", s.cfg.Duration.String()}
}

func (s *suite) run(ctx context.Context) error {
	var errs []error
	if !s.cfg.skips(stepClosed) || !s.cfg.skips(stepFixed) {
		if err := s.standalone(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if !s.cfg.skips(stepScale) && s.cfg.ScaleCmd != "" {
		s.scale(ctx)
	}
	if !s.cfg.skips(stepE2E) && ctx.Err() == nil {
		if err := s.e2e(ctx); err != nil {
			errs = append(errs, err)
			s.add(notRun("e2e p99 (3+3 cluster)", "failed: "+err.Error()))
		}
	}
	if !s.cfg.skips(stepCold) && s.cfg.ColdCmd != "" && ctx.Err() == nil {
		s.cold(ctx)
	}
	return errors.Join(errs...)
}
