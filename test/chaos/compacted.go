package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/test/proccluster"
)

// The compacted mode (--compacted): one idempotent producer writes CompactedKeys keys
// round-robin, each key's versions 0, 1, 2, ... in order, to the compacted topic
// Topic-compacted (cleanup.policy=compact, min.cleanable.dirty.ratio 0.01), 1 KB
// incompressible values so the WAL rolls, is uploaded and trimmed, and the cleaner's
// rewritten objects are what readers get. A key always goes to the same partition, and
// an idempotent producer keeps a partition's order, so a key's versions are acked at
// increasing offsets.
//
// At the end the topic is read from its start up to each partition's end (the last
// record of a partition is the newest of its key: the cleaner never removes it) and
// checkCompacted compares with what was sent: offsets strictly increasing per
// partition; every record read was sent, and one acked was read at its acked offset;
// a key's versions increase with their offsets; each key's last record read is its
// latest acked version, or a later one sent whose ack never came (a failed produce may
// have been written). The cleaner's work shows as offsets without a record (Removed);
// with an own cluster the brokers clean every second, and the read is repeated for up
// to compactedWait until it has (a pass over data the WAL still held is not visible:
// the WAL serves it uncleaned until trimmed). The brokers' counter
// weir_tier_compaction_objects_written_total is sampled through the run (own cluster),
// summed over each broker's lives (a restarted broker counts from zero).

// compactedTopic is the keyed writer's topic.
func (c *Config) compactedTopic() string { return c.Topic + "-compacted" }

// compactedTopicConfig makes the topic compacted and cleaned as soon as 1 % is dirty.
var compactedTopicConfig = map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.01")}

// compactedBrokerArgs make an own cluster's cleaner visible within seconds: it runs
// every second, WAL segments are small and uploaded within a second (so they are
// trimmed and reads come from the rewritten objects), and the tail cache is small (it
// would serve old batches uncleaned).
var compactedBrokerArgs = []string{"--compaction-interval=1s", "--wal-segment-bytes=1048576", "--upload-max-delay=1s",
	"--upload-target-bytes=262144", "--tail-cache-bytes=1048576", "--retention-check-interval=2s"}

// compactedWait bounds the repeated read at the end waiting for the cleaner's work.
const compactedWait = 40 * time.Second

// compactedMetric is the brokers' counter of objects the cleaner committed.
const compactedMetric = "weir_tier_compaction_objects_written_total"

// compactedSent is one version of a key as the producer saw it.
type compactedSent struct {
	acked, failed bool
	partition     int32
	offset        int64
}

// compactedRead is one record read back.
type compactedRead struct {
	offset  int64
	key     string
	version int
}

