package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// `weir bench failover` measures what users measure with chaos tests: how long a dead
// broker's partitions stay unwritable. It runs 3 controllers and 3 brokers as separate
// processes of this binary (zones a, b, c, a shared WAL root and object directory), fills
// the WAL of one broker with a tail that is not uploaded to object storage yet, keeps
// writing to every partition of that broker, SIGKILLs it and times, per partition, the
// way back: detection (the controller fences the broker and plans the takeover in one
// Raft command), recovery (a taker seals the dead WAL, scans its tail once and records
// where each partition's data ends), serving (the first produce acked afterwards). Then
// it moves partitions gracefully and times those moves.

type failoverConfig struct {
	bin        string
	dir        string
	keep       bool
	partitions int
	tailMiB    int
	recordSize int
	probeEvery time.Duration
	moves      int
	timeout    time.Duration
	json       bool
	fsx        string // the lab file system's profile for the WAL root ("": a plain directory)
	phases     string
	sample     int
	baseline   time.Duration
	stopFor    time.Duration
	ctlWindow  time.Duration
	spreadWait time.Duration
}

// The phases of a run, in the order they run.
const (
	phaseKill       = "kill"       // SIGKILL of the broker leading most partitions (target 1)
	phaseMove       = "move"       // graceful moves (target 3)
	phaseRestart    = "restart"    // the killed broker starts again: leaders spread (target 5)
	phaseStop       = "stop"       // SIGSTOP of a broker, SIGCONT after --stop-for (target 2)
	phaseController = "controller" // SIGKILL of the controller leader, started again (target 4)
)

var allPhases = []string{phaseKill, phaseMove, phaseRestart, phaseStop, phaseController}

