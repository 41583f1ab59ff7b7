package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func runConsume(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	out := progressWriter(cfg, stdout, stderr)
	res := &Result{Mode: "consume", Settings: cfg.settings, StartedAt: time.Now()}
	adm, err := newAdmin(cfg)
	if err != nil {
		return err
	}
	defer adm.close()
	parts, err := adm.partitions(ctx, cfg.topic)
	if err != nil {
		return err
	}
	startOffs, err := adm.offsets(ctx, cfg.topic, cfg.from == "end")
	if err != nil {
		return err
	}
	var target map[int32]int64
	if cfg.stopAtEnd {
		if target, err = adm.offsets(ctx, cfg.topic, true); err != nil {
			return err
		}
	}
	cr, err := newConsumerRun(cfg, parts, startOffs, cfg.from == "end", false, out)
	if err != nil {
		return err
	}
	defer cr.close()
	fmt.Fprintf(out, "consuming %s on %s from the %s: %d consumer(s), group %q, %d partitions\n",
		cfg.topic, cfg.bootstrap, cfg.from, len(cr.clients), cfg.group, len(parts))
	if cfg.warmup > 0 {
		fmt.Fprintf(out, "warming up for %v ...\n", cfg.warmup)
	}
	if cfg.group != "" {
		// Joining takes seconds (the broker's initial rebalance delay);
		// that is not read throughput, so the clock starts after it.
		waitAssigned(ctx, cr, len(parts), out)
	}
	begin := cr.start(ctx, time.Now().Add(cfg.warmup))
	cr.track.touch() // the idle clock starts with polling
	if target != nil {
		cr.track.setTarget(target)
	}
	st := &stream{name: "consume", rec: cr.rec}
	stop := make(chan struct{})
	done := runProgress(stop, cfg.interval, begin, out, st)
	var deadline time.Time
	if cfg.duration > 0 {
		deadline = begin.Add(cfg.duration)
	}
	idle := time.Duration(0)
	if cfg.stopAtEnd {
		idle = cfg.drainTimeout
	}
	byDeadline := cr.wait(ctx, deadline, idle)
	cr.stopPolling()
	close(stop)
	<-done
	res.Consume = cr.result(st.series, byDeadline, deadline)
	return finish(cfg, res, stdout, out)
}

// consumerRun drives the consumer clients of `consume` and `e2e`.
type consumerRun struct {
	cfg     *config
	e2e     bool // measure latency from the send time stamped in each record
	out     io.Writer
	clients []*kgo.Client

	begin time.Time
	rec   *recorder
	track *endTracker

	assigned  []atomic.Int64 // partitions currently assigned per client (group mode)
	claimed   atomic.Int64   // measured records, against --records
	errsShown atomic.Int64

	reached   chan struct{} // closed when --records is reached
	reachOnce sync.Once
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// newConsumerRun creates the clients. Without a group, partitions are dealt
// round-robin to the consumers, starting exactly at startOffs when exact is
// set (so e2e sees every new record) and at the log start otherwise.
func newConsumerRun(cfg *config, parts []int32, startOffs map[int32]int64, exact, e2e bool, out io.Writer) (*consumerRun, error) {
	c := &consumerRun{cfg: cfg, e2e: e2e, out: out, reached: make(chan struct{}), track: newEndTracker(startOffs)}
	base := clientOpts(cfg)
	var optSets [][]kgo.Opt
	if cfg.group != "" {
		reset := kgo.NewOffset().AtStart()
		if exact {
			reset = kgo.NewOffset().AtEnd()
		}
		c.assigned = make([]atomic.Int64, cfg.consumers)
		// Callbacks get only the partitions that changed (cooperative
		// balancing), so keep a running count per client.
		count := func(i int, sign int64) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				for _, ps := range m {
					c.assigned[i].Add(sign * int64(len(ps)))
				}
			}
		}
		for i := range cfg.consumers {
			optSets = append(optSets, append(base[:len(base):len(base)],
				kgo.ConsumerGroup(cfg.group), kgo.ConsumeTopics(cfg.topic), kgo.ConsumeResetOffset(reset),
				kgo.OnPartitionsAssigned(count(i, 1)), kgo.OnPartitionsRevoked(count(i, -1)), kgo.OnPartitionsLost(count(i, -1))))
		}
	} else {
		assign := make([]map[int32]kgo.Offset, cfg.consumers)
		for i, p := range parts {
			m := assign[i%cfg.consumers]
			if m == nil {
				m = map[int32]kgo.Offset{}
				assign[i%cfg.consumers] = m
			}
			m[p] = kgo.NewOffset().AtStart()
			if exact {
				m[p] = kgo.NewOffset().At(startOffs[p])
			}
		}
		for _, m := range assign {
			if m == nil {
				continue
			}
			optSets = append(optSets, append(base[:len(base):len(base)],
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.topic: m})))
		}
		if len(optSets) < cfg.consumers {
			fmt.Fprintf(out, "note: only %d partitions, so only %d of %d consumers have work\n", len(parts), len(optSets), cfg.consumers)
		}
	}
	for _, opts := range optSets {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			c.close()
			return nil, err
		}
		c.clients = append(c.clients, cl)
	}
	return c, nil
}

// start begins polling; measuring starts at begin, which it returns.
func (c *consumerRun) start(ctx context.Context, begin time.Time) time.Time {
	c.begin = begin
	c.rec = newRecorder(c.e2e, c.begin)
	pollCtx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	for _, cl := range c.clients {
		c.wg.Go(func() { c.poll(pollCtx, cl) })
	}
	return c.begin
}

