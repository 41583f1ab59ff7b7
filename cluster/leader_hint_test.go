package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// noBalancer turns the controllers' balancer off: the tests that use it move partitions
// themselves and must know who leads them.
func noBalancer(cfg *Config) {
	cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
}

// movePartition moves partition index of topic to broker to (through broker via's
// controller client) and waits until every running broker's view has it led there,
// the move complete; it returns the partition as the views then show it.
func movePartition(t *testing.T, c *Cluster, via int32, tp *metadata.Topic, index, to int32) metadata.Partition {
	t.Helper()
	if via < 1 || int(via) > len(c.brokers) || c.Broker(int(via-1)) == nil {
		t.Fatalf("moving %s/%d: broker %d is not running", tp.Name, index, via)
	}
	if err := c.Broker(int(via-1)).Client.MovePartition(ctxFor(t, 30*time.Second), tp.ID, index, to); err != nil {
		// Refused because to leads it already: a retry of a request that was applied
		// (its answer lost to a controller leader change) or a failover on a busy
		// machine got there first. The state the caller asked for holds.
		cur, ok := c.partitionNow(tp.Name, index)
		if !ok || cur.Leader != to || !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("moving %s/%d to broker %d: %v", tp.Name, index, to, err)
		}
	}
	var p metadata.Partition
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("every broker sees %s/%d led by %d", tp.Name, index, to), func() bool {
		for i := range c.brokers {
			n := c.Broker(i)
			if n == nil {
				continue
			}
			bt := n.Client.View().Topics[tp.Name]
			if bt == nil {
				return false
			}
			p = bt.Partitions[index]
			if p.Leader != to || p.Moving || p.Recovering {
				return false
			}
		}
		return true
	})
	return p
}

// partitionNow is a partition as the first running broker's view shows it now.
func (c *Cluster) partitionNow(topic string, index int32) (metadata.Partition, bool) {
	for i := range c.brokers {
		if n := c.Broker(i); n != nil {
			if tp := n.Client.View().Topics[topic]; tp != nil && int(index) < len(tp.Partitions) {
				return tp.Partitions[index], true
			}
		}
	}
	return metadata.Partition{}, false
}

