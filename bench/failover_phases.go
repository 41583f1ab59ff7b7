package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/test/nfsfs"
	"github.com/weir-io/weir/test/proccluster"
)

// run is one `weir bench failover`: the cluster, its clients and what was measured.
type run struct {
	cfg     *failoverConfig
	out     io.Writer
	c       *proccluster.Cluster
	meta    *ctlclient.Client
	cl      *kgo.Client // the probes'
	topic   string
	res     *FailoverResult
	victim  int32
	vparts  []int32
	vprobe  *probe
	allPart []int32
}

func failover(ctx context.Context, cfg *failoverConfig, out io.Writer) (*FailoverResult, error) {
	phases, err := parsePhases(cfg.phases)
	if err != nil {
		return nil, err
	}
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
	meta, err := ctlclient.NewClient(ctlclient.ClientConfig{Controllers: c.ControllerAPIs(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer meta.Close()
	// The clients' settings for a fast failover: metadata at most 100 ms old, retries
	// 50 ms apart.
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
	probeCl, err := kgo.NewClient(append(fast, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.RecordRetries(1<<30), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return nil, err
	}
	defer probeCl.Close()
	r := &run{cfg: cfg, out: out, c: c, meta: meta, cl: probeCl, topic: topic,
		res: &FailoverResult{Partitions: cfg.partitions, ProbeInterval: Duration(cfg.probeEvery)}}
	for _, p := range allPhases {
		if phases[p] {
			r.res.Phases = append(r.res.Phases, p)
		}
	}
	led := leadersOf(view, topic)
	for _, p := range view.Topics[topic].Partitions {
		r.allPart = append(r.allPart, p.Index)
	}
	r.victim = mostLoaded(led)
	r.vparts = led[r.victim]
	r.res.Victim, r.res.VictimPartitions = r.victim, len(r.vparts)

	if err := r.baseline(ctx); err != nil {
		return nil, err
	}
	if phases[phaseKill] || phases[phaseMove] {
		if err := r.fill(ctx, append(fast, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner())), tail); err != nil {
			return nil, err
		}
		if r.vprobe, err = r.probeWarm(ctx, r.vparts, "kill"); err != nil {
			return nil, err
		}
		defer r.vprobe.Stop()
		time.Sleep(time.Second)
	}
	if phases[phaseKill] {
		if err := r.kill(ctx); err != nil {
			return nil, err
		}
	}
	if phases[phaseMove] && cfg.moves > 0 {
		if err := r.move(ctx); err != nil {
			return nil, err
		}
	}
	if r.vprobe != nil {
		r.vprobe.Stop()
	}
	if phases[phaseRestart] {
		if err := r.restart(ctx); err != nil {
			return nil, err
		}
	}
	if phases[phaseStop] {
		if err := r.stop(ctx); err != nil {
			return nil, err
		}
	}
	if phases[phaseController] {
		if err := r.controller(ctx); err != nil {
			return nil, err
		}
	}
	r.res.Targets = targets(r.res)
	return r.res, nil
}

// leadersOf lists, per broker, the partitions of topic it leads.
func leadersOf(v *metadata.View, topic string) map[int32][]int32 {
	led := map[int32][]int32{}
	if t := v.Topics[topic]; t != nil {
		for _, p := range t.Partitions {
			led[p.Leader] = append(led[p.Leader], p.Index)
		}
	}
	return led
}

// mostLoaded is the broker leading the most partitions (the lowest ID of a tie).
func mostLoaded(led map[int32][]int32) int32 {
	best := int32(-1)
	for id, ps := range led {
		if best < 0 || len(ps) > len(led[best]) || len(ps) == len(led[best]) && id < best {
			best = id
		}
	}
	return best
}

// baseline measures the ack latency before any fault, on --probe-sample partitions.
func (r *run) baseline(ctx context.Context) error {
	parts := sample(r.allPart, r.cfg.sample)
	pr, err := r.probeWarm(ctx, parts, "baseline")
	if err != nil {
		return err
	}
	defer pr.Stop()
	from := time.Now()
	time.Sleep(r.cfg.baseline)
	r.res.Baseline = writes(pr.latencies(from, time.Now()))
	fmt.Fprintf(r.out, "baseline ack latency (%d partitions, %v): %v\n", len(parts), r.cfg.baseline, r.res.Baseline)
	return nil
}

// fill writes the tail: records spread over the victim's partitions, acked (synced).
func (r *run) fill(ctx context.Context, opts []kgo.Opt, tail int64) error {
	if tail <= 0 {
		return nil
	}
	fill, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer fill.Close()
	val := make([]byte, r.cfg.recordSize)
	start := time.Now()
	var wg sync.WaitGroup
	var ferr error
	var fmu sync.Mutex
	for n, i := int64(0), 0; n < tail; n, i = n+int64(r.cfg.recordSize), i+1 {
		wg.Add(1)
		fill.Produce(ctx, &kgo.Record{Topic: r.topic, Partition: r.vparts[i%len(r.vparts)], Value: val}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				fmu.Lock()
				ferr = err
				fmu.Unlock()
			}
		})
	}
	wg.Wait()
	if ferr != nil {
		return fmt.Errorf("filling the tail: %w", ferr)
	}
	r.res.TailBytes = tail
	r.res.FillMBps = float64(tail) / 1e6 / time.Since(start).Seconds()
	fmt.Fprintf(r.out, "wrote %d MiB to broker %d's %d partitions at %.0f MB/s\n", r.cfg.tailMiB, r.victim, len(r.vparts), r.res.FillMBps)
	return nil
}

// kill SIGKILLs the victim and times its partitions' way back.
func (r *run) kill(ctx context.Context) error {
	var takers []*proccluster.Proc
	for _, b := range r.c.Brokers {
		if b.ID != r.victim {
			takers = append(takers, b)
		}
	}
	before := proccluster.ScrapeAll(takers)
	probeBytes0 := r.vprobe.bytes()
	// What the victim leads now: the balancer may have moved some of its partitions away
	// while the fill made it the busiest broker.
	probed := map[int32]bool{}
	for _, p := range r.vparts {
		probed[p] = true
	}
	var parts []int32
	for _, p := range leadersOf(r.meta.View(), r.topic)[r.victim] {
		if probed[p] {
			parts = append(parts, p)
		}
	}
	r.vparts = parts
	r.res.VictimPartitions = len(parts)
	fmt.Fprintf(r.out, "SIGKILL broker %d (%d partitions)\n", r.victim, len(r.vparts))
	kill := time.Now()
	r.c.Broker(r.victim).Kill()

	var fenced time.Time
	recovered := map[int32]time.Time{}
	want := map[int32]bool{}
	for _, p := range r.vparts {
		want[p] = true
	}
	deadline := time.Now().Add(r.cfg.timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v := r.meta.View()
		now := time.Now()
		if b, ok := v.Broker(r.victim); fenced.IsZero() && ok && !b.Active() {
			fenced = now
		}
		if t := v.Topics[r.topic]; t != nil {
			for _, p := range t.Partitions {
				if want[p.Index] && recovered[p.Index].IsZero() && p.Leader != r.victim && !p.Recovering {
					if b, ok := v.Broker(p.Leader); ok && b.Active() {
						recovered[p.Index] = now
					}
				}
			}
		}
		if countIn(r.vprobe.firstAfter(kill), r.vparts) == len(r.vparts) && len(recovered) == len(r.vparts) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := time.Now()
	firsts := r.vprobe.firstAfter(kill)
	k := &KillResult{TakerProbeBytes: r.vprobe.bytes() - probeBytes0}
	after := proccluster.ScrapeAll(takers)

	var un, rec, srv []time.Duration
	for _, p := range r.vparts {
		f, ok := firsts[p]
		if !ok {
			r.res.Unfinished++
			continue
		}
		un = append(un, f.Sub(kill))
		if rc := recovered[p]; !rc.IsZero() && !fenced.IsZero() {
			rec = append(rec, rc.Sub(fenced))
			srv = append(srv, max(0, f.Sub(rc)))
		}
	}
	k.Unavailability, k.Recovery, k.Serving = quantiles(un), quantiles(rec), quantiles(srv)
	if !fenced.IsZero() {
		k.Detection = Duration(fenced.Sub(kill))
	}
	delta := func(key string) float64 { return after[key] - before[key] }
	k.TakerSeal = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=seal}_sum") * float64(time.Second)))
	k.TakerScan = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=scan}_sum") * float64(time.Second)))
	k.TakerComplete = Duration(time.Duration(delta("weir_broker_recovery_seconds{phase=complete}_sum") * float64(time.Second)))
	r.res.DeadWALBytesRead = int64(delta("weir_broker_recovery_read_bytes_total"))
	r.res.TakerWALBytes = int64(delta("weir_wal_bytes_written_total"))
	r.res.Unavailability = k.Unavailability
	r.res.Kill = k
	fmt.Fprintf(r.out, "all %d partitions writable again %v after the kill\n", len(r.vparts)-r.res.Unfinished, done.Sub(kill).Round(time.Millisecond))
	return nil
}

