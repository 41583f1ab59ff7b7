package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/test/nfsfs"
	"github.com/weir-io/weir/test/proccluster"
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
}

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
	fs.DurationVar(&cfg.probeEvery, "probe-interval", 50*time.Millisecond, "pause between two writes of a partition's probe (the resolution of the measurement)")
	fs.IntVar(&cfg.moves, "moves", 100, "partitions moved gracefully after the failover (0: none)")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up waiting for a partition after this long")
	fs.BoolVar(&cfg.json, "json", false, "print the result as JSON")
	fs.StringVar(&cfg.fsx, "fsx", "", "serve the WAL root through the lab's FSx-like FUSE file system (test/nfsfs) with this profile (fsx, local), one mount per broker; needs root and /dev/fuse")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: weir bench failover [flags]

Runs a cluster of separate processes (3 controllers, 3 brokers in zones a, b, c), fills one
broker's WAL with --tail-mib MiB that is not uploaded yet, writes to each of its partitions
every --probe-interval, SIGKILLs it, and reports per partition the time from the kill to
the first acked write (unavailability) and its phases: detection, recovery, serving; the
bytes the takers read from the dead WAL and wrote to their own; then the same for
--moves graceful moves.

Flags:
`)
		fs.PrintDefaults()
	}
	return fs
}

// FailoverResult is what `weir bench failover --json` prints.
type FailoverResult struct {
	Partitions       int        `json:"partitions"`
	Victim           int32      `json:"victim"`
	VictimPartitions int        `json:"victim_partitions"`
	TailBytes        int64      `json:"tail_bytes"`
	Unavailability   Quantiles  `json:"unavailability"`
	Detection        Duration   `json:"detection"`
	Recovery         Quantiles  `json:"recovery"`
	Serving          Quantiles  `json:"serving"`
	TakerSeal        Duration   `json:"taker_seal"`
	TakerScan        Duration   `json:"taker_scan"`
	TakerComplete    Duration   `json:"taker_complete"`
	DeadWALBytesRead int64      `json:"dead_wal_bytes_read"`
	TakerWALBytes    int64      `json:"taker_wal_bytes_written"`
	TakerProbeBytes  int64      `json:"taker_probe_bytes_acked"`
	Moves            int        `json:"moves"`
	MoveTime         *Quantiles `json:"move_time,omitempty"`
	MoveWritePause   *Quantiles `json:"move_write_pause,omitempty"`
	Unfinished       int        `json:"unfinished,omitempty"`
	FillMBps         float64    `json:"fill_mb_per_s"`
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
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d partitions)", q.P50, q.P99, q.Max, q.N)
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
	fmt.Fprintf(w, "\nfailover: SIGKILL of broker %d leading %d of %d partitions, %.0f MiB of WAL tail not in objects\n",
		r.Victim, r.VictimPartitions, r.Partitions, float64(r.TailBytes)/(1<<20))
	fmt.Fprintf(w, "  unavailability (kill → first acked write)   %v\n", r.Unavailability)
	fmt.Fprintf(w, "    detection (kill → fenced, plan in the same command)  %v\n", r.Detection)
	fmt.Fprintf(w, "    recovery (fenced → recovered in the metadata)        %v\n", r.Recovery)
	fmt.Fprintf(w, "    serving (recovered → first acked write)              %v\n", r.Serving)
	fmt.Fprintf(w, "  takers, summed over their passes: seal %v, scan %v, complete %v\n", r.TakerSeal, r.TakerScan, r.TakerComplete)
	fmt.Fprintf(w, "  bytes read from the dead WAL: %.1f MiB; written to the takers' WALs meanwhile: %.1f MiB (of which probe records acked: %.1f MiB): nothing copied\n",
		float64(r.DeadWALBytesRead)/(1<<20), float64(r.TakerWALBytes)/(1<<20), float64(r.TakerProbeBytes)/(1<<20))
	if r.MoveTime != nil {
		fmt.Fprintf(w, "graceful moves of %d partitions\n", r.Moves)
		fmt.Fprintf(w, "  move (request → new leader in the metadata)   %v\n", *r.MoveTime)
		fmt.Fprintf(w, "  longest pause between acked writes            %v\n", *r.MoveWritePause)
	}
	if r.Unfinished > 0 {
		fmt.Fprintf(w, "  %d partitions never acked a write again before the timeout\n", r.Unfinished)
	}
	fmt.Fprintf(w, "  (fill: %.0f MB/s)\n", r.FillMBps)
}

// probe writes to a partition every interval and remembers when each write was acked.
type probe struct {
	mu   sync.Mutex
	acks map[int32][]time.Time
	size int64 // bytes acked
}

func (pr *probe) run(ctx context.Context, cl *kgo.Client, topic string, parts []int32, every time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("probe-" + time.Now().Format(time.RFC3339Nano))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err == nil {
					pr.mu.Lock()
					pr.acks[p] = append(pr.acks[p], time.Now())
					pr.size += int64(len(r.Value))
					pr.mu.Unlock()
				}
				select {
				case <-time.After(every):
				case <-ctx.Done():
				}
			}
		}()
	}
	return &wg
}

// firstAfter returns, per partition, the first ack after t (missing: none yet).
func (pr *probe) firstAfter(t time.Time) map[int32]time.Time {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := map[int32]time.Time{}
	for p, ts := range pr.acks {
		for _, at := range ts {
			if at.After(t) {
				out[p] = at
				break
			}
		}
	}
	return out
}

// maxPause returns, per partition, the longest time between consecutive acks in [from, to].
func (pr *probe) maxPause(from, to time.Time) map[int32]time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := map[int32]time.Duration{}
	for p, ts := range pr.acks {
		prev := from
		for _, at := range ts {
			if at.Before(from) {
				continue
			}
			if at.After(to) {
				break
			}
			out[p] = max(out[p], at.Sub(prev))
			prev = at
		}
	}
	return out
}

func failover(ctx context.Context, cfg *failoverConfig, out io.Writer) (*FailoverResult, error) {
	const topic = "failover"
	fmt.Fprintf(out, "starting 3 controllers and 3 brokers in %s\n", cfg.dir)
	tail := int64(cfg.tailMiB) << 20
	var model *nfsfs.Model
	if cfg.fsx != "" {
		p, ok := nfsfs.ProfileByName(cfg.fsx)
		if !ok {
			return nil, fmt.Errorf("bench: --fsx %q: want fsx or local", cfg.fsx)
		}
		model = nfsfs.NewModel(p)
		fmt.Fprintf(out, "WAL root on the lab file system: %v\n", p)
	}
	c, err := proccluster.Start(ctx, proccluster.Config{Bin: cfg.bin, Dir: cfg.dir, Controllers: 3, Brokers: 3, FSx: model,
		BrokerArgs: []string{
			// Nothing leaves the WAL during the measurement: the killed broker's tail is
			// all un-uploaded, as after a burst the uploader had not caught up with.
			"--upload-max-delay", "1h", "--upload-target-bytes", fmt.Sprint(1 << 30), "--upload-max-bytes", fmt.Sprint(1 << 30),
			"--wal-max-bytes", fmt.Sprint(max(8<<30, 4*tail)), "--wal-segment-bytes", fmt.Sprint(64 << 20),
		}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	meta, err := controller.NewClient(controller.ClientConfig{Controllers: c.ControllerAPIs(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer meta.Close()
	fast := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.RetryTimeout(cfg.timeout)}
	admCl, err := kgo.NewClient(fast...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, int32(cfg.partitions), 1, nil, topic); err != nil {
		return nil, fmt.Errorf("creating the topic: %w", err)
	}
	var view *metadata.View
	if err := waitFor(ctx, time.Minute, func() bool {
		view = meta.View()
		t := view.Topics[topic]
		if t == nil || len(t.Partitions) != cfg.partitions {
			return false
		}
		for _, p := range t.Partitions {
			if b, ok := view.Broker(p.Leader); !ok || !b.Active() {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("waiting for the topic's leaders: %w", err)
	}
	led := map[int32][]int32{}
	for _, p := range view.Topics[topic].Partitions {
		led[p.Leader] = append(led[p.Leader], p.Index)
	}
	victim := int32(1)
	for id, ps := range led {
		if len(ps) > len(led[victim]) || len(ps) == len(led[victim]) && id < victim {
			victim = id
		}
	}
	vparts := led[victim]
	res := &FailoverResult{Partitions: cfg.partitions, Victim: victim, VictimPartitions: len(vparts)}

	// The tail: records spread over the victim's partitions, acked (synced) before the kill.
	if tail > 0 {
		fill, err := kgo.NewClient(append(fast, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return nil, err
		}
		val := make([]byte, cfg.recordSize)
		start := time.Now()
		var wg sync.WaitGroup
		var ferr error
		var fmu sync.Mutex
		for n, i := int64(0), 0; n < tail; n, i = n+int64(cfg.recordSize), i+1 {
			wg.Add(1)
			fill.Produce(ctx, &kgo.Record{Topic: topic, Partition: vparts[i%len(vparts)], Value: val}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					fmu.Lock()
					ferr = err
					fmu.Unlock()
				}
			})
		}
		wg.Wait()
		fill.Close()
		if ferr != nil {
			return nil, fmt.Errorf("filling the tail: %w", ferr)
		}
		res.TailBytes = tail
		res.FillMBps = float64(tail) / 1e6 / time.Since(start).Seconds()
		fmt.Fprintf(out, "wrote %d MiB to broker %d's %d partitions at %.0f MB/s\n", cfg.tailMiB, victim, len(vparts), res.FillMBps)
	}

	probeCl, err := kgo.NewClient(append(fast, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.RecordRetries(1<<30), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, err
	}
	defer probeCl.Close()
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	pr := &probe{acks: map[int32][]time.Time{}}
	pwg := pr.run(pctx, probeCl, topic, vparts, cfg.probeEvery)
	warm := time.Now()
	if err := waitFor(ctx, time.Minute, func() bool { return len(pr.firstAfter(warm)) == len(vparts) }); err != nil {
		return nil, fmt.Errorf("probing every partition before the kill: %w", err)
	}
	time.Sleep(time.Second)

	var takers []*proccluster.Proc
	for _, b := range c.Brokers {
		if b.ID != victim {
			takers = append(takers, b)
		}
	}
	before := proccluster.ScrapeAll(takers)
	pr.mu.Lock()
	probeBytes0 := pr.size
	pr.mu.Unlock()

	fmt.Fprintf(out, "SIGKILL broker %d (%d partitions)\n", victim, len(vparts))
	kill := time.Now()
	c.Broker(victim).Kill()

	var fenced time.Time
	recovered := map[int32]time.Time{}
	want := map[int32]bool{}
	for _, p := range vparts {
		want[p] = true
	}
	deadline := time.Now().Add(cfg.timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v := meta.View()
		now := time.Now()
		if b, ok := v.Broker(victim); fenced.IsZero() && ok && !b.Active() {
			fenced = now
		}
		if t := v.Topics[topic]; t != nil {
			for _, p := range t.Partitions {
				if want[p.Index] && recovered[p.Index].IsZero() && p.Leader != victim && !p.Recovering {
					if b, ok := v.Broker(p.Leader); ok && b.Active() {
						recovered[p.Index] = now
					}
				}
			}
		}
		if len(pr.firstAfter(kill)) == len(vparts) && len(recovered) == len(vparts) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := time.Now()
	firsts := pr.firstAfter(kill)
	pr.mu.Lock()
	res.TakerProbeBytes = pr.size - probeBytes0
	pr.mu.Unlock()
	after := proccluster.ScrapeAll(takers)

	var un, rec, srv []time.Duration
	for _, p := range vparts {
		f, ok := firsts[p]
		if !ok {
			res.Unfinished++
			continue
		}
		un = append(un, f.Sub(kill))
		if r := recovered[p]; !r.IsZero() && !fenced.IsZero() {
			rec = append(rec, r.Sub(fenced))
			srv = append(srv, max(0, f.Sub(r)))
		}
	}
	res.Unavailability, res.Recovery, res.Serving = quantiles(un), quantiles(rec), quantiles(srv)
	if !fenced.IsZero() {
		res.Detection = Duration(fenced.Sub(kill))
	}
	delta := func(k string) float64 { return after[k] - before[k] }
	res.TakerSeal = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=seal}_sum") * float64(time.Second)))
	res.TakerScan = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=scan}_sum") * float64(time.Second)))
	res.TakerComplete = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=complete}_sum") * float64(time.Second)))
	res.DeadWALBytesRead = int64(delta("weir_broker_recovery_read_bytes_total"))
	res.TakerWALBytes = int64(delta("weir_wal_bytes_written_total"))
	fmt.Fprintf(out, "all %d partitions writable again %v after the kill\n", len(vparts)-res.Unfinished, done.Sub(kill).Round(time.Millisecond))

	if cfg.moves > 0 {
		if err := measureMoves(ctx, cfg, meta, pr, topic, res, out); err != nil {
			return nil, err
		}
	}
	stopProbes()
	pwg.Wait()
	return res, nil
}

// measureMoves moves cfg.moves of the victim's former partitions gracefully to another
// live broker, all at once, and times each.
func measureMoves(ctx context.Context, cfg *failoverConfig, meta *controller.Client, pr *probe, topic string, res *FailoverResult, out io.Writer) error {
	v := meta.View()
	t := v.Topics[topic]
	var live []int32
	for _, b := range v.Brokers {
		if b.Active() {
			live = append(live, b.ID)
		}
	}
	if len(live) < 2 {
		return errors.New("weir bench failover: fewer than two live brokers to move between")
	}
	pr.mu.Lock()
	var probed []int32
	for p := range pr.acks {
		probed = append(probed, p)
	}
	pr.mu.Unlock()
	sort.Slice(probed, func(i, j int) bool { return probed[i] < probed[j] })
	if len(probed) > cfg.moves {
		probed = probed[:cfg.moves]
	}
	fmt.Fprintf(out, "moving %d partitions gracefully\n", len(probed))
	start := time.Now()
	targets := map[int32]int32{}
	var wg sync.WaitGroup
	var merr error
	var mu sync.Mutex
	for _, p := range probed {
		cur := t.Partitions[p].Leader
		target := live[0]
		for _, id := range live {
			if id != cur {
				target = id
				break
			}
		}
		targets[p] = target
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := meta.MovePartition(ctx, t.ID, p, target); err != nil {
				mu.Lock()
				merr = fmt.Errorf("moving partition %d: %w", p, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if merr != nil {
		return merr
	}
	moved := map[int32]time.Time{}
	deadline := time.Now().Add(cfg.timeout)
	for len(moved) < len(probed) && time.Now().Before(deadline) {
		v := meta.View()
		now := time.Now()
		for _, p := range probed {
			mp := v.Topics[topic].Partitions[p]
			if moved[p].IsZero() && mp.Leader == targets[p] && !mp.Moving {
				moved[p] = now
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // let the probes write to the new leaders
	pauses := pr.maxPause(start, time.Now())
	var mt, mp []time.Duration
	for _, p := range probed {
		if m := moved[p]; !m.IsZero() {
			mt = append(mt, m.Sub(start))
		}
		mp = append(mp, pauses[p])
	}
	q1, q2 := quantiles(mt), quantiles(mp)
	res.Moves, res.MoveTime, res.MoveWritePause = len(probed), &q1, &q2
	return nil
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