// KIP-951 on a real cluster, through franz-go over TCP: after a graceful move, a Produce
// (v11) and a Fetch (v16) sent to the old leader are refused NOT_LEADER_OR_FOLLOWER with
// the new leader and its new epoch filled in, and the new leader's advertised address
// listed. A franz-go producer whose metadata still names the old leader then follows the
// hint: its next record is acked by the new leader without a Metadata request in
// between (without the hint franz-go asks for metadata first), and so does a consumer
// whose fetch the old leader refused.
func TestLeaderHintAfterMove(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startCluster(t, noBalancer)
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, "hinted"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "hinted")
	from := tp.Partitions[0].Leader
	to := from%3 + 1

	// A producer that learns the old leader, and counts its requests by key and broker.
	var metadataReqs atomic.Int32
	var mu sync.Mutex
	produced := map[int32]int{} // broker -> produce requests written
	prod := newClient(t, c, append(franzFastFailover, kgo.DefaultProduceTopic("hinted"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.WithHooks(writeHook(func(node int32, key int16) {
			switch kmsg.Key(key) {
			case kmsg.Metadata:
				metadataReqs.Add(1)
			case kmsg.Produce:
				mu.Lock()
				produced[node]++
				mu.Unlock()
			}
		})))...)
	if err := prod.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A consumer of the partition, long-polling the old leader when the move comes. When
	// all its partitions are refused, franz-go also asks for metadata in the background,
	// but no sooner than MetadataMinAge after the last time (here 30 s, so the test can
	// tell): only a refusal without a usable hint makes it ask at once, before moving.
	var consMetadata, consFetchesTo atomic.Int32
	cons := newClient(t, c, append(franzFastFailover, kgo.MetadataMinAge(30*time.Second), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"hinted": {0: kgo.NewOffset().AtStart()}}),
		kgo.WithHooks(writeHook(func(node int32, key int16) {
			switch {
			case kmsg.Key(key) == kmsg.Metadata:
				consMetadata.Add(1)
			case kmsg.Key(key) == kmsg.Fetch && node == to:
				consFetchesTo.Add(1)
			}
		})))...)
	pollUntil := func(value string) {
		t.Helper()
		ctx := ctxFor(t, 30*time.Second)
		for {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the consumer did not read %q: %v", value, fs.Errors())
			}
			found := false
			fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == value })
			if found {
				return
			}
		}
	}
	pollUntil("before")
	consBefore := consMetadata.Load()

	moved := movePartition(t, c, from, tp, 0, to)
	if moved.LeaderEpoch <= tp.Partitions[0].LeaderEpoch {
		t.Fatalf("the move did not bump the leader epoch: %d -> %d", tp.Partitions[0].LeaderEpoch, moved.LeaderEpoch)
	}
	toAddr := c.KafkaAddrs()[to-1]

	old, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[from-1]))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldLeader := old.SeedBrokers()[0]
	checkNodes := func(api string, nodes map[int32]string) {
		t.Helper()
		if len(nodes) != 1 || nodes[to] != toAddr {
			t.Errorf("%s lists endpoints %v, want only broker %d at %s", api, nodes, to, toAddr)
		}
	}

	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 10000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "hinted"
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Records = kafkatest.Batch(-1, -1, -1, []byte("to the old leader"))
	prt.Partitions = append(prt.Partitions, prp)
	preq.Topics = append(preq.Topics, prt)
	presp, err := preq.RequestWith(ctxFor(t, 30*time.Second), oldLeader)
	if err != nil {
		t.Fatal(err)
	}
	pp := presp.Topics[0].Partitions[0]
	if presp.Version < 10 || pp.ErrorCode != kerr.NotLeaderForPartition.Code ||
		pp.CurrentLeader.LeaderID != to || pp.CurrentLeader.LeaderEpoch != moved.LeaderEpoch {
		t.Errorf("produce v%d to the old leader %d: %v, current leader %d@%d; want NOT_LEADER_OR_FOLLOWER naming %d@%d",
			presp.Version, from, kerr.ErrorForCode(pp.ErrorCode), pp.CurrentLeader.LeaderID, pp.CurrentLeader.LeaderEpoch, to, moved.LeaderEpoch)
	}
	checkNodes("produce", nodeAddrs(presp.Brokers, func(b kmsg.ProduceResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port }))

	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MaxWaitMillis, freq.MinBytes, freq.MaxBytes = -1, 0, 1, 1<<20
	frt := kmsg.NewFetchRequestTopic()
	frt.Topic, frt.TopicID = "hinted", tp.ID
	frp := kmsg.NewFetchRequestTopicPartition()
	frp.CurrentLeaderEpoch, frp.PartitionMaxBytes = tp.Partitions[0].LeaderEpoch, 1<<20
	frt.Partitions = append(frt.Partitions, frp)
	freq.Topics = append(freq.Topics, frt)
	fresp, err := freq.RequestWith(ctxFor(t, 30*time.Second), oldLeader)
	if err != nil {
		t.Fatal(err)
	}
	fp := fresp.Topics[0].Partitions[0]
	if fresp.Version < 16 || !(fp.ErrorCode == kerr.NotLeaderForPartition.Code || fp.ErrorCode == kerr.FencedLeaderEpoch.Code) ||
		fp.CurrentLeader.LeaderID != to || fp.CurrentLeader.LeaderEpoch != moved.LeaderEpoch {
		t.Errorf("fetch v%d from the old leader %d: %v, current leader %d@%d; want NOT_LEADER_OR_FOLLOWER naming %d@%d",
			fresp.Version, from, kerr.ErrorForCode(fp.ErrorCode), fp.CurrentLeader.LeaderID, fp.CurrentLeader.LeaderEpoch, to, moved.LeaderEpoch)
	}
	checkNodes("fetch", nodeAddrs(fresp.Brokers, func(b kmsg.FetchResponseBroker) (int32, string, int32) { return b.NodeID, b.Host, b.Port }))

	// The producer still believes in the old leader: its next record goes there, is
	// refused with the hint, and goes to the new leader with no Metadata request.
	mu.Lock()
	atTo := produced[to]
	mu.Unlock()
	before := metadataReqs.Load()
	r, err := prod.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Value: []byte("after")}).First()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	sentTo := produced[to] - atTo
	mu.Unlock()
	if n := metadataReqs.Load() - before; n != 0 || sentTo == 0 {
		t.Errorf("after the move the producer sent %d Metadata requests and %d produce requests to the new leader; want 0 and at least 1 (it follows the hint)", n, sentTo)
	}
	if r.Offset != 1 {
		t.Errorf("the record after the move is at offset %d, want 1", r.Offset)
	}

	// The consumer's fetch at the old leader was refused with the hint too: it reads
	// the new record from the new leader without a Metadata request first.
	pollUntil("after")
	if n := consMetadata.Load() - consBefore; n != 0 || consFetchesTo.Load() == 0 {
		t.Errorf("after the move the consumer sent %d Metadata requests and %d fetches to the new leader; want 0 and at least 1 (it follows the hint)", n, consFetchesTo.Load())
	}
}