func failoverFlags(cfg *failoverConfig, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("weir bench failover", flag.ContinueOnError)
	fs.SetOutput(out)
	self, _ := os.Executable()
	fs.StringVar(&cfg.bin, "weir", self, "the weir binary to run the cluster with")
	fs.StringVar(&cfg.dir, "dir", "", "directory for the cluster's data and logs (default: a temporary one, removed afterwards)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the data directory and logs")
	fs.IntVar(&cfg.partitions, "partitions", 1000, "partitions of the measured topic (a third lead on the killed broker)")
	fs.IntVar(&cfg.tailMiB, "tail-mib", 256, "MiB written to the killed broker's partitions before the kill (not uploaded to objects: the WAL tail the takers read)")
	fs.IntVar(&cfg.recordSize, "record-size", 16<<10, "bytes per record of the tail")
	fs.DurationVar(&cfg.probeEvery, "probe-interval", 50*time.Millisecond, "pause between an ack and the next write of a partition's probe (the resolution of the measurement)")
	fs.IntVar(&cfg.moves, "moves", 100, "partitions moved gracefully, all requested at once (0: no move phase)")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up waiting for a partition after this long")
	fs.BoolVar(&cfg.json, "json", false, "print the result as JSON")
	fs.StringVar(&cfg.fsx, "fsx", "", "serve the WAL root through the lab's FSx-like FUSE file system (test/nfsfs) with this profile (fsx, local), one mount per broker; needs root and /dev/fuse")
	fs.StringVar(&cfg.phases, "phases", strings.Join(allPhases, ","), "phases to run, comma-separated, in this order: kill, move, restart (needs kill), stop, controller")
	fs.IntVar(&cfg.sample, "probe-sample", 100, "partitions (spread over the topic) probed for the baseline ack latency and the controller phase")
	fs.DurationVar(&cfg.baseline, "baseline", 3*time.Second, "how long the baseline ack latency is measured, before any fault")
	fs.DurationVar(&cfg.stopFor, "stop-for", 4*time.Second, "how long the stop phase keeps a broker SIGSTOPped")
	fs.DurationVar(&cfg.spreadWait, "spread-timeout", 30*time.Second, "how long the restart phase waits for leaders to spread once the broker is back")
	fs.DurationVar(&cfg.ctlWindow, "controller-window", 5*time.Second, "how long after the controller leader's SIGKILL acks are watched")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: weir bench failover [flags]

Runs a cluster of separate processes (3 controllers, 3 brokers in zones a, b, c) and times,
with probes that write one small record per partition every --probe-interval (acks=all):

  baseline    the ack latency before any fault (--probe-sample partitions)
  kill        fills one broker's WAL with --tail-mib MiB not uploaded yet, SIGKILLs it: per
              partition, kill → first acked write, with detection, recovery, serving
  move        --moves of those partitions moved gracefully at once: per partition, the
              longest pause between acked writes from the last ack before the request to
              the first ack at the new leader
  restart     the killed broker starts again: time until leaders are spread (each active
              broker leads at least 90% of its share of the topic's partitions)
  stop        SIGSTOP of the broker leading most partitions for --stop-for, then SIGCONT:
              per partition, stop → the ack of the first write sent after it
  controller  SIGKILL of the controller leader, started again at once: the longest ack
              latency in --controller-window against twice the baseline p99

and prints each figure of issue 22 beside its target, with PASS or FAIL.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// FailoverResult is what `weir bench failover --json` prints.
type FailoverResult struct {
	Partitions    int           `json:"partitions"`
	ProbeInterval Duration      `json:"probe_interval"`
	Phases        []string      `json:"phases"`
	Baseline      Quantiles     `json:"baseline_ack_latency"` // before any fault
	Targets       []Target      `json:"targets"`
	Kill          *KillResult   `json:"kill,omitempty"`
	Move          *MoveResult   `json:"move,omitempty"`
	Restart       *SpreadResult `json:"restart,omitempty"`
	Stop          *StopResult   `json:"stop,omitempty"`
	Controller    *CtlResult    `json:"controller,omitempty"`

	// The kill phase's figures at the top level, as before the phases (scripts read them).
	Victim           int32     `json:"victim"`
	VictimPartitions int       `json:"victim_partitions"`
	TailBytes        int64     `json:"tail_bytes"`
	Unavailability   Quantiles `json:"unavailability"`
	Unfinished       int       `json:"unfinished,omitempty"`
	DeadWALBytesRead int64     `json:"dead_wal_bytes_read"`
	TakerWALBytes    int64     `json:"taker_wal_bytes_written"`
	Moves            int       `json:"moves"`
	FillMBps         float64   `json:"fill_mb_per_s"`
}

// KillResult is the kill phase: SIGKILL of the broker leading most partitions.
type KillResult struct {
	Unavailability  Quantiles `json:"unavailability"` // kill → first acked write
	Detection       Duration  `json:"detection"`
	Recovery        Quantiles `json:"recovery"`
	Serving         Quantiles `json:"serving"`
	TakerSeal       Duration  `json:"taker_seal"`
	TakerScan       Duration  `json:"taker_scan"`
	TakerComplete   Duration  `json:"taker_complete"`
	TakerProbeBytes int64     `json:"taker_probe_bytes_acked"`
}

// MoveResult is the move phase: Moves partitions moved gracefully, requested at once.
type MoveResult struct {
	Moves int `json:"moves"`
	// Switch: request → the new leader in the metadata (the bench's controller client).
	Switch Quantiles `json:"switch"`
	// Serve: request → the first ack at the new leader (offset at or past its log range's start).
	Serve Quantiles `json:"serve"`
	// Pause: the longest time between consecutive acks, from the last ack before the
	// request to the first ack at the new leader (target 3).
	Pause      Quantiles `json:"pause"`
	Unfinished int       `json:"unfinished,omitempty"`
}

// SpreadResult is the restart phase.
type SpreadResult struct {
	Broker int32 `json:"broker"`
	// MinLeaders is what "spread" means: every active broker leads at least this many of
	// the topic's partitions (90% of partitions / active brokers, rounded up).
	MinLeaders int      `json:"min_leaders"`
	Registered Duration `json:"registered"` // start → active in the metadata
	Spread     Duration `json:"spread"`     // active → spread (target 5)
	FromStart  Duration `json:"spread_from_start"`
	Done       bool     `json:"done"`
	Leaders    []int    `json:"leaders_at_end"` // per broker ID, from 1
}

// StopResult is the stop phase.
type StopResult struct {
	Broker     int32    `json:"broker"`
	StoppedFor Duration `json:"stopped_for"`
	// Elsewhere is SIGSTOP → the partition served by another broker (the metadata names
	// another active leader, done recovering): target 2. NotElsewhere counts partitions
	// not served elsewhere before the SIGCONT.
	Elsewhere    Quantiles `json:"served_elsewhere"`
	NotElsewhere int       `json:"not_elsewhere,omitempty"`
	// Unavailability is SIGSTOP → the ack of the first write sent after it: the client
	// also waits for its request in flight on the paused broker's connection, which
	// nothing answers or closes until the SIGCONT (franz-go's request timeout).
	Unavailability Quantiles `json:"unavailability"`
	Unfinished     int       `json:"unfinished,omitempty"`
}

// CtlResult is the controller phase.
type CtlResult struct {
	Killed int32     `json:"killed"`
	Before Quantiles `json:"ack_latency_before"` // just before the kill
	Window Quantiles `json:"ack_latency_window"` // writes sent in the window
	Stall  Duration  `json:"longest_ack_latency"`
	// Gap is the longest time in the window without an ack of any probed partition
	// (GapBefore: in the second before the kill): a pause of every partition at once.
	Gap        Duration `json:"longest_ack_gap"`
	GapBefore  Duration `json:"longest_ack_gap_before"`
	Leader     int32    `json:"new_leader"`
	Partitions int      `json:"partitions"`
}

// Target is one figure of issue 22 beside its limit.
type Target struct {
	ID     int      `json:"id"`
	Figure string   `json:"figure"`
	Value  Duration `json:"value"`
	Limit  Duration `json:"limit"`
	Pass   bool     `json:"pass"`
	Ran    bool     `json:"ran"`
	Note   string   `json:"note,omitempty"`
}

// Duration prints as a Go duration in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
func (d Duration) String() string               { return time.Duration(d).Round(time.Millisecond).String() }

// Quantiles summarises durations.
type Quantiles struct {
	N   int      `json:"n"`
	P50 Duration `json:"p50"`
	P99 Duration `json:"p99"`
	Max Duration `json:"max"`
	of  string   // what N counts (default partitions)
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Quantiles{N: len(s), P50: Duration(at(0.5)), P99: Duration(at(0.99)), Max: Duration(s[len(s)-1])}
}

func (q Quantiles) String() string {
	of := q.of
	if of == "" {
		of = "partitions"
	}
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d %s)", q.P50, q.P99, q.Max, q.N, of)
}

func runFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := &failoverConfig{}
	fs := failoverFlags(cfg, stderr)
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
	if cfg.partitions < 3 || cfg.tailMiB < 0 || cfg.recordSize < 100 || cfg.probeEvery <= 0 {
		return errors.New("weir bench failover: need --partitions >= 3, --tail-mib >= 0, --record-size >= 100, --probe-interval > 0")
	}
	if _, err := parsePhases(cfg.phases); err != nil {
		return err
	}
	out := stdout
	if cfg.json {
		out = stderr
	}
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "weir-failover-")
		if err != nil {
			return err
		}
		cfg.dir = d
		if !cfg.keep {
			defer os.RemoveAll(d)
		}
	}
	res, err := failover(ctx, cfg, out)
	if err != nil {
		fmt.Fprintf(out, "logs: %s\n", cfg.dir)
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printFailover(out, res)
	return nil
}

