package zonelab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client is a Kafka client implementation the lab drives.
type Client string

const (
	// Bench is `weir bench produce|consume` (franz-go) as a process in the zone. It is
	// untagged unless the binary has --client-id and --rack (it has neither yet).
	Bench Client = "bench"
	// Kcat is kcat (librdkafka) as a process in the zone; tagged: -X client.id=<tag>
	// -X client.rack=<zone>.
	Kcat Client = "kcat"
	// Franz is franz-go in this process, its connections opened in the zone's namespace;
	// tagged: kgo.ClientID(<tag>) and kgo.Rack(<zone>).
	Franz Client = "franz"
)

// ErrBenchUntagged: this weir binary's bench has no --client-id/--rack flags.
var ErrBenchUntagged = errors.New("zonelab: weir bench has no --client-id and --rack flags: it cannot run zone-tagged clients")

// ProduceSpec is one producer: Records records of RecordSize value bytes to Topic,
// acks=all, from Zone, bootstrapped from the zone's brokers.
type ProduceSpec struct {
	Zone       string
	Client     Client
	Topic      string
	Records    int
	RecordSize int
	// Tagged: the client says its zone (client.id = the lab's TagClientID, rack = zone).
	Tagged bool
}

// ConsumeSpec is one consumer that reads every partition of Topic from the start to the
// end offsets it finds when it starts (no group), from Zone.
type ConsumeSpec struct {
	Zone   string
	Client Client
	Topic  string
	Tagged bool
}

// ClientResult is what one client did. Bytes are record value bytes.
type ClientResult struct {
	Zone    string
	Client  Client
	Tagged  bool
	Records int64
	Bytes   int64
	Elapsed time.Duration
}

func (r ClientResult) String() string {
	tag := "untagged"
	if r.Tagged {
		tag = "tagged"
	}
	return fmt.Sprintf("zone %s %s (%s): %d records, %d bytes in %v", r.Zone, r.Client, tag, r.Records, r.Bytes, r.Elapsed.Round(time.Millisecond))
}

func (l *Lab) seeds(zone string) ([]string, error) {
	if err := l.checkZone(zone); err != nil || zone == Control {
		return nil, fmt.Errorf("zonelab: clients run in a zone, not %q", zone)
	}
	s := l.Bootstrap(zone)
	if len(s) == 0 {
		return nil, fmt.Errorf("zonelab: zone %s has no brokers", zone)
	}
	return s, nil
}

// Produce runs one producer to completion.
func (l *Lab) Produce(ctx context.Context, s ProduceSpec) (res ClientResult, err error) {
	res = ClientResult{Zone: s.Zone, Client: s.Client, Tagged: s.Tagged}
	seeds, err := l.seeds(s.Zone)
	if err != nil {
		return res, err
	}
	if s.Records <= 0 || s.RecordSize <= 0 {
		return res, errors.New("zonelab: Records and RecordSize must be positive")
	}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }() // res is the named result
	switch s.Client {
	case Bench:
		args := []string{l.cfg.Bin, "bench", "produce", "--bootstrap", strings.Join(seeds, ","), "--topic", s.Topic,
			"--records", fmt.Sprint(s.Records), "--record-size", fmt.Sprint(s.RecordSize), "--warmup", "0",
			"--interval", "1h", "--json"}
		if s.Tagged {
			if !l.benchTags() {
				return res, ErrBenchUntagged
			}
			args = append(args, "--client-id", l.TagClientID(s.Zone), "--rack", s.Zone)
		}
		var r struct {
			Produce struct {
				Acked  int64 `json:"records_acked"`
				Failed int64 `json:"records_failed"`
				Bytes  int64 `json:"bytes"`
			} `json:"produce"`
		}
		if err := l.runJSON(ctx, s.Zone, args, &r); err != nil {
			return res, err
		}
		res.Records, res.Bytes = r.Produce.Acked, r.Produce.Bytes
		if r.Produce.Failed > 0 || r.Produce.Acked != int64(s.Records) {
			return res, fmt.Errorf("zonelab: bench produce in %s: %d acked, %d failed of %d", s.Zone, r.Produce.Acked, r.Produce.Failed, s.Records)
		}
		return res, nil
	case Kcat:
		file, err := l.recordFile(s.Records, s.RecordSize)
		if err != nil {
			return res, err
		}
		defer os.Remove(file)
		args := []string{"kcat", "-P", "-b", strings.Join(seeds, ","), "-t", s.Topic, "-l", file,
			"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5"}
		args = append(args, l.kcatTags(s.Zone, s.Tagged)...)
		if _, err := l.runClient(ctx, s.Zone, args...); err != nil {
			return res, err
		}
		// kcat says nothing about deliveries; a failure shows in its exit status and,
		// for the caller, in the end offsets.
		res.Records, res.Bytes = int64(s.Records), int64(s.Records)*int64(s.RecordSize)
		return res, nil
	case Franz:
		return l.franzProduce(ctx, s, seeds, res)
	}
	return res, fmt.Errorf("zonelab: unknown client %q", s.Client)
}