// CompactedReport is what the compacted topic's check found.
type CompactedReport struct {
	Keys    int `json:"keys"`
	Sent    int `json:"sent"`
	Acked   int `json:"acked"`
	Failed  int `json:"failed"`
	Read    int `json:"read"`
	Offsets int `json:"offsets"` // offsets below the partitions' ends
	// Removed is Offsets - Read: records the cleaner removed.
	Removed int `json:"removed"`
	// ObjectsWritten is weir_tier_compaction_objects_written_total over the run (own
	// cluster; -1: not scraped).
	ObjectsWritten int `json:"objects_written"`
	// Reads is how many times the topic was read at the end (waiting for the cleaner).
	Reads      int      `json:"reads"`
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

func (r *CompactedReport) String() string {
	s := fmt.Sprintf("compacted topic: %d keys, %d versions sent (%d acked, %d failed), %d read of %d offsets (%d removed by the cleaner, %d objects written; read %d times), %d violations",
		r.Keys, r.Sent, r.Acked, r.Failed, r.Read, r.Offsets, r.Removed, r.ObjectsWritten, r.Reads, r.Violations)
	if len(r.Examples) > 0 {
		s += ": " + strings.Join(r.Examples, "; ")
	}
	return s
}

// compactedLoad is the keyed writer.
type compactedLoad struct {
	cfg  Config
	boot []string
	cl   *kgo.Client

	mu   sync.Mutex
	sent map[string][]*compactedSent // key → its versions

	metrics *counterSampler
	once    sync.Once
	err     error
	stop    context.CancelFunc
	wg      sync.WaitGroup
	pending sync.WaitGroup
}

func compactedKey(k int) string { return fmt.Sprintf("k%05d", k) }

// compactedValue is version v of key, padded with random hex to 1 KB.
func compactedValue(key string, v int) []byte {
	pad := make([]byte, 500)
	rand.Read(pad)
	return []byte(fmt.Sprintf("%s|%d|%s", key, v, hex.EncodeToString(pad)))
}

// parseCompactedValue reads the key and version back.
func parseCompactedValue(b []byte) (string, int, bool) {
	parts := strings.SplitN(string(b), "|", 3)
	if len(parts) != 3 {
		return "", 0, false
	}
	v, err := strconv.Atoi(parts[1])
	if err != nil {
		return "", 0, false
	}
	return parts[0], v, true
}

func startCompacted(ctx context.Context, cfg Config, boot []string, t target) (*compactedLoad, error) {
	cl, err := kgo.NewClient(append(clientOpts(boot), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	c := &compactedLoad{cfg: cfg, boot: boot, cl: cl, sent: map[string][]*compactedSent{}}
	if addrs := brokerMetrics(t); len(addrs) > 0 {
		c.metrics = startCounterSampler(addrs, compactedMetric, time.Second)
	}
	ctx, c.stop = context.WithCancel(ctx)
	c.wg.Add(1)
	go c.run(ctx)
	return c, nil
}

func (c *compactedLoad) run(ctx context.Context) {
	defer c.wg.Done()
	paced(ctx, c.cfg.CompactedRate, func(n int) {
		key := compactedKey(n % c.cfg.CompactedKeys)
		s := &compactedSent{}
		c.mu.Lock()
		v := len(c.sent[key])
		c.sent[key] = append(c.sent[key], s)
		c.mu.Unlock()
		c.pending.Add(1)
		c.cl.Produce(context.Background(), &kgo.Record{Topic: c.cfg.compactedTopic(), Key: []byte(key), Value: compactedValue(key, v)}, func(r *kgo.Record, err error) {
			defer c.pending.Done()
			c.mu.Lock()
			defer c.mu.Unlock()
			if err != nil {
				s.failed = true
				return
			}
			s.acked, s.partition, s.offset = true, r.Partition, r.Offset
		})
	})
}

// close stops the metrics sampler (after check).
func (c *compactedLoad) close() {
	if c.metrics != nil {
		c.metrics.close()
	}
}

// finish stops writing and waits for every produce to end (once; later calls return
// the first's error).
func (c *compactedLoad) finish(timeout time.Duration) error {
	c.once.Do(func() {
		c.stop()
		c.wg.Wait()
		done := make(chan struct{})
		go func() { c.pending.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			c.err = fmt.Errorf("chaos: compacted writer: produces neither acked nor failed %v after the load stopped", timeout)
		}
		c.cl.Close()
	})
	return c.err
}

// check reads the topic back and checks it; with an own cluster it reads again until
// the cleaner's work shows (or compactedWait), every read checked.
func (c *compactedLoad) check(ctx context.Context, wait bool) (*CompactedReport, error) {
	c.mu.Lock()
	sent := make(map[string][]compactedSent, len(c.sent))
	for k, vs := range c.sent {
		for _, s := range vs {
			sent[k] = append(sent[k], *s)
		}
	}
	c.mu.Unlock()
	deadline := time.Now().Add(compactedWait)
	var bad *CompactedReport
	for n := 1; ; n++ {
		reads, ends, err := readCompacted(ctx, c.boot, c.cfg.compactedTopic())
		if err != nil {
			return nil, err
		}
		r := checkCompacted(sent, reads, ends)
		r.Reads = n
		if bad == nil && r.Violations > 0 {
			bad = r
		}
		if r.Removed > 0 || !wait || time.Now().After(deadline) {
			if bad != nil && bad != r { // an earlier read's violations are the verdict
				bad.Reads = n
				r = bad
			}
			r.ObjectsWritten = -1
			if c.metrics != nil {
				c.metrics.sample()
				r.ObjectsWritten = int(c.metrics.total())
			}
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second): // the cleaner runs every second
		}
	}
}

// readCompacted reads every partition of topic from its start to its end.
func readCompacted(ctx context.Context, boot []string, topic string) (map[int32][]compactedRead, map[int32]int64, error) {
	ends, err := endOffsets(ctx, boot, topic)
	if err != nil {
		return nil, nil, err
	}
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range ends {
		offs[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(clientOpts(boot), kgo.ConsumePartitions(offs))...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	reads := map[int32][]compactedRead{}
	next := map[int32]int64{}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		done := true
		for p, end := range ends {
			done = done && next[p] >= end
		}
		if done {
			return reads, ends, nil
		}
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, nil, fmt.Errorf("chaos: reading %s back: at %v of %v", topic, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			key, v, ok := parseCompactedValue(r.Value)
			if !ok || key != string(r.Key) {
				key, v = "?"+string(r.Key), -1
			}
			reads[r.Partition] = append(reads[r.Partition], compactedRead{offset: r.Offset, key: key, version: v})
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
}

// checkCompacted compares what was read (per partition, in the order read) with what
// was sent (per key, its versions in order).
func checkCompacted(sent map[string][]compactedSent, reads map[int32][]compactedRead, ends map[int32]int64) *CompactedReport {
	r := &CompactedReport{Keys: len(sent)}
	violate := func(format string, a ...any) {
		r.Violations++
		if len(r.Examples) < maxTxnExamples {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	for _, vs := range sent {
		for _, s := range vs {
			r.Sent++
			switch {
			case s.acked:
				r.Acked++
			case s.failed:
				r.Failed++
			}
		}
	}
	for _, end := range ends {
		r.Offsets += int(end)
	}
	type last struct {
		version   int
		partition int32
		offset    int64
	}
	lastRead := map[string]last{}
	parts := make([]int32, 0, len(reads))
	for p := range reads {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		prev := int64(-1)
		for _, rd := range reads[p] {
			r.Read++
			if rd.offset <= prev {
				violate("%d/%d read after offset %d: offsets must increase", p, rd.offset, prev)
			}
			prev = rd.offset
			vs := sent[rd.key]
			if rd.version < 0 || rd.version >= len(vs) {
				violate("%d/%d: key %s version %d was never sent", p, rd.offset, rd.key, rd.version)
				continue
			}
			if s := vs[rd.version]; s.acked && (s.partition != p || s.offset != rd.offset) {
				violate("%d/%d: key %s version %d, acked at %d/%d", p, rd.offset, rd.key, rd.version, s.partition, s.offset)
			}
			if l, ok := lastRead[rd.key]; ok && rd.version <= l.version {
				violate("%d/%d: key %s version %d after version %d at %d/%d", p, rd.offset, rd.key, rd.version, l.version, l.partition, l.offset)
			}
			lastRead[rd.key] = last{rd.version, p, rd.offset}
		}
	}
	keys := make([]string, 0, len(sent))
	for k := range sent {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vs := sent[k]
		latest := -1
		for v, s := range vs {
			if s.acked {
				latest = v
			}
		}
		if latest < 0 {
			continue // nothing acked: anything sent, or nothing, may be read
		}
		l, ok := lastRead[k]
		switch {
		case !ok:
			violate("key %s: its latest acked version %d (at %d/%d) lost: nothing read", k, latest, vs[latest].partition, vs[latest].offset)
		case l.version < latest:
			violate("key %s: last read version %d at %d/%d, but version %d was acked at %d/%d", k, l.version, l.partition, l.offset, latest, vs[latest].partition, vs[latest].offset)
		}
	}
	r.Removed = r.Offsets - r.Read
	return r
}

// brokerMetrics are the own cluster's brokers' metrics addresses (none attached).
func brokerMetrics(t target) []string {
	pt, ok := t.(procTarget)
	if !ok {
		return nil
	}
	var out []string
	for _, b := range pt.c.Brokers {
		out = append(out, b.Metrics)
	}
	return out
}

// counterSampler sums a counter over processes that restart: each process's counter
// starts from zero in each life, so a value below the last one seen starts a new life
// and the last one is banked. It samples every second until close.
type counterSampler struct {
	addrs []string
	name  string
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	banked map[string]float64
	last   map[string]float64
}

func startCounterSampler(addrs []string, name string, every time.Duration) *counterSampler {
	s := &counterSampler{addrs: addrs, name: name, stop: make(chan struct{}), done: make(chan struct{}),
		banked: map[string]float64{}, last: map[string]float64{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample scrapes every process once (one that does not answer is skipped).
func (s *counterSampler) sample() {
	for _, a := range s.addrs {
		if m, err := proccluster.Scrape(a); err == nil {
			s.observe(a, m[s.name])
		}
	}
}

func (s *counterSampler) close() {
	close(s.stop)
	<-s.done
}

func (s *counterSampler) observe(addr string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v < s.last[addr] {
		s.banked[addr] += s.last[addr]
	}
	s.last[addr] = v
}

func (s *counterSampler) total() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0.0
	for a, v := range s.last {
		n += s.banked[a] + v
	}
	return n
}