func printFailover(w io.Writer, r *FailoverResult) {
	fmt.Fprintf(w, "\nbaseline ack latency before any fault: %v\n", r.Baseline)
	if k := r.Kill; k != nil {
		fmt.Fprintf(w, "kill: SIGKILL of broker %d leading %d of %d partitions, %.0f MiB of WAL tail not in objects\n",
			r.Victim, r.VictimPartitions, r.Partitions, float64(r.TailBytes)/(1<<20))
		fmt.Fprintf(w, "  unavailability (kill → first acked write)   %v\n", k.Unavailability)
		fmt.Fprintf(w, "    detection (kill → fenced, plan in the same command)  %v\n", k.Detection)
		fmt.Fprintf(w, "    recovery (fenced → recovered in the metadata)        %v\n", k.Recovery)
		fmt.Fprintf(w, "    serving (recovered → first acked write)              %v\n", k.Serving)
		fmt.Fprintf(w, "  takers, summed over their passes: seal %v, scan %v, complete %v\n", k.TakerSeal, k.TakerScan, k.TakerComplete)
		fmt.Fprintf(w, "  bytes read from the dead WAL: %.1f MiB; written to the takers' WALs meanwhile: %.1f MiB (of which probe records acked: %.1f MiB): nothing copied\n",
			float64(r.DeadWALBytesRead)/(1<<20), float64(r.TakerWALBytes)/(1<<20), float64(k.TakerProbeBytes)/(1<<20))
		if r.Unfinished > 0 {
			fmt.Fprintf(w, "  %d partitions never acked a write again before the timeout\n", r.Unfinished)
		}
		fmt.Fprintf(w, "  (fill: %.0f MB/s)\n", r.FillMBps)
	}
	if m := r.Move; m != nil {
		fmt.Fprintf(w, "move: %d partitions moved gracefully, requested at once\n", m.Moves)
		fmt.Fprintf(w, "  request → new leader in the metadata          %v\n", m.Switch)
		fmt.Fprintf(w, "  request → first ack at the new leader         %v\n", m.Serve)
		fmt.Fprintf(w, "  longest pause between acked writes            %v\n", m.Pause)
		fmt.Fprintf(w, "    (from the last ack before the request to the first ack at the new leader; writes every %v)\n", r.ProbeInterval)
		if m.Unfinished > 0 {
			fmt.Fprintf(w, "  %d partitions never acked a write at the new leader before the timeout\n", m.Unfinished)
		}
	}
	if s := r.Restart; s != nil {
		fmt.Fprintf(w, "restart: broker %d started again: active in the metadata after %v; it leads its share again (>= %d) %v later (%v after the start)\n",
			s.Broker, s.Registered, s.MinLeaders, s.Spread, s.FromStart)
		fmt.Fprintf(w, "  leaders per broker at the end: %v\n", s.Leaders)
	}
	if s := r.Stop; s != nil {
		fmt.Fprintf(w, "stop: SIGSTOP of broker %d for %v, then SIGCONT\n", s.Broker, s.StoppedFor)
		fmt.Fprintf(w, "  stop → served by another broker (metadata)    %v\n", s.Elsewhere)
		fmt.Fprintf(w, "  stop → first acked write                      %v\n", s.Unavailability)
		fmt.Fprintf(w, "    (a write in flight to the paused broker waits for its request timeout, or for the SIGCONT)\n")
		if s.Unfinished > 0 {
			fmt.Fprintf(w, "  %d partitions never acked a write again before the timeout\n", s.Unfinished)
		}
	}
	if c := r.Controller; c != nil {
		fmt.Fprintf(w, "controller: SIGKILL of the controller leader %d (started again at once; new leader %d), %d partitions probed\n", c.Killed, c.Leader, c.Partitions)
		fmt.Fprintf(w, "  ack latency just before                       %v\n", c.Before)
		fmt.Fprintf(w, "  ack latency of writes in the window           %v\n", c.Window)
		fmt.Fprintf(w, "  longest ack latency in the window             %v\n", c.Stall)
		fmt.Fprintf(w, "  longest time without any ack: before %v, in the window %v\n", c.GapBefore, c.Gap)
	}
	fmt.Fprintf(w, "\nissue 22 targets (probes write every %v)\n", r.ProbeInterval)
	for _, t := range r.Targets {
		mark, val := "skipped", "-"
		if t.Ran {
			mark, val = "FAIL", t.Value.String()
			if t.Pass {
				mark = "PASS"
			}
		}
		fmt.Fprintf(w, "  (%d) %-58s %9s  <= %-8v %s", t.ID, t.Figure, val, t.Limit, mark)
		if t.Note != "" {
			fmt.Fprintf(w, "  (%s)", t.Note)
		}
		fmt.Fprintln(w)
	}
}