// Consume runs one consumer to completion.
func (l *Lab) Consume(ctx context.Context, s ConsumeSpec) (res ClientResult, err error) {
	res = ClientResult{Zone: s.Zone, Client: s.Client, Tagged: s.Tagged}
	seeds, err := l.seeds(s.Zone)
	if err != nil {
		return res, err
	}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }() // res is the named result
	switch s.Client {
	case Bench:
		args := []string{l.cfg.Bin, "bench", "consume", "--bootstrap", strings.Join(seeds, ","), "--topic", s.Topic,
			"--from", "start", "--stop-at-end", "--warmup", "0", "--interval", "1h", "--json"}
		if s.Tagged {
			if !l.benchTags() {
				return res, ErrBenchUntagged
			}
			args = append(args, "--client-id", l.TagClientID(s.Zone), "--rack", s.Zone)
		}
		var r struct {
			Consume struct {
				Read       int64 `json:"records_read"`
				Bytes      int64 `json:"bytes"`
				ReachedEnd bool  `json:"reached_end"`
			} `json:"consume"`
		}
		if err := l.runJSON(ctx, s.Zone, args, &r); err != nil {
			return res, err
		}
		res.Records, res.Bytes = r.Consume.Read, r.Consume.Bytes
		if !r.Consume.ReachedEnd {
			return res, fmt.Errorf("zonelab: bench consume in %s did not reach the end (%d records)", s.Zone, res.Records)
		}
		return res, nil
	case Kcat:
		args := []string{"kcat", "-C", "-b", strings.Join(seeds, ","), "-t", s.Topic, "-o", "beginning", "-e", "-q",
			"-f", `%S\n`}
		if d := os.Getenv("WEIR_ZONELAB_KCAT_DEBUG"); d != "" {
			args = append(args, "-d", d) // librdkafka debug contexts, to the client's log
		}
		args = append(args, l.kcatTags(s.Zone, s.Tagged)...)
		out, err := l.runClient(ctx, s.Zone, args...)
		if err != nil {
			return res, err
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			n, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			if err != nil {
				return res, fmt.Errorf("zonelab: kcat output line %q", sc.Text())
			}
			res.Records++
			res.Bytes += n
		}
		return res, nil
	case Franz:
		return l.franzConsume(ctx, s, seeds, res)
	}
	return res, fmt.Errorf("zonelab: unknown client %q", s.Client)
}

func (l *Lab) kcatTags(zone string, tagged bool) []string {
	if !tagged {
		return nil
	}
	return []string{"-X", "client.id=" + l.TagClientID(zone), "-X", "client.rack=" + zone}
}

// runJSON runs argv in zone and decodes its standard output.
func (l *Lab) runJSON(ctx context.Context, zone string, argv []string, v any) error {
	out, err := l.runClient(ctx, zone, argv...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("zonelab: %s %s: output: %w", argv[1], argv[2], err)
	}
	return nil
}

