package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The consume-transform-produce writer of --txn: a feeder (a plain idempotent
// producer) writes records to TOPIC-txn-in through the run; one processor, a
// franz-go GroupTransactSession (group chaos-TOPIC-ctp, transactional id
// chaos-TOPIC-ctp), reads them and, in one transaction per poll, writes each to the
// same partition of TOPIC-txn-out as "P/OFFSET:VALUE" and commits the input offsets
// (TxnOffsetCommit). At the end the feeder stops, the processor drains the input (its
// committed offsets reach the input's end), and checkCTP compares the input, the
// output read with read_committed and the committed offsets: for every input
// partition, the records below the committed offset are in the output exactly once and
// those at or above it not at all (output and offsets commit together or not at all),
// and the committed offset is the input's end (every input record processed).

func (c *Config) ctpIn() string    { return c.Topic + "-txn-in" }
func (c *Config) ctpOut() string   { return c.Topic + "-txn-out" }
func (c *Config) ctpGroup() string { return "chaos-" + c.Topic + "-ctp" }

// ctpRate is the feeder's records per second: enough to keep a transaction per poll
// busy, little beside the load.
const ctpRate = 200

// CTPReport is what the consume-transform-produce check found.
type CTPReport struct {
	Input      int      `json:"input"`     // records in the input topic
	Output     int      `json:"output"`    // records read from the output with read_committed
	Committed  int64    `json:"committed"` // sum of the committed input offsets
	Commits    int      `json:"commits"`   // transactions the processor saw commit
	Aborts     int      `json:"aborts"`    // and abort (a failed produce, a rebalance, a fault)
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

// String is the report's line.
func (r *CTPReport) String() string {
	s := fmt.Sprintf("consume-transform-produce: %d input records, %d output records read with read_committed, committed offsets sum %d; %d transactions committed, %d aborted; %d violations",
		r.Input, r.Output, r.Committed, r.Commits, r.Aborts, r.Violations)
	for _, e := range r.Examples {
		s += "\n  violation: " + e
	}
	return s
}

// ctpLoad runs the feeder and the processor.
type ctpLoad struct {
	cfg  Config
	boot []string

	stopFeed, stopProc context.CancelFunc
	feedWG, procWG     sync.WaitGroup
	commits, aborts    atomic.Int64
}

func startCTP(ctx context.Context, cfg Config, boot []string) *ctpLoad {
	c := &ctpLoad{cfg: cfg, boot: boot}
	fctx, stopFeed := context.WithCancel(ctx)
	pctx, stopProc := context.WithCancel(ctx)
	c.stopFeed, c.stopProc = stopFeed, stopProc
	c.feedWG.Add(1)
	go c.feed(fctx)
	c.procWG.Add(1)
	go c.process(pctx)
	return c
}

// feed writes "in-N" records round-robin over the input's partitions until ctx ends.
func (c *ctpLoad) feed(ctx context.Context) {
	defer c.feedWG.Done()
	cl, err := kgo.NewClient(append(clientOpts(c.boot), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return
	}
	defer cl.Close()
	const batch = 10
	tick := time.NewTicker(time.Second * batch / ctpRate)
	defer tick.Stop()
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		recs := make([]*kgo.Record, batch)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: c.cfg.ctpIn(), Partition: int32(n % c.cfg.Partitions), Value: []byte("in-" + strconv.Itoa(n))}
			n++
		}
		// An error leaves a record written or not; the check reads the input back.
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl.ProduceSync(pctx, recs...)
		cancel()
	}
}

// session opens the processor's GroupTransactSession.
func (c *ctpLoad) session() (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(append(clientOpts(c.boot),
		kgo.TransactionalID(c.cfg.ctpGroup()), kgo.TransactionTimeout(15*time.Second),
		kgo.ConsumerGroup(c.cfg.ctpGroup()), kgo.ConsumeTopics(c.cfg.ctpIn()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(20*time.Second))...)
}

// process runs the processor until ctx ends; a session that fails is closed and a new
// one opened (its InitProducerID fences the old).
func (c *ctpLoad) process(ctx context.Context) {
	defer c.procWG.Done()
	var s *kgo.GroupTransactSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for ctx.Err() == nil {
		if s == nil {
			var err error
			if s, err = c.session(); err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
		}
		if !c.one(ctx, s) {
			s.Close()
			s = nil
		}
	}
}

// one runs one poll's transaction; false when the session should be replaced.
func (c *ctpLoad) one(ctx context.Context, s *kgo.GroupTransactSession) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	fs := s.PollFetches(pctx)
	cancel()
	if ctx.Err() != nil {
		return true
	}
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		v := fmt.Sprintf("%d/%d:%s", r.Partition, r.Offset, r.Value)
		recs = append(recs, &kgo.Record{Topic: c.cfg.ctpOut(), Partition: r.Partition, Value: []byte(v)})
	})
	if len(recs) == 0 {
		return true
	}
	// Not the run's context: the processor stops between transactions, never in one.
	tctx, tcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer tcancel()
	if err := s.Begin(); err != nil {
		return false
	}
	perr := s.ProduceSync(tctx, recs...).FirstErr()
	committed, err := s.End(tctx, perr == nil)
	if committed {
		c.commits.Add(1)
	} else {
		c.aborts.Add(1)
	}
	return err == nil
}