// nodeAddrs maps the brokers an answer lists to their host:port.
func nodeAddrs[B any](bs []B, get func(B) (int32, string, int32)) map[int32]string {
	m := map[int32]string{}
	for _, b := range bs {
		id, host, port := get(b)
		m[id] = net.JoinHostPort(host, fmt.Sprint(port))
	}
	return m
}

// writeHook calls fn for every request a franz-go client writes.
type writeHook func(node int32, key int16)

func (h writeHook) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h(meta.NodeID, key)
	}
}

// librdkafka (kcat, with the settings docs/CLIENTS.md recommends) produces through moves of
// its partition back and forth: every line is delivered once, in order, and no delivery
// fails. The old leader's refusals must be ones librdkafka retries after a metadata
// refresh: an UNKNOWN_SERVER_ERROR would fail the message for good.
func TestKcatProducesThroughMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
			t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
		}
		t.Skip("kcat not installed")
	}
	c := startCluster(t, noBalancer)
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, "kmoves"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "kmoves")

	cmd := exec.CommandContext(ctxFor(t, 2*time.Minute), kcat, append([]string{"-b", c.Bootstrap(), "-P", "-t", "kmoves", "-p", "0",
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5"}, kcatFastFailover...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// One line every 10 ms until the moves are done; then EOF, and kcat flushes and exits.
	var sent atomic.Int32
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer stdin.Close()
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(stdin, "line-%05d\n", i); err != nil {
				return
			}
			sent.Add(1)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-stop:
				return
			}
		}
	}()
	testutil.Eventually(t, 30*time.Second, "kcat writing", func() bool { return sent.Load() > 50 })
	leader := tp.Partitions[0].Leader
	for round := 0; round < 3; round++ {
		to := leader%3 + 1
		movePartition(t, c, leader, tp, 0, to)
		leader = to
		mark := sent.Load()
		testutil.Eventually(t, 30*time.Second, "kcat keeps writing", func() bool { return sent.Load() > mark+30 })
	}
	close(stop)
	<-done
	if err := cmd.Wait(); err != nil || strings.Contains(stderr.String(), "Delivery failed") {
		t.Fatalf("kcat producer: %v\n%s", err, stderr.String())
	}
	n := int(sent.Load())

	out, err := exec.CommandContext(ctxFor(t, 60*time.Second), kcat, "-b", c.Bootstrap(), "-C", "-t", "kmoves", "-p", "0",
		"-o", "beginning", "-e", "-f", "%o %s\n").Output()
	if err != nil {
		t.Fatalf("kcat consumer: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("read back %d lines, sent %d (stderr of the producer:\n%s)", len(lines), n, stderr.String())
	}
	for i, l := range lines {
		if want := fmt.Sprintf("%d line-%05d", i, i); l != want {
			t.Fatalf("offset %d: %q, want %q", i, l, want)
		}
	}
}

// kcatFastFailover are docs/CLIENTS.md's librdkafka settings for a ~1 s failover.
var kcatFastFailover = []string{
	"-X", "retry.backoff.ms=50",
	"-X", "topic.metadata.refresh.fast.interval.ms=100",
	"-X", "socket.timeout.ms=5000",
	"-X", "socket.connection.setup.timeout.ms=5000",
	"-X", "reconnect.backoff.max.ms=1000",
}

// franzFastFailover are docs/CLIENTS.md's franz-go settings for a ~1 s failover.
var franzFastFailover = []kgo.Opt{
	kgo.RetryBackoffFn(func(fails int) time.Duration { return min(50*time.Millisecond<<min(fails, 5), time.Second) }),
	kgo.MetadataMinAge(500 * time.Millisecond),
	kgo.ProduceRequestTimeout(3 * time.Second),
	kgo.RequestTimeoutOverhead(2 * time.Second),
	kgo.DialTimeout(2 * time.Second),
	kgo.FetchMaxWait(500 * time.Millisecond),
}