// runClient runs a client process in zone, its standard error going to a log file of
// its own in the lab's directory, and returns its standard output.
func (l *Lab) runClient(ctx context.Context, zone string, argv ...string) ([]byte, error) {
	name := filepath.Base(argv[0])
	if name == "weir" || name == filepath.Base(l.cfg.Bin) {
		name = "bench-" + argv[2]
	} else if len(argv) > 1 {
		name += strings.ToLower(argv[1]) // kcat-p, kcat-c
	}
	f, err := os.CreateTemp(l.cfg.Dir, fmt.Sprintf("client-%s-%s-*.log", zone, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "# %s\n", strings.Join(argv, " "))
	cmd := l.Command(ctx, zone, argv...)
	cmd.Stderr = f
	out, err := cmd.Output()
	if err != nil {
		// The lab's directory goes with the test: the error carries the log's end.
		return out, fmt.Errorf("zonelab: %s in zone %s: %w (see %s); its log ends:\n%s", strings.Join(argv, " "), zone, err, f.Name(), logTail(f.Name(), 20))
	}
	return out, nil
}

// benchTags reports whether the binary's bench produce and consume take --client-id
// and --rack.
func (l *Lab) benchTags() bool {
	l.benchOnce.Do(func() {
		l.benchTagged = true
		for _, sub := range []string{"produce", "consume"} {
			out, _ := exec.Command(l.cfg.Bin, "bench", sub, "--help").CombinedOutput()
			if !bytes.Contains(out, []byte("-client-id")) || !bytes.Contains(out, []byte("-rack")) {
				l.benchTagged = false
			}
		}
	})
	return l.benchTagged
}

// recordFile writes n lines of size random printable bytes (kcat -l: one record a line).
func (l *Lab) recordFile(n, size int) (string, error) {
	f, err := os.CreateTemp(l.cfg.Dir, "records-*.txt")
	if err != nil {
		return "", err
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	w := bufio.NewWriterSize(f, 1<<20)
	line := make([]byte, size+1)
	line[size] = '\n'
	for i := 0; i < n; i++ {
		for j := 0; j < size; j++ {
			line[j] = alphabet[mrand.IntN(len(alphabet))]
		}
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// kgoClient is a franz-go client whose connections start in zone's namespace.
func (l *Lab) kgoClient(zone string, seeds []string, tagged bool, opts ...kgo.Opt) (*kgo.Client, error) {
	id := "zonelab"
	if tagged {
		id = l.TagClientID(zone)
		opts = append(opts, kgo.Rack(zone))
	}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.Dialer(l.DialContext(zone)),
		kgo.ClientID(id), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
}

func (l *Lab) franzProduce(ctx context.Context, s ProduceSpec, seeds []string, res ClientResult) (ClientResult, error) {
	cl, err := l.kgoClient(s.Zone, seeds, s.Tagged, kgo.DefaultProduceTopic(s.Topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(time.Minute))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	// Values are windows of one random pool: never changed, so sharing is safe.
	pool := make([]byte, 1<<20+s.RecordSize)
	for i := range pool {
		pool[i] = byte(mrand.Uint32())
	}
	var acked, bytesAcked atomic.Int64
	var firstErr atomic.Value
	for i := 0; i < s.Records; i++ {
		off := mrand.IntN(1 << 20)
		r := &kgo.Record{Value: pool[off : off+s.RecordSize]}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			acked.Add(1)
			bytesAcked.Add(int64(len(r.Value)))
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return res, err
	}
	res.Records, res.Bytes = acked.Load(), bytesAcked.Load()
	if err, _ := firstErr.Load().(error); err != nil {
		return res, fmt.Errorf("zonelab: franz produce in %s: %d of %d acked: %w", s.Zone, res.Records, s.Records, err)
	}
	return res, nil
}

func (l *Lab) franzConsume(ctx context.Context, s ConsumeSpec, seeds []string, res ClientResult) (ClientResult, error) {
	adm, err := l.kgoClient(s.Zone, seeds, false)
	if err != nil {
		return res, err
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	starts, err := ka.ListStartOffsets(ctx, s.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return res, fmt.Errorf("zonelab: start offsets of %s: %w", s.Topic, err)
	}
	ends, err := ka.ListEndOffsets(ctx, s.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return res, fmt.Errorf("zonelab: end offsets of %s: %w", s.Topic, err)
	}
	from := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition → end offset still to reach
	for p, o := range starts[s.Topic] {
		from[p] = kgo.NewOffset().At(o.Offset)
		if e := ends[s.Topic][p].Offset; e > o.Offset {
			left[p] = e
		}
	}
	cl, err := l.kgoClient(s.Zone, seeds, s.Tagged, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: from}))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("zonelab: franz consume in %s: %d records read, partitions %v not at their end: %w", s.Zone, res.Records, left, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
				ferr = err
			}
		})
		if ferr != nil {
			return res, fmt.Errorf("zonelab: franz consume in %s: %w", s.Zone, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok {
				if r.Offset < end {
					res.Records++
					res.Bytes += int64(len(r.Value))
				}
				if r.Offset+1 >= end {
					delete(left, r.Partition)
				}
			}
		})
	}
	return res, nil
}

// CreateTopic creates topic with partitions partitions (through zone's brokers) and
// waits until every partition has a leader.
func (l *Lab) CreateTopic(ctx context.Context, zone, topic string, partitions int32) error {
	seeds, err := l.seeds(zone)
	if err != nil {
		return err
	}
	cl, err := l.kgoClient(zone, seeds, false)
	if err != nil {
		return err
	}
	defer cl.Close()
	ka := kadm.NewClient(cl)
	if _, err := ka.CreateTopic(ctx, partitions, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("zonelab: create topic %s: %w", topic, err)
	}
	for {
		leaders, err := l.leaders(ctx, ka, topic)
		if err == nil && len(leaders) == int(partitions) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zonelab: topic %s not ready: %v (%w)", topic, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *Lab) leaders(ctx context.Context, ka *kadm.Client, topic string) (map[int32]int32, error) {
	td, err := ka.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, d.Err)
	}
	out := map[int32]int32{}
	for p, pd := range d.Partitions {
		if pd.Err != nil || pd.Leader < 0 {
			return nil, fmt.Errorf("partition %d: leader %d, %v", p, pd.Leader, pd.Err)
		}
		out[p] = pd.Leader
	}
	return out, nil
}