// targets judges the figures against issue 22's targets.
func targets(r *FailoverResult) []Target {
	t1 := Target{ID: 1, Figure: "SIGKILL → first acked write, p99", Limit: Duration(time.Second)}
	if k := r.Kill; k != nil {
		t1.Ran, t1.Value = true, k.Unavailability.P99
		t1.Pass = r.Unfinished == 0 && k.Unavailability.P99 <= t1.Limit
		t1.Note = fmt.Sprintf("%d partitions", k.Unavailability.N)
	}
	t2 := Target{ID: 2, Figure: "SIGSTOP → served by another broker, p99", Limit: Duration(1500 * time.Millisecond)}
	if s := r.Stop; s != nil {
		t2.Ran, t2.Value = true, s.Elsewhere.P99
		t2.Pass = s.NotElsewhere == 0 && s.Elsewhere.P99 <= t2.Limit
		t2.Note = fmt.Sprintf("%d partitions, stopped %v; first ack of a write sent after the stop p99 %v", s.Elsewhere.N, s.StoppedFor, s.Unavailability.P99)
	}
	t3 := Target{ID: 3, Figure: "graceful move: longest pause between acked writes, p99", Limit: Duration(150 * time.Millisecond)}
	if m := r.Move; m != nil {
		t3.Ran, t3.Value = true, m.Pause.P99
		t3.Pass = m.Unfinished == 0 && m.Pause.P99 <= t3.Limit
		t3.Note = fmt.Sprintf("%d moves at once", m.Moves)
	}
	t4 := Target{ID: 4, Figure: "controller leader SIGKILL: ack p99 of writes in the window", Limit: 2 * r.Baseline.P99}
	if c := r.Controller; c != nil {
		// The baseline is the ack p99 just before the kill (the same cluster, the same
		// moment), or before any fault if that was higher.
		t4.Limit = 2 * max(r.Baseline.P99, c.Before.P99)
		t4.Ran, t4.Value = true, c.Window.P99
		t4.Pass = c.Window.P99 <= t4.Limit
		t4.Note = fmt.Sprintf("limit: twice the ack p99 just before %v; longest time without any ack %v (before %v), longest ack %v", c.Before.P99, c.Gap, c.GapBefore, c.Stall)
	}
	t5 := Target{ID: 5, Figure: "broker back (active) → leads its share again", Limit: Duration(10 * time.Second)}
	if s := r.Restart; s != nil {
		t5.Ran, t5.Value = true, s.Spread
		t5.Pass = s.Done && s.Spread <= t5.Limit
		t5.Note = fmt.Sprintf("the returned broker leads >= %d; leaders per broker at the end %v", s.MinLeaders, s.Leaders)
		if !s.Done {
			t5.Note += ", never spread"
		}
	}
	return []Target{t1, t2, t3, t4, t5}
}

// parsePhases checks a --phases list.
func parsePhases(list string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("weir bench failover: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
		out[p] = true
	}
	if out[phaseRestart] && !out[phaseKill] {
		return nil, errors.New("weir bench failover: the restart phase needs the kill phase")
	}
	return out, nil
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
