package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/ackcheck"
)

// load drives verified traffic: idempotent producers writing unique values (producer,
// sequence, send time) round-robin over every partition, a consumer group and rack-aware
// consumers reading them back; every ack and read goes into the checker, and the figures
// of each second into samples.
type load struct {
	cfg   Config
	boot  []string
	chk   *ackcheck.Checker
	start time.Time

	mu      sync.Mutex
	seconds []second              // by second since start
	acks    map[int32][]time.Time // per partition
	// ackWaits[p][i] is how long the write acked at acks[p][i] waited for its ack.
	ackWaits map[int32][]time.Duration
	// failures counts the produces that failed by error (the first 10 kinds).
	failures map[string]int
	inFlight atomic.Int64
	// groupReads are the times the group's members read records: one per poll that
	// returned any (every record of a poll is read at that poll's time), appended by
	// several members, so not quite in order (analyze sorts them).
	groupReads []time.Time
	// groupEvents are the members' rebalance callbacks, in the order they ran.
	groupEvents []groupEvent

	prodCls []*kgo.Client
	consCls []*kgo.Client
	stop    context.CancelFunc
	wg      sync.WaitGroup
	pending sync.WaitGroup
}

// second is what happened in one second of the run.
type second struct {
	acked, failed, groupRead int
	ackLat, e2eLat           []time.Duration
}

// groupEvent is one rebalance callback of a group member: partitions of the topic
// assigned (OnPartitionsAssigned, which franz-go calls at the end of every join and sync,
// even with nothing new), revoked or lost, and the generation the member had then.
type groupEvent struct {
	At     time.Time
	Member int
	// "assigned", "revoked", "lost", "error" (the group's management failed: Err),
	// "epoch" (KIP-848: the member's epoch changed, seen after a poll; groupproto.go)
	Kind       string
	Partitions int
	Generation int32 // kgo.Client.GroupMetadata; -1 unknown
	First      bool  // the member's first assignment (joining, not a rebalance)
	Err        string
}

// manageErrors is a kgo hook: the error that made a member leave its session (a
// heartbeat or a join that failed for good), which says why partitions were lost.
type manageErrors func(error)

func (f manageErrors) OnGroupManageError(err error) { f(err) }

func (l *load) sec(at time.Time) *second {
	i := int(at.Sub(l.start) / time.Second)
	if i < 0 {
		i = 0
	}
	for len(l.seconds) <= i {
		l.seconds = append(l.seconds, second{})
	}
	return &l.seconds[i]
}

// value makes the unique value of a record, padded to size.
func value(producer, seq int, sent time.Time, size int) []byte {
	v := fmt.Sprintf("%d-%d-%d|", producer, seq, sent.UnixNano())
	if len(v) < size {
		v += strings.Repeat("x", size-len(v))
	}
	return []byte(v)
}