// finish stops the feeder, lets the processor drain the input (its committed offsets
// reach the input's end, for at most wait) and stops it.
func (c *ctpLoad) finish(ctx context.Context, wait time.Duration) {
	c.stopFeed()
	c.feedWG.Wait()
	defer func() {
		c.stopProc()
		c.procWG.Wait()
	}()
	cl, err := kgo.NewClient(clientOpts(c.boot)...)
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ends, eerr := adm.ListEndOffsets(ctx, c.cfg.ctpIn())
		offs, oerr := adm.FetchOffsets(ctx, c.cfg.ctpGroup())
		if eerr == nil && oerr == nil && ends.Error() == nil {
			done := true
			ends.Each(func(o kadm.ListedOffset) {
				got, ok := offs.Lookup(o.Topic, o.Partition)
				done = done && (o.Offset == 0 || ok && got.At >= o.Offset)
			})
			if done {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ctpInput is one input record.
type ctpInput struct {
	offset int64
	value  string
}

// check reads the input, the output (read_committed) and the committed offsets, and
// compares them.
func (c *ctpLoad) check(ctx context.Context) (*CTPReport, error) {
	cl, err := kgo.NewClient(clientOpts(c.boot)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, c.cfg.ctpGroup())
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: the committed offsets of %s: %w", c.cfg.ctpGroup(), err)
	}
	committed := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == c.cfg.ctpIn() {
			committed[o.Partition] = o.At
		}
	})
	in, err := c.readInput(ctx, adm)
	if err != nil {
		return nil, err
	}
	out, err := readCommitted(ctx, c.boot, c.cfg.ctpOut(), c.cfg.Partitions)
	if err != nil {
		return nil, err
	}
	r := checkCTP(in, committed, out)
	r.Commits, r.Aborts = int(c.commits.Load()), int(c.aborts.Load())
	return r, nil
}

// readInput reads every input partition up to its end offset.
func (c *ctpLoad) readInput(ctx context.Context, adm *kadm.Client) (map[int32][]ctpInput, error) {
	ends, err := adm.ListEndOffsets(ctx, c.cfg.ctpIn())
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: the end offsets of %s: %w", c.cfg.ctpIn(), err)
	}
	want := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	in := map[int32][]ctpInput{}
	if len(want) == 0 {
		return in, nil
	}
	cons, err := kgo.NewClient(append(clientOpts(c.boot), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.cfg.ctpIn(): start}))...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	for len(want) > 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: reading %s: %d partitions short: %w", c.cfg.ctpIn(), len(want), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			in[r.Partition] = append(in[r.Partition], ctpInput{r.Offset, string(r.Value)})
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return in, nil
}

// readCommitted writes one end marker (not transactional) to each of topic's n
// partitions and reads topic with read_committed from its start until every marker is
// read (a marker comes back only once every transaction before it is decided). It
// returns how many times each other value was read.
func readCommitted(ctx context.Context, boot []string, topic string, n int) (map[string]int, error) {
	prod, err := kgo.NewClient(append(clientOpts(boot), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	var marks []*kgo.Record
	for p := 0; p < n; p++ {
		marks = append(marks, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("end-" + strconv.Itoa(p))})
	}
	if err := prod.ProduceSync(ctx, marks...).FirstErr(); err != nil {
		return nil, fmt.Errorf("chaos: writing the end markers of %s: %w", topic, err)
	}
	cons, err := kgo.NewClient(append(clientOpts(boot), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	reads := map[string]int{}
	ended := 0
	for ended < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: reading %s back with read_committed: %d of %d end markers: %w", topic, ended, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "end-") {
				ended++
				return
			}
			reads[string(r.Value)]++
		})
	}
	return reads, nil
}

// errCTPValue is an output value checkCTP cannot read.
var errCTPValue = errors.New("chaos: not an output value")

// parseCTPValue reads "P/OFFSET:VALUE".
func parseCTPValue(v string) (int32, int64, string, error) {
	pos, val, ok := strings.Cut(v, ":")
	ps, os, ok2 := strings.Cut(pos, "/")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil {
		return 0, 0, "", fmt.Errorf("%w: %q", errCTPValue, v)
	}
	return int32(p), o, val, nil
}

// checkCTP compares the input (per partition, in offset order), the committed input
// offsets and the output read with read_committed (value → times read).
func checkCTP(in map[int32][]ctpInput, committed map[int32]int64, out map[string]int) *CTPReport {
	r := &CTPReport{}
	violate := func(format string, args ...any) {
		r.Violations++
		if len(r.Examples) < maxTxnExamples {
			r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
		}
	}
	type pos struct {
		p int32
		o int64
	}
	byPos := map[pos]string{}
	parts := make([]int32, 0, len(in))
	for p, recs := range in {
		parts = append(parts, p)
		for _, rec := range recs {
			byPos[pos{p, rec.offset}] = rec.value
		}
		r.Input += len(recs)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, c := range committed {
		r.Committed += c
	}
	seen := map[pos]int{}
	values := make([]string, 0, len(out))
	for v := range out {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		r.Output += out[v]
		p, o, val, err := parseCTPValue(v)
		if err != nil {
			violate("output %q: %v", v, err)
			continue
		}
		if byPos[pos{p, o}] != val {
			violate("output %q: no such input record", v)
			continue
		}
		seen[pos{p, o}] += out[v]
	}
	for _, p := range parts {
		c := committed[p]
		recs := in[p]
		if end := recs[len(recs)-1].offset + 1; c < end {
			violate("input partition %d: committed offset %d short of the end %d (not everything processed)", p, c, end)
		}
		for _, rec := range recs {
			n := seen[pos{p, rec.offset}]
			switch {
			case n > 1:
				violate("input %d/%d (%s) in the output %d times", p, rec.offset, rec.value, n)
			case rec.offset < c && n == 0:
				violate("input %d/%d (%s) below the committed offset %d but not in the output", p, rec.offset, rec.value, c)
			case rec.offset >= c && n > 0:
				violate("input %d/%d (%s) in the output but at or above the committed offset %d", p, rec.offset, rec.value, c)
			}
		}
	}
	return r
}