// poll reads until ctx ends. Each fetch is stamped with one receipt time
// and counted under one lock per partition batch, to keep the consumer's
// own overhead (and so its influence on e2e latency) low.
func (c *consumerRun) poll(ctx context.Context, cl *kgo.Client) {
	var lats []time.Duration
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		now := time.Now()
		fs.EachError(func(t string, p int32, err error) {
			if n := c.errsShown.Add(1); n <= 10 {
				fmt.Fprintf(c.out, "fetch error on %s/%d: %v\n", t, p, err)
			} else if n == 11 {
				fmt.Fprintln(c.out, "further fetch errors are not shown")
			}
		})
		var total int64
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			var n int
			var bytes int64
			lats = lats[:0]
			for _, r := range fp.Records {
				if c.e2e {
					// Only records sent after warmup count, as
					// on the produce side.
					ts, ok := sendTime(r)
					if !ok || ts.Before(c.begin) {
						continue
					}
					lats = append(lats, now.Sub(ts))
				} else if now.Before(c.begin) {
					continue
				}
				n++
				bytes += int64(len(r.Value))
			}
			c.rec.observeBatch(n, bytes, lats, now)
			total += int64(n)
			c.track.observe(fp.Partition, fp.Records[len(fp.Records)-1].Offset+1, now)
		})
		if c.cfg.records > 0 && !c.e2e && c.claimed.Add(total) >= c.cfg.records {
			c.reachOnce.Do(func() { close(c.reached) })
		}
	}
}

// wait blocks until a stop condition: ctx done, deadline (if not zero),
// --records reached, every partition read to its target, or no record for
// idle (if > 0). It reports whether the deadline ended it.
func (c *consumerRun) wait(ctx context.Context, deadline time.Time, idle time.Duration) (byDeadline bool) {
	var deadlineC <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		deadlineC = t.C
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadlineC:
			return true
		case <-c.reached:
			return false
		case <-c.track.done:
			return false
		case <-tick.C:
			if idle > 0 && time.Since(c.track.lastProgress()) > idle {
				fmt.Fprintf(c.out, "no record for %v (--drain-timeout); stopping before the end was reached\n", idle)
				return false
			}
		}
	}
}

func (c *consumerRun) stopPolling() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

func (c *consumerRun) close() {
	c.closeOnce.Do(func() {
		c.stopPolling()
		for _, cl := range c.clients {
			// A group member commits what it read before leaving, so the group's lag
			// afterwards says what is really unread.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.CommitUncommittedOffsets(ctx)
			cancel()
			cl.Close()
		}
	})
}

func (c *consumerRun) result(series []Interval, byDeadline bool, deadline time.Time) *ConsumeResult {
	t := c.rec.totals()
	// Measured time ends at the deadline when that stopped the run, and
	// otherwise at the last record, so idle waiting is not counted.
	end := t.Last
	if byDeadline {
		end = deadline
	} else if end.IsZero() {
		end = time.Now()
	}
	secs := max(end.Sub(c.begin).Seconds(), 0)
	r := &ConsumeResult{
		RecordsRead:   t.Records,
		Bytes:         t.Bytes,
		DurationS:     secs,
		RecordsPerSec: rate(t.Records, secs),
		MBPerSec:      rate(t.Bytes, secs) / 1e6,
		ReachedEnd:    c.track.reached(),
		Latency:       t.Latency,
		Distribution:  t.Distribution,
		Intervals:     series,
	}
	if r.Intervals == nil {
		r.Intervals = []Interval{}
	}
	return r
}

// endTracker knows, per partition, the next offset to read and, once set,
// the offset to read up to; done closes when every partition got there.
type endTracker struct {
	mu       sync.Mutex
	next     map[int32]int64
	target   map[int32]int64
	last     time.Time
	done     chan struct{}
	finished bool
}

func newEndTracker(start map[int32]int64) *endTracker {
	t := &endTracker{next: map[int32]int64{}, last: time.Now(), done: make(chan struct{})}
	for p, o := range start {
		t.next[p] = o
	}
	return t
}

func (t *endTracker) observe(p int32, next int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if next > t.next[p] {
		t.next[p] = next
	}
	t.last = at
	t.check()
}

func (t *endTracker) setTarget(target map[int32]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.target = target
	t.check()
}

// touch restarts the idle clock, for when waiting for records begins.
func (t *endTracker) touch() {
	t.mu.Lock()
	t.last = time.Now()
	t.mu.Unlock()
}

func (t *endTracker) check() {
	if t.finished || t.target == nil {
		return
	}
	for p, end := range t.target {
		if t.next[p] < end {
			return
		}
	}
	t.finished = true
	close(t.done)
}

func (t *endTracker) lastProgress() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *endTracker) reached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finished
}

// waitAssigned gives a consumer group up to 15 s to settle (every partition
// assigned, every consumer that can have work has some), so that joins and
// rebalances do not land in the measurement as latency spikes.
func waitAssigned(ctx context.Context, cr *consumerRun, parts int, out io.Writer) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		total, busy := int64(0), 0
		for i := range cr.assigned {
			n := cr.assigned[i].Load()
			total += n
			if n > 0 {
				busy++
			}
		}
		if total == int64(parts) && busy == min(len(cr.assigned), parts) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(out, "warning: group assigned %d of %d partitions to %d consumers after 15s; starting anyway\n", total, parts, busy)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