// sentAt reads the send time back out of a value.
func sentAt(v []byte) (time.Time, bool) {
	s := string(v)
	if i := strings.IndexByte(s, '|'); i > 0 {
		s = s[:i]
	}
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// id is the unique part of a value (what the checker compares).
func id(v []byte) string {
	s := string(v)
	if i := strings.IndexByte(s, '|'); i > 0 {
		return s[:i]
	}
	return s
}

// clientOpts are what every client of the load uses, as a client tuned for fast failover
// would: metadata refreshed quickly after an error (franz-go's default is 5 s), short
// backoffs, and requests that give up after a few seconds, so a request sent to a
// paused broker is retried at the new leader instead of waiting out the pause (franz-go
// waits 10 s + 10 s by default).
// clientOpts are every load client's: quick retries (a fixed 100 ms backoff) for as long
// as RetryTimeout. franz-go also stops after RequestRetries tries (20 by default: with
// this backoff about 2 s, less than a coordinator's failover on a busy machine, after
// which a group member's heartbeat fails for good and it loses its partitions: seen once
// in CI), so that bound is lifted to what the timeout allows. With franz-go's default
// backoff (exponential, up to 2.5 s) 20 tries last well past a failover.
func clientOpts(boot []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(boot...), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.RetryTimeout(2 * time.Minute),
		kgo.RequestRetries(int((2 * time.Minute) / (100 * time.Millisecond))),
		kgo.WithLogger(kgo.BasicLogger(discard{}, kgo.LogLevelNone, nil))}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func startLoad(ctx context.Context, cfg Config, boot []string, zones []string, log *slog.Logger) (*load, error) {
	l := &load{cfg: cfg, boot: boot, chk: ackcheck.New(), start: time.Now(), acks: map[int32][]time.Time{}, ackWaits: map[int32][]time.Duration{}}
	ctx, l.stop = context.WithCancel(ctx)
	perProducer := cfg.Rate / float64(cfg.Producers)
	for w := 0; w < cfg.Producers; w++ {
		opts := append(clientOpts(boot), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(2*time.Minute),
			kgo.MaxBufferedRecords(1<<20), kgo.ProducerLinger(2*time.Millisecond))
		if cfg.ZoneClients && len(zones) > 0 {
			// Produce through the zone's proxies (zone routing): producer w is in zone w.
			opts = append(opts, kgo.ClientID(fmt.Sprintf("chaos-producer-%d,weir_az=%s", w, zones[w%len(zones)])))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			l.close()
			return nil, err
		}
		l.prodCls = append(l.prodCls, cl)
		l.wg.Add(1)
		go l.produce(ctx, cl, w, perProducer)
	}
	if cfg.Members > 0 {
		for m := 0; m < cfg.Members; m++ {
			if err := l.groupMember(ctx, cfg.group(), m); err != nil {
				l.close()
				return nil, err
			}
		}
	}
	if cfg.RackReaders {
		for _, z := range zones {
			if err := l.rackReader(ctx, z); err != nil {
				l.close()
				return nil, err
			}
		}
	}
	return l, nil
}

func (l *load) produce(ctx context.Context, cl *kgo.Client, w int, rate float64) {
	defer l.wg.Done()
	tp := ackcheck.TP{Topic: l.cfg.Topic}
	paced(ctx, rate, func(seq int) {
		p := int32((seq*l.cfg.Producers + w) % l.cfg.Partitions)
		sent := time.Now()
		v := value(w, seq, sent, l.cfg.RecordSize)
		key := id(v)
		l.pending.Add(1)
		l.inFlight.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: l.cfg.Topic, Partition: p, Value: v}, func(r *kgo.Record, err error) {
			defer l.pending.Done()
			l.inFlight.Add(-1)
			now := time.Now()
			l.mu.Lock()
			s := l.sec(now)
			if err != nil {
				s.failed++
				if l.failures == nil {
					l.failures = map[string]int{}
				}
				if _, ok := l.failures[err.Error()]; ok || len(l.failures) < 10 {
					l.failures[err.Error()]++
				}
				l.mu.Unlock()
				l.chk.Failed()
				return
			}
			s.acked++
			s.ackLat = append(s.ackLat, now.Sub(sent))
			l.acks[r.Partition] = append(l.acks[r.Partition], now)
			l.ackWaits[r.Partition] = append(l.ackWaits[r.Partition], now.Sub(sent))
			l.mu.Unlock()
			tp := tp
			tp.Partition = r.Partition
			l.chk.Acked(tp, r.Offset, key)
		})
	})
}

// paced calls send(0), send(1), ... at rate per second until ctx is done (checked
// every 10 ms; ticks a loaded machine drops still count).
func paced(ctx context.Context, rate float64, send func(n int)) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	credit, n := 0.0, 0
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		credit += rate * now.Sub(last).Seconds()
		last = now
		for ; credit >= 1; credit-- {
			send(n)
			n++
		}
	}
}