// move moves cfg.moves of the victim's (former) partitions gracefully to another active
// broker, all requested at once, and times each from its own request.
func (r *run) move(ctx context.Context) error {
	v := r.meta.View()
	t := v.Topics[r.topic]
	var live []int32
	for _, b := range v.Brokers {
		if b.Active() {
			live = append(live, b.ID)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	if len(live) < 2 {
		return errors.New("weir bench failover: fewer than two live brokers to move between")
	}
	moving := sample(r.vparts, 0)
	if len(moving) > r.cfg.moves {
		moving = moving[:r.cfg.moves]
	}
	fmt.Fprintf(r.out, "moving %d partitions gracefully, requested at once\n", len(moving))
	targets := map[int32]int32{}
	requested := make(map[int32]time.Time, len(moving))
	var wg sync.WaitGroup
	var merr error
	var mu sync.Mutex
	skipped := 0
	for _, p := range moving {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The balancer may move the partition meanwhile: a refused move is asked
			// again (to the other broker, once the balancer's move is done), then skipped.
			for attempt := 0; ; attempt++ {
				cur := r.meta.View().Topics[r.topic].Partitions[p].Leader
				target := live[0]
				for _, id := range live {
					if id != cur {
						target = id
						break
					}
				}
				at := time.Now()
				err := r.meta.MovePartition(ctx, t.ID, p, target)
				mu.Lock()
				switch {
				case err == nil:
					requested[p], targets[p] = at, target
				case errors.Is(err, metadata.ErrMoveRefused) && attempt < 40 && ctx.Err() == nil:
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				case errors.Is(err, metadata.ErrMoveRefused):
					skipped++
				default:
					merr = fmt.Errorf("moving partition %d: %w", p, err)
				}
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	if merr != nil {
		return merr
	}
	if skipped > 0 {
		fmt.Fprintf(r.out, "%d partitions not moved (the balancer kept moving them)\n", skipped)
		var kept []int32
		for _, p := range moving {
			if _, ok := targets[p]; ok {
				kept = append(kept, p)
			}
		}
		moving = kept
	}
	switched := map[int32]time.Time{}
	newStart := map[int32]int64{}
	served := map[int32]bool{}
	deadline := time.Now().Add(r.cfg.timeout)
	for (len(switched) < len(moving) || len(served) < len(moving)) && time.Now().Before(deadline) && ctx.Err() == nil {
		v := r.meta.View()
		now := time.Now()
		for _, p := range moving {
			mp := v.Topics[r.topic].Partitions[p]
			if n := len(mp.Logs); switched[p].IsZero() && mp.Leader == targets[p] && !mp.Moving && n > 0 && mp.Logs[n-1].Broker == targets[p] {
				switched[p], newStart[p] = now, mp.Logs[n-1].StartOffset
			}
			if !switched[p].IsZero() && !served[p] {
				if _, _, ok := r.vprobe.movePause(p, requested[p], newStart[p]); ok {
					served[p] = true
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := &MoveResult{Moves: len(moving)}
	var sw, sv, pause []time.Duration
	for _, p := range moving {
		if !switched[p].IsZero() {
			sw = append(sw, switched[p].Sub(requested[p]))
		}
		if !served[p] {
			m.Unfinished++
			continue
		}
		d, first, _ := r.vprobe.movePause(p, requested[p], newStart[p])
		sv = append(sv, first.Sub(requested[p]))
		pause = append(pause, d)
	}
	m.Switch, m.Serve, m.Pause = quantiles(sw), quantiles(sv), quantiles(pause)
	r.res.Move, r.res.Moves = m, len(moving)
	return nil
}

// restart starts the killed broker again and times until it leads its share again.
func (r *run) restart(ctx context.Context) error {
	fmt.Fprintf(r.out, "starting broker %d again\n", r.victim)
	start := time.Now()
	if err := r.c.Broker(r.victim).Start(); err != nil {
		return err
	}
	s := &SpreadResult{Broker: r.victim}
	var active time.Time
	spread := func(v *metadata.View) bool {
		var ids []int32
		for _, b := range v.Brokers {
			if b.Active() {
				ids = append(ids, b.ID)
			}
		}
		if len(ids) == 0 {
			return false
		}
		// The returned broker leads its share again (90 % of it). The others are left
		// to the balancer's own measure, which weighs partitions by their traffic too:
		// after the bench's 256 MiB fill the partitions it wrote weigh more than a
		// count shows, so a broker holding them may rightly lead fewer (see Leaders).
		s.MinLeaders = int(math.Ceil(0.9 * float64(r.cfg.partitions) / float64(len(ids))))
		return len(leadersOf(v, r.topic)[r.victim]) >= s.MinLeaders
	}
	deadline := time.Now().Add(r.cfg.timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v := r.meta.View()
		now := time.Now()
		if !active.IsZero() && now.Sub(active) > r.cfg.spreadWait {
			break
		}
		if b, ok := v.Broker(r.victim); ok && b.Active() && active.IsZero() {
			active = now
			s.Registered = Duration(now.Sub(start))
		}
		if !active.IsZero() && spread(v) {
			s.Done = true
			s.Spread, s.FromStart = Duration(now.Sub(active)), Duration(now.Sub(start))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if active.IsZero() {
		return fmt.Errorf("restart: broker %d not active again after %v", r.victim, r.cfg.timeout)
	}
	if !s.Done {
		s.Spread, s.FromStart = Duration(time.Since(active)), Duration(time.Since(start))
	}
	led := leadersOf(r.meta.View(), r.topic)
	for i := range r.c.Brokers {
		s.Leaders = append(s.Leaders, len(led[int32(i+1)]))
	}
	r.res.Restart = s
	return nil
}

// stop SIGSTOPs the broker leading the most partitions for --stop-for, then SIGCONTs it,
// and times, per partition it led, the stop → the ack of the first write sent after the
// stop (the probe sends its next write one interval after the previous ack: a write
// stalled by the stop delays the next one by at most that).
func (r *run) stop(ctx context.Context) error {
	if err := r.waitActive(ctx); err != nil {
		return err
	}
	led := leadersOf(r.meta.View(), r.topic)
	id := mostLoaded(led)
	parts := led[id]
	pr, err := r.probeWarm(ctx, parts, "stop")
	if err != nil {
		return err
	}
	defer pr.Stop()
	time.Sleep(time.Second)
	fmt.Fprintf(r.out, "SIGSTOP broker %d (%d partitions) for %v\n", id, len(parts), r.cfg.stopFor)
	at := time.Now()
	if err := r.c.Broker(id).Pause(); err != nil {
		return err
	}
	// Served elsewhere: the metadata names another active broker, done recovering.
	want := map[int32]bool{}
	for _, p := range parts {
		want[p] = true
	}
	elsewhere := map[int32]time.Time{}
	for time.Since(at) < r.cfg.stopFor {
		v := r.meta.View()
		now := time.Now()
		if t := v.Topics[r.topic]; t != nil {
			for _, p := range t.Partitions {
				if want[p.Index] && elsewhere[p.Index].IsZero() && p.Leader != id && !p.Recovering {
					if b, ok := v.Broker(p.Leader); ok && b.Active() {
						elsewhere[p.Index] = now
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // polling the metadata watch's View
	}
	if err := r.c.Broker(id).Resume(); err != nil {
		return err
	}
	stopped := time.Since(at)
	waitFor(ctx, r.cfg.timeout, func() bool { return len(pr.firstSentAfter(at)) == len(parts) })
	firsts := pr.firstSentAfter(at)
	s := &StopResult{Broker: id, StoppedFor: Duration(stopped)}
	var un []time.Duration
	for _, p := range parts {
		if f, ok := firsts[p]; ok {
			un = append(un, f.Sub(at))
		} else {
			s.Unfinished++
		}
	}
	s.Unavailability = quantiles(un)
	var el []time.Duration
	for _, p := range parts {
		if t, ok := elsewhere[p]; ok {
			el = append(el, t.Sub(at))
		} else {
			s.NotElsewhere++
		}
	}
	s.Elsewhere = quantiles(el)
	r.res.Stop = s
	return nil
}

// waitActive waits until every broker is active again (a paused one re-registers).
func (r *run) waitActive(ctx context.Context) error {
	return waitFor(ctx, r.cfg.timeout, func() bool {
		v := r.meta.View()
		for _, p := range r.c.Brokers {
			if b, ok := v.Broker(p.ID); !ok || !b.Active() {
				return false
			}
		}
		return true
	})
}

// controller SIGKILLs the controller leader, starts it again at once, and watches the
// acks of --probe-sample partitions for --controller-window.
func (r *run) controller(ctx context.Context) error {
	if err := r.waitActive(ctx); err != nil {
		return fmt.Errorf("controller: waiting for every broker: %w", err)
	}
	leader := func() int32 {
		for i := range r.c.Controllers {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := r.meta.Status(sctx, i)
			cancel()
			if err == nil && st.State == "Leader" {
				return st.ID
			}
		}
		return -1
	}
	parts := sample(r.allPart, r.cfg.sample)
	pr, err := r.probeWarm(ctx, parts, "controller")
	if err != nil {
		return err
	}
	defer pr.Stop()
	var id int32
	if err := waitFor(ctx, time.Minute, func() bool { id = leader(); return id > 0 }); err != nil {
		return fmt.Errorf("controller: no leader: %w", err)
	}
	from := time.Now()
	time.Sleep(time.Second)
	cr := &CtlResult{Killed: id, Partitions: len(parts)}
	kill := time.Now()
	cr.Before = writes(pr.latencies(from, kill))
	cr.GapBefore = Duration(pr.ackGap(from, kill))
	fmt.Fprintf(r.out, "SIGKILL controller %d (the leader), started again at once\n", id)
	if err := r.c.Controllers[id-1].Restart(); err != nil {
		return err
	}
	time.Sleep(r.cfg.ctlWindow)
	end := time.Now()
	cr.Window = writes(pr.latencies(kill, end))
	cr.Stall = Duration(pr.longestStall(kill, end, r.cfg.probeEvery))
	cr.Gap = Duration(pr.ackGap(kill, end))
	cr.Leader = leader()
	r.res.Controller = cr
	return nil
}

// writes summarises write latencies.
func writes(ds []time.Duration) Quantiles {
	q := quantiles(ds)
	q.of = "writes"
	return q
}

// countIn counts the partitions of parts in m.
func countIn(m map[int32]time.Time, parts []int32) int {
	n := 0
	for _, p := range parts {
		if _, ok := m[p]; ok {
			n++
		}
	}
	return n
}

// probeWarm starts a probe of parts and waits until each of them acked a write.
func (r *run) probeWarm(ctx context.Context, parts []int32, phase string) (*probe, error) {
	pr := startProbe(ctx, r.cl, r.topic, parts, r.cfg.probeEvery)
	warm := time.Now()
	if err := waitFor(ctx, time.Minute, func() bool { return len(pr.firstAfter(warm)) == len(parts) }); err != nil {
		pr.Stop()
		return nil, fmt.Errorf("%s: probing every partition: %w", phase, err)
	}
	return pr, nil
}
