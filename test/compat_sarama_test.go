package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaCompat drives a weir broker process with IBM/sarama, once per Kafka version
// setting: sarama picks each request's version from config.Version (capped by the
// broker's ApiVersions answer from V2_4 on), so the old settings exercise low protocol
// versions (e.g. Produce v3-v5, Fetch v4-v6, JoinGroup v1-v2, OffsetCommit v2-v3) and
// the newest one the highest versions both sides implement. Each run asserts:
//
//  1. ClusterAdmin: DescribeCluster lists the one broker, CreateTopic makes a 3-partition
//     topic, ListTopics and the client's metadata show it.
//  2. A SyncProducer with acks=all, and then one with Idempotent=true (MaxOpenRequests=1),
//     each send 100 keyed records; every ack carries an offset, no offset is acked twice,
//     and each partition's acked offsets are dense from 0. ListOffsets (GetOffset newest)
//     gives each partition's record count.
//  3. A partition consumer reads every partition from OffsetOldest: offsets 0..n-1 in
//     order, each holding the acked value.
//  4. A ConsumerGroup (OffsetOldest) consumes all records, marks and commits them; the
//     committed offsets (admin ListConsumerGroupOffsets) equal the high watermarks; after
//     30 more records are produced, a second run of the same group reads exactly those 30
//     and nothing older.
//
// A last subtest produces gzip, snappy, lz4 and zstd batches (idempotent, acks=all) and
// reads them back: dense offsets, acked values.
func TestSaramaCompat(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	b := startCompatBroker(t)

	logf, err := os.Create(filepath.Join(b.dir, "sarama.log"))
	if err != nil {
		t.Fatal(err)
	}
	saramaLog.set(logf)
	t.Cleanup(func() {
		saramaLog.set(io.Discard)
		if t.Failed() {
			t.Logf("sarama.log, last 60 lines:\n%s", grepTail(filepath.Join(b.dir, "sarama.log"), 60, true))
		}
		logf.Close()
	})

	for _, tc := range []struct {
		name    string
		version sarama.KafkaVersion
	}{
		{"V0_11_0_0", sarama.V0_11_0_0},
		{"V1_0_0_0", sarama.V1_0_0_0},
		{"V2_1_0_0", sarama.V2_1_0_0},
		{"V3_6_0_0", sarama.V3_6_0_0},
		{"MaxVersion_" + sarama.MaxVersion.String(), sarama.MaxVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			b.wire.resetSeen()
			saramaRun(t, b, tc.version, "sarama-"+strings.ReplaceAll(tc.version.String(), ".", "-"))
			t.Logf("%s done in %v; API versions on the wire: %s", tc.name, time.Since(start).Round(time.Millisecond), b.wire.summary())
		})
	}
	// Compressed batches are stored and served as sent; the client decompresses them.
	t.Run("compression", func(t *testing.T) {
		for _, codec := range []sarama.CompressionCodec{sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
			saramaCompressed(t, b, codec)
		}
	})
}

// saramaLog is where sarama.Logger writes. sarama.Logger is a global that sarama's
// background goroutines (e.g. asynchronous broker closes) read after Close returns, so it
// is assigned once and only its destination changes.
var saramaLog = func() *swapWriter {
	w := &swapWriter{w: io.Discard}
	sarama.Logger = log.New(w, "[sarama] ", log.Ltime|log.Lmicroseconds)
	return w
}()

