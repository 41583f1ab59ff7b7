package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/weir-io/weir/test/chaos"
)

// errViolations makes `weir chaos` exit non-zero when the checker found a violation.
var errViolations = errors.New("chaos: the checker found violations")

func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("weir chaos", flag.ContinueOnError)
	cfg := chaos.DefaultConfig()
	cfg.BindFlags(fs)
	logLevel := fs.String("log-level", "warn", "log level of the tool itself (the cluster logs to its directory)")
	replot := fs.String("plot-report", "", "draw the --png timeline of a report saved with --json, and do nothing else")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: weir chaos [flags]

Runs a cluster of separate processes (3 controllers, 3 brokers in zones a, b, c) — or
attaches to one with --bootstrap and the --*-cmd flags — drives a verified load
(idempotent producers over every partition, a consumer group and rack-aware consumers),
injects faults (--fault KIND[:ARG]@OFFSET, repeatable, or --random), prints a progress line
every --interval and a report per fault (unavailability per partition, detection, time to a
new leader, latency, the consumer group's pause and rebalances), checks every acked record
at the end and exits non-zero on any violation (lost, duplicated, an offset with two
values, a group resuming away from its commit). --json prints the report as JSON (the
text report then goes to stderr); --png draws a timeline.

The report ends with issue 22's figures, each beside its target with PASS or FAIL
("targets" in the JSON): (1) kill: first acked write after the kill, p99 <= 1 s; (2)
pause: first acked write after the pause (served elsewhere), p99 <= 1.5 s; (3)
rolling-restart and the balancer's moves back to returned brokers: the longest wait of
a write of a moved partition for its ack, p99 <= 150 ms; (4)
controller-leader-kill: ack p99 in the fault's window <= 2 x the baseline ack p99; (5)
any fault that takes brokers out and back: the time from their return (listed in
Metadata again) to the leaders being spread (every listed broker leading at least its
share less the balancer's hysteresis, max(1, 10%)) <= 10 s.

Faults: kill, kill-many, pause, controller-leader-kill, rolling-restart, isolate;
storage-freeze, storage-slow, storage-error (--fsx or --fsx-control); zone-outage,
zone-partition (own cluster); coordinator-move (move the load group's coordinator, its
__consumer_offsets partition, gracefully to broker ARG or another; attached, it needs
--controllers) and coordinator-kill (SIGKILL the group's coordinator, found with
FindCoordinator, and start it again after --restart-after); with --txn,
txn-coordinator-kill (the same for the first transactional writer's coordinator),
txn-leader-kill (a writer of its own adds partitions and produces; the leader of one of
them is SIGKILLed before its commit, started again after --restart-after) and
txn-producer-pause (a writer of its own stops mid-transaction past its 3 s transaction
timeout, then commits: the commit must fail, its records stay invisible, and its next
transactions must commit).

--txn adds transactional writers (--txn-writers, each its own transactional id) to the
topic TOPIC-txn: each loops begin, --txn-records records, commit, or abort one
transaction in five on purpose, keeping each outcome as the client saw it (committed,
aborted, unknown: an error). At the end a read_committed reader checks every committed
transaction is there exactly once, no aborted one (nor any never asked to commit) is
visible, and each unknown one is all there or all absent; the counts and violations go
in the report ("txn" in the JSON), and a violation fails the run. Beside them a
consume-transform-produce writer (a GroupTransactSession) copies TOPIC-txn-in, fed
through the run, to TOPIC-txn-out, committing its input offsets in each transaction; at
the end it drains the input and the check requires, per input partition, the records
below the committed offset in the output exactly once, none above, and the committed
offset at the input's end ("ctp" in the JSON).

The group's pause per fault (group_pause) is the longest time between two reads of the
consumer group in the fault's window, to the millisecond; it cannot be shorter than the
time between reads outside faults (baseline_group_gap, printed with the baseline: at a
low --rate, the time between records). group_rebalances counts the group's new
generations in the window (OnPartitionsAssigned after a member's first, revocations,
losses).

Examples:
  weir chaos --duration 2m --fault kill@20s --fault pause@50s --fault rolling-restart@80s
  weir chaos --partitions 1000 --rate 5000 --random --seed 7 --duration 10m --png chaos.png
  weir chaos --duration 70s --fault coordinator-move@20s --fault coordinator-kill@40s
  weir chaos --duration 60s --txn --fault kill@15s --fault txn-coordinator-kill@35s
  weir chaos --duration 60s --txn --fault txn-leader-kill@15s --fault txn-producer-pause@35s
  weir chaos --bootstrap b1:9092,b2:9092,b3:9092 --kill-cmd 'ssh b{id} sudo systemctl kill -s KILL weir' \
    --start-cmd 'ssh b{id} sudo systemctl start weir' --fault kill:2@30s

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *replot != "" {
		b, err := os.ReadFile(*replot)
		if err != nil {
			return err
		}
		var r chaos.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("chaos: %s: %w", *replot, err)
		}
		if cfg.PNG == "" {
			return errors.New("chaos: --plot-report needs --png")
		}
		return r.WritePNG(cfg.PNG)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	out := os.Stdout
	if cfg.JSON {
		out = os.Stderr
	}
	r, err := chaos.Run(ctx, cfg, out, log)
	if err != nil {
		return err
	}
	if cfg.JSON {
		r.WriteText(out) // the text report too, on stderr with the progress
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		r.WriteText(out)
	}
	if !r.OK {
		return errViolations
	}
	return nil
}