// groupMember joins the load's consumer group as member m: it commits twice a second
// and on revocation, tells the checker where it resumed each partition it was given,
// and records when it read (groupReads) and its rebalance callbacks (groupEvents).
func (l *load) groupMember(ctx context.Context, group string, m int) error {
	var mu sync.Mutex
	fresh := map[int32]bool{}
	assignedOnce := false // under l.mu
	record := func(cl *kgo.Client, kind string, ps map[string][]int32) {
		_, gen := cl.GroupMetadata()
		l.mu.Lock()
		defer l.mu.Unlock()
		ev := groupEvent{At: time.Now(), Member: m, Kind: kind, Partitions: len(ps[l.cfg.Topic]), Generation: gen}
		if kind == "assigned" {
			ev.First, assignedOnce = !assignedOnce, true
		}
		l.groupEvents = append(l.groupEvents, ev)
	}
	var cl *kgo.Client
	commit := func(ctx context.Context) {
		offs := cl.UncommittedOffsets()
		for t, ps := range offs {
			for p, o := range ps {
				l.chk.Committing(group, ackcheck.TP{Topic: t, Partition: p}, o.Offset)
			}
		}
		if len(offs) == 0 {
			return
		}
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil || resp == nil {
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 {
						if eo, ok := offs[t.Topic][p.Partition]; ok {
							l.chk.Committed(group, ackcheck.TP{Topic: t.Topic, Partition: p.Partition}, eo.Offset)
						}
					}
				}
			}
		})
	}
	var err error
	opts := clientOpts(l.boot)
	if l.cfg.consumerProtocol() {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err = kgo.NewClient(append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(l.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, as map[string][]int32) {
			mu.Lock()
			for _, p := range as[l.cfg.Topic] {
				fresh[p] = true
			}
			mu.Unlock()
			record(c, "assigned", as)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, c *kgo.Client, rs map[string][]int32) {
			record(c, "revoked", rs)
			commit(ctx)
		}),
		// Lost (fenced, the session expired): nothing to commit, only to count.
		kgo.OnPartitionsLost(func(_ context.Context, c *kgo.Client, ls map[string][]int32) { record(c, "lost", ls) }),
		kgo.WithHooks(manageErrors(func(err error) {
			if ctx.Err() != nil {
				return // the load is stopping
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			l.groupEvents = append(l.groupEvents, groupEvent{At: time.Now(), Member: m, Kind: "error", Generation: -1, Err: err.Error()})
		})),
	)...)
	if err != nil {
		return err
	}
	l.consCls = append(l.consCls, cl)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		lastCommit := time.Now()
		epoch := int32(-1)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			if l.cfg.consumerProtocol() {
				epoch = l.noteEpoch(cl, m, epoch, now)
			}
			if fs.NumRecords() > 0 {
				l.mu.Lock()
				l.groupReads = append(l.groupReads, now)
				l.mu.Unlock()
			}
			fs.EachRecord(func(r *kgo.Record) {
				tp := ackcheck.TP{Topic: r.Topic, Partition: r.Partition}
				mu.Lock()
				first := fresh[r.Partition]
				delete(fresh, r.Partition)
				mu.Unlock()
				if first {
					l.chk.Resumed(group, tp, r.Offset)
				}
				l.chk.Read(tp, r.Offset, id(r.Value))
				l.mu.Lock()
				s := l.sec(now)
				s.groupRead++
				if sent, ok := sentAt(r.Value); ok {
					s.e2eLat = append(s.e2eLat, now.Sub(sent))
				}
				l.mu.Unlock()
			})
			// Commit twice a second (and on every revocation): committing after every
			// poll of a thousand partitions would slow the group below the produce rate.
			if ctx.Err() == nil && time.Since(lastCommit) >= 500*time.Millisecond {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				commit(cctx)
				cancel()
				lastCommit = time.Now()
			}
		}
	}()
	return nil
}

// rackReader reads every partition from the start with the client's rack set to zone (a
// rack-aware consumer, KIP-392).
func (l *load) rackReader(ctx context.Context, zone string) error {
	offs := map[string]map[int32]kgo.Offset{l.cfg.Topic: {}}
	for p := 0; p < l.cfg.Partitions; p++ {
		offs[l.cfg.Topic][int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(clientOpts(l.boot), kgo.Rack(zone), kgo.ConsumePartitions(offs))...)
	if err != nil {
		return err
	}
	l.consCls = append(l.consCls, cl)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				l.chk.Read(ackcheck.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, id(r.Value))
			})
		}
	}()
	return nil
}

// finish stops producing and consuming and waits for every produce to be acked or failed.
func (l *load) finish(timeout time.Duration) error {
	l.stop()
	l.wg.Wait()
	done := make(chan struct{})
	go func() { l.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("chaos: %d produces neither acked nor failed %v after the load stopped", l.inFlight.Load(), timeout)
	}
}

// readBack reads every partition from its start to its end into the checker.
func (l *load) readBack(ctx context.Context) error {
	cl, err := kgo.NewClient(clientOpts(l.boot)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, l.cfg.Topic)
	if err != nil {
		return err
	}
	want := map[int32]int64{}
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = o.Err
		}
		want[o.Partition] = o.Offset
	})
	if lerr != nil {
		return lerr
	}
	offs := map[string]map[int32]kgo.Offset{l.cfg.Topic: {}}
	for p := range want {
		offs[l.cfg.Topic][p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(append(clientOpts(l.boot), kgo.ConsumePartitions(offs))...)
	if err != nil {
		return err
	}
	defer cons.Close()
	got := map[int32]int64{}
	for {
		done := true
		for p, end := range want {
			if got[p] < end {
				done = false
			}
		}
		if done {
			return nil
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("chaos: reading back: %v of %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			l.chk.Read(ackcheck.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, id(r.Value))
			got[r.Partition] = max(got[r.Partition], r.Offset+1)
		})
	}
}

func (l *load) close() {
	for _, cl := range append(l.prodCls, l.consCls...) {
		cl.Close()
	}
}