type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func saramaConfig(version sarama.KafkaVersion, clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = clientID
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Net.WriteTimeout = 30 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Admin.Timeout = 20 * time.Second
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Producer.Flush.Messages = 10 // several records per batch
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 250 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

func saramaRun(t *testing.T, b *compatBroker, version sarama.KafkaVersion, name string) {
	const partitions = 3
	topic := name + "-topic"
	group := name + "-group"
	addrs := []string{b.bootstrap}
	cfg := saramaConfig(version, name)

	// 1. Admin: cluster, create topic, list topics.
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer admin.Close()
	brokers, controller, err := admin.DescribeCluster()
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if len(brokers) != 1 || brokers[0].Addr() != b.bootstrap {
		var got []string
		for _, br := range brokers {
			got = append(got, fmt.Sprintf("%d@%s", br.ID(), br.Addr()))
		}
		t.Fatalf("DescribeCluster brokers = %v, want one at %s", got, b.bootstrap)
	}
	if controller != brokers[0].ID() {
		t.Errorf("DescribeCluster controller = %d, want the broker %d", controller, brokers[0].ID())
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("second CreateTopic: %v, want %v", err, sarama.ErrTopicAlreadyExists)
	}
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if d, ok := topics[topic]; !ok || d.NumPartitions != partitions {
		t.Fatalf("ListTopics: %s = %+v (present %v), want %d partitions", topic, d, ok, partitions)
	}

	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	if ps, err := client.Partitions(topic); err != nil || len(ps) != partitions {
		t.Fatalf("client.Partitions(%s) = %v, %v; want %d partitions", topic, ps, err, partitions)
	}

	// 2. Produce: acks=all, then idempotent.
	acked := newProduced()
	saramaProduce(t, addrs, cfg, topic, "plain", 100, acked)
	idem := saramaConfig(version, name+"-idem")
	idem.Producer.Idempotent = true
	idem.Net.MaxOpenRequests = 1
	idem.Producer.Retry.Max = 10
	_, idemBefore := b.wire.produceStats()
	saramaProduce(t, addrs, idem, topic, "idem", 100, acked)
	if _, idemAfter := b.wire.produceStats(); idemAfter == idemBefore {
		t.Errorf("the idempotent producer sent no batch with a producer ID")
	}
	b.wire.checkAllAcks(t)
	want := acked.dense(t)
	if n := acked.count(); n != 200 {
		t.Fatalf("acked %d records, want 200", n)
	}
	for p := int32(0); p < partitions; p++ {
		hwm, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("GetOffset(%d, newest): %v", p, err)
		}
		if hwm != int64(len(want[p])) {
			t.Errorf("partition %d: ListOffsets newest = %d, want %d", p, hwm, len(want[p]))
		}
		if first, err := client.GetOffset(topic, p, sarama.OffsetOldest); err != nil || first != 0 {
			t.Errorf("partition %d: ListOffsets oldest = %d, %v; want 0", p, first, err)
		}
	}

	// 3. Consume every partition from the beginning.
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		if len(want[p]) == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition(%d): %v", p, err)
		}
		timeout := time.After(20 * time.Second)
		for i := 0; i < len(want[p]); i++ {
			select {
			case m := <-pc.Messages():
				if m.Offset != int64(i) || string(m.Value) != want[p][i] {
					t.Fatalf("partition %d: record %d is offset %d %q, want offset %d %q", p, i, m.Offset, m.Value, i, want[p][i])
				}
			case err := <-pc.Errors():
				t.Fatalf("partition %d consumer: %v", p, err)
			case <-timeout:
				t.Fatalf("partition %d: consumed %d of %d records in 20 s", p, i, len(want[p]))
			}
		}
		pc.Close()
	}
	consumer.Close()

	// 4. Consumer group: all records, commit; then a second run reads only new records.
	hwms := map[int32]int64{}
	for p, vals := range want {
		hwms[p] = int64(len(vals))
	}
	got := saramaGroupRun(t, addrs, cfg, group, topic, 200, nil)
	for p, vals := range want {
		if len(got[p]) != len(vals) {
			t.Fatalf("group run 1: partition %d: %d records, want %d", p, len(got[p]), len(vals))
		}
		for i, m := range got[p] {
			if m.off != int64(i) || m.val != vals[i] {
				t.Fatalf("group run 1: partition %d record %d: offset %d %q, want %d %q", p, i, m.off, m.val, i, vals[i])
			}
		}
	}
	checkSaramaCommitted(t, admin, group, topic, hwms)

	more := newProduced()
	saramaProduce(t, addrs, cfg, topic, "more", 30, more)
	got = saramaGroupRun(t, addrs, cfg, group, topic, 30, func(p int32, off int64, val string) error {
		if off < hwms[p] || !strings.HasPrefix(val, "more-") {
			return fmt.Errorf("second run of the group read partition %d offset %d %q, committed offset was %d: it did not resume after the commit", p, off, val, hwms[p])
		}
		return nil
	})
	n := 0
	for p, ms := range got {
		for _, m := range ms {
			if v, ok := more.recs[p][m.off]; !ok || v != m.val {
				t.Fatalf("group run 2: partition %d offset %d %q was not acked there", p, m.off, m.val)
			}
			n++
		}
		hwms[p] += int64(len(more.recs[p]))
	}
	if n != 30 {
		t.Fatalf("group run 2 read %d records, want 30", n)
	}
	checkSaramaCommitted(t, admin, group, topic, hwms)
}