// TopicState is where a topic's partitions are led and how many records it holds.
type TopicState struct {
	// LeaderZone is each partition's leader's zone.
	LeaderZone map[int32]string
	// Records is the sum over partitions of end offset - start offset.
	Records int64
}

// Topic reads topic's leaders and offsets (through zone's brokers).
func (l *Lab) Topic(ctx context.Context, zone, topic string) (TopicState, error) {
	var st TopicState
	seeds, err := l.seeds(zone)
	if err != nil {
		return st, err
	}
	cl, err := l.kgoClient(zone, seeds, false)
	if err != nil {
		return st, err
	}
	defer cl.Close()
	ka := kadm.NewClient(cl)
	leaders, err := l.leaders(ctx, ka, topic)
	if err != nil {
		return st, err
	}
	st.LeaderZone = map[int32]string{}
	for p, id := range leaders {
		st.LeaderZone[p] = "?"
		for _, b := range l.Brokers {
			if int32(b.ID) == id {
				st.LeaderZone[p] = b.Zone
			}
		}
	}
	starts, err := ka.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return st, err
	}
	ends, err := ka.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return st, err
	}
	for p, e := range ends[topic] {
		st.Records += e.Offset - starts[topic][p].Offset
	}
	return st, nil
}

// logTail returns the last n lines of the file at path (or why it cannot).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