// saramaProduce sends n keyed records through a SyncProducer and records each ack.
func saramaProduce(t *testing.T, addrs []string, cfg *sarama.Config, topic, prefix string, n int, acked *produced) {
	t.Helper()
	prod, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("NewSyncProducer(%s): %v", prefix, err)
	}
	defer prod.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("%s-%03d", prefix, i)),
		}
	}
	if err := prod.SendMessages(msgs); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			t.Fatalf("SendMessages(%s): %d failed, first: %v", prefix, len(pe), pe[0].Err)
		}
		t.Fatalf("SendMessages(%s): %v", prefix, err)
	}
	for _, m := range msgs {
		v, _ := m.Value.Encode()
		if m.Offset < 0 {
			t.Fatalf("%s: ack without offset for %q", prefix, v)
		}
		if err := acked.ack(m.Partition, m.Offset, string(v)); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
	}
}

type groupMsg struct {
	off int64
	val string
}

type saramaHandler struct {
	want   int
	check  func(p int32, off int64, val string) error
	cancel context.CancelFunc

	mu   sync.Mutex
	n    int
	got  map[int32][]groupMsg
	err  error
	once sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			if h.check != nil && h.err == nil {
				h.err = h.check(m.Partition, m.Offset, string(m.Value))
			}
			h.got[m.Partition] = append(h.got[m.Partition], groupMsg{m.Offset, string(m.Value)})
			h.n++
			done := h.n >= h.want || h.err != nil
			h.mu.Unlock()
			sess.MarkMessage(m, "")
			if done {
				h.once.Do(func() {
					sess.Commit() // synchronous: the commit is acked before we stop
					h.cancel()
				})
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// saramaGroupRun joins group, consumes until want records arrived, commits and leaves.
func saramaGroupRun(t *testing.T, addrs []string, cfg *sarama.Config, group, topic string, want int, check func(int32, int64, string) error) map[int32][]groupMsg {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatalf("NewConsumerGroup: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	h := &saramaHandler{want: want, check: check, cancel: cancel, got: map[int32][]groupMsg{}}
	var errs []error
	var emu sync.Mutex
	go func() {
		for err := range cg.Errors() {
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		}
	}()
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
			t.Fatalf("ConsumerGroup.Consume: %v", err)
		}
	}
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err := cg.Close(); err != nil {
		t.Errorf("ConsumerGroup.Close: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		t.Fatal(h.err)
	}
	emu.Lock()
	defer emu.Unlock()
	if timedOut {
		t.Fatalf("group %s: %d of %d records in 25 s; group errors: %v", group, h.n, want, errs)
	}
	if len(errs) > 0 {
		t.Errorf("group %s errors: %v", group, errs)
	}
	for _, ms := range h.got {
		sort.Slice(ms, func(i, j int) bool { return ms[i].off < ms[j].off })
	}
	return h.got
}

func checkSaramaCommitted(t *testing.T, admin sarama.ClusterAdmin, group, topic string, want map[int32]int64) {
	t.Helper()
	var parts []int32
	for p := range want {
		parts = append(parts, p)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	for p, w := range want {
		blk := resp.GetBlock(topic, p)
		if blk == nil || blk.Err != sarama.ErrNoError || blk.Offset != w {
			t.Fatalf("group %s partition %d committed offset: %+v, want %d", group, p, blk, w)
		}
	}
}

// saramaCompressed produces 50 records in batches compressed with codec and reads them
// back from the beginning.
func saramaCompressed(t *testing.T, b *compatBroker, codec sarama.CompressionCodec) {
	t.Helper()
	topic := "sarama-compressed-" + codec.String()
	cfg := saramaConfig(sarama.MaxVersion, "sarama-"+codec.String())
	cfg.Producer.Compression = codec
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	acked := newProduced()
	saramaProduce(t, []string{b.bootstrap}, cfg, topic, codec.String(), 50, acked)
	want := acked.dense(t)
	consumer, err := sarama.NewConsumer([]string{b.bootstrap}, cfg)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	defer consumer.Close()
	for p, vals := range want {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("%s: ConsumePartition(%d): %v", codec, p, err)
		}
		timeout := time.After(20 * time.Second)
		for i := range vals {
			select {
			case m := <-pc.Messages():
				if m.Offset != int64(i) || string(m.Value) != vals[i] {
					t.Fatalf("%s partition %d: record %d is offset %d %q, want offset %d %q", codec, p, i, m.Offset, m.Value, i, vals[i])
				}
			case err := <-pc.Errors():
				t.Fatalf("%s partition %d consumer: %v", codec, p, err)
			case <-timeout:
				t.Fatalf("%s partition %d: consumed %d of %d records in 20 s", codec, p, i, len(vals))
			}
		}
		pc.Close()
	}
}
