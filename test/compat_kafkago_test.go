package test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestKafkaGoCompat drives a weir broker process with segmentio/kafka-go, which has two
// protocol stacks: kafka.Client/Writer (package protocol, versions negotiated with
// ApiVersions) and kafka.Conn/Reader (older code with fixed versions per API, e.g.
// ListOffsets v1, JoinGroup v1-v2, SyncGroup v0, OffsetCommit v2). It asserts:
//
//  1. Client.Metadata lists the one broker at the advertised address; Client.CreateTopics
//     makes a 3-partition topic (a second time: TOPIC_ALREADY_EXISTS); Conn.CreateTopics
//     makes another; Conn.ReadPartitions shows both with the broker as leader.
//  2. A Writer with RequiredAcks=RequireAll and the Hash balancer writes 200 keyed records;
//     Client.Produce writes 10 more to partition 0 in one batch. Every ack (Writer
//     Completion, ProduceResponse.BaseOffset) carries an offset, none twice, dense from 0
//     per partition; ListOffsets (Conn.ReadOffsets) agrees.
//  3. A partition Reader per partition reads from FirstOffset: offsets 0..n-1, each with
//     the acked value.
//  4. A group Reader (GroupID, StartOffset=FirstOffset, synchronous commits) fetches and
//     commits all records; Client.OffsetFetch shows the high watermarks committed; after 30
//     more records, a second group Reader reads exactly those 30 and nothing older.
func TestKafkaGoCompat(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	b := startCompatBroker(t)
	ctx := ctxT(t, 90*time.Second)
	const partitions = 3
	topic, topic2, group := "kafkago-topic", "kafkago-conn-topic", "kafkago-group"

	logf, err := os.Create(filepath.Join(b.dir, "kafkago.log"))
	if err != nil {
		t.Fatal(err)
	}
	lg := log.New(logf, "[kafka-go] ", log.Ltime|log.Lmicroseconds)
	elg := log.New(logf, "[kafka-go ERROR] ", log.Ltime|log.Lmicroseconds)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kafkago.log errors (first 30):\n%s", grepTail(filepath.Join(b.dir, "kafkago.log"), 30, false, "ERROR"))
			t.Logf("kafkago.log, last 40 lines:\n%s", grepTail(filepath.Join(b.dir, "kafkago.log"), 40, true))
		}
		logf.Close()
	})
	start := time.Now()
	step := func(name string) {
		t.Logf("%-28s at %v", name, time.Since(start).Round(time.Millisecond))
	}

	// 1. Metadata and topic creation.
	client := &kafka.Client{Addr: kafka.TCP(b.bootstrap), Timeout: 20 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatalf("Client.Metadata: %v", err)
	}
	if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(md.Brokers[0].Port)) != b.bootstrap {
		t.Fatalf("Metadata brokers = %+v, want one at %s", md.Brokers, b.bootstrap)
	}
	if md.Controller.ID != md.Brokers[0].ID {
		t.Errorf("Metadata controller = %+v, want broker %d", md.Controller, md.Brokers[0].ID)
	}
	ct, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err != nil || ct.Errors[topic] != nil {
		t.Fatalf("Client.CreateTopics: %v, %v", err, ct)
	}
	ct, err = client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err != nil || !errors.Is(ct.Errors[topic], kafka.TopicAlreadyExists) {
		t.Errorf("second Client.CreateTopics: %v, %v; want TOPIC_ALREADY_EXISTS", err, ct)
	}
	conn, err := kafka.DialContext(ctx, "tcp", b.bootstrap)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic2, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("Conn.CreateTopics: %v", err)
	}
	parts, err := conn.ReadPartitions(topic, topic2)
	conn.Close()
	if err != nil {
		t.Fatalf("Conn.ReadPartitions: %v", err)
	}
	perTopic := map[string]int{}
	for _, p := range parts {
		perTopic[p.Topic]++
		if net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port)) != b.bootstrap {
			t.Errorf("%s/%d leader %+v, want %s", p.Topic, p.ID, p.Leader, b.bootstrap)
		}
	}
	if perTopic[topic] != partitions || perTopic[topic2] != 1 {
		t.Fatalf("ReadPartitions: %v, want %s:%d %s:1", perTopic, topic, partitions, topic2)
	}
	step("metadata and create topics")

	// 2. Produce with acks=all.
	acked := newProduced()
	var cmu sync.Mutex
	var completionErrs []error
	w := &kafka.Writer{
		Addr:         kafka.TCP(b.bootstrap),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    10,
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  5,
		Logger:       lg,
		ErrorLogger:  elg,
		Completion: func(msgs []kafka.Message, err error) {
			cmu.Lock()
			defer cmu.Unlock()
			if err != nil {
				completionErrs = append(completionErrs, err)
				return
			}
			for _, m := range msgs {
				if err := acked.ack(int32(m.Partition), m.Offset, string(m.Value)); err != nil {
					completionErrs = append(completionErrs, err)
				}
			}
		},
	}
	msgs := make([]kafka.Message, 200)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("w-%03d", i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("Writer.WriteMessages: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Writer.Close: %v", err)
	}
	cmu.Lock()
	if len(completionErrs) > 0 {
		t.Fatalf("Writer completion errors: %v", completionErrs)
	}
	cmu.Unlock()
	if n := acked.count(); n != 200 {
		t.Fatalf("Writer acked %d records, want 200", n)
	}
	before := int64(len(acked.recs[0]))
	var recs []kafka.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte("direct")), Value: kafka.NewBytes([]byte(fmt.Sprintf("direct-%d", i)))})
	}
	pr, err := client.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: 0, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
	if err != nil || pr.Error != nil {
		t.Fatalf("Client.Produce: %v, %+v", err, pr)
	}
	if pr.BaseOffset != before {
		t.Errorf("Client.Produce base offset %d, want %d (records already in partition 0)", pr.BaseOffset, before)
	}
	for i := 0; i < 10; i++ {
		if err := acked.ack(0, pr.BaseOffset+int64(i), fmt.Sprintf("direct-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	want := acked.dense(t)
	b.wire.checkAllAcks(t)
	for p := 0; p < partitions; p++ {
		lc, err := kafka.DialLeader(ctx, "tcp", b.bootstrap, topic, p)
		if err != nil {
			t.Fatalf("DialLeader(%d): %v", p, err)
		}
		lc.SetDeadline(time.Now().Add(20 * time.Second))
		first, last, err := lc.ReadOffsets()
		lc.Close()
		if err != nil || first != 0 || last != int64(len(want[int32(p)])) {
			t.Errorf("partition %d ReadOffsets = %d, %d, %v; want 0, %d", p, first, last, err, len(want[int32(p)]))
		}
	}
	step("produce")

	// 3. Read every partition from the first offset.
	for p := 0; p < partitions; p++ {
		vals := want[int32(p)]
		if len(vals) == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{b.bootstrap}, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 250 * time.Millisecond,
			Logger: lg, ErrorLogger: elg,
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for i := range vals {
			m, err := r.ReadMessage(rctx)
			if err != nil {
				t.Fatalf("partition %d: ReadMessage %d of %d: %v", p, i, len(vals), err)
			}
			if m.Offset != int64(i) || string(m.Value) != vals[i] {
				t.Fatalf("partition %d: record %d is offset %d %q, want offset %d %q", p, i, m.Offset, m.Value, i, vals[i])
			}
		}
		cancel()
		r.Close()
	}
	step("partition readers")

	// 4. Consumer group: commit, then resume.
	hwms := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		hwms[p] = int64(len(want[p]))
	}
	got := kafkaGoGroupRun(t, ctx, b.bootstrap, group, topic, 210, lg, elg, nil)
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
	checkKafkaGoCommitted(t, ctx, client, group, topic, hwms)
	step("group run 1")

	more := newProduced()
	w2 := &kafka.Writer{Addr: kafka.TCP(b.bootstrap), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, Logger: lg, ErrorLogger: elg,
		Completion: func(msgs []kafka.Message, err error) {
			for _, m := range msgs {
				if err == nil {
					more.ack(int32(m.Partition), m.Offset, string(m.Value))
				}
			}
		}}
	msgs = msgs[:0]
	for i := 0; i < 30; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("more-%03d", i))})
	}
	if err := w2.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("Writer.WriteMessages(more): %v", err)
	}
	w2.Close()
	if more.count() != 30 {
		t.Fatalf("acked %d more records, want 30", more.count())
	}
	got = kafkaGoGroupRun(t, ctx, b.bootstrap, group, topic, 30, lg, elg, func(p int32, off int64, val string) error {
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
	}
	if n != 30 {
		t.Fatalf("group run 2 read %d records, want 30", n)
	}
	for p := range hwms {
		hwms[p] += int64(len(more.recs[p]))
	}
	checkKafkaGoCommitted(t, ctx, client, group, topic, hwms)
	step("group run 2")
	t.Logf("API versions on the wire: %s", b.wire.summary())
}

// kafkaGoGroupRun reads want records with a group Reader, committing each synchronously,
// and closes it (leaving the group).
func kafkaGoGroupRun(t *testing.T, ctx context.Context, addr, group, topic string, want int, lg, elg kafka.Logger, check func(int32, int64, string) error) map[int32][]groupMsg {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, CommitInterval: 0,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 250 * time.Millisecond,
		HeartbeatInterval: time.Second, JoinGroupBackoff: 200 * time.Millisecond,
		Logger: lg, ErrorLogger: elg,
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("group Reader.Close: %v", err)
		}
	}()
	rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	got := map[int32][]groupMsg{}
	for i := 0; i < want; i++ {
		m, err := r.FetchMessage(rctx)
		if err != nil {
			t.Fatalf("group %s: FetchMessage %d of %d: %v (reader stats: %+v)", group, i, want, err, r.Stats())
		}
		p := int32(m.Partition)
		if check != nil {
			if err := check(p, m.Offset, string(m.Value)); err != nil {
				t.Fatal(err)
			}
		}
		if ms := got[p]; len(ms) > 0 && m.Offset != ms[len(ms)-1].off+1 {
			t.Fatalf("group %s partition %d: offset %d after %d", group, p, m.Offset, ms[len(ms)-1].off)
		}
		got[p] = append(got[p], groupMsg{m.Offset, string(m.Value)})
		if err := r.CommitMessages(rctx, m); err != nil {
			t.Fatalf("group %s: CommitMessages(%d/%d): %v", group, p, m.Offset, err)
		}
	}
	return got
}

func checkKafkaGoCommitted(t *testing.T, ctx context.Context, client *kafka.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	var parts []int
	for p := range want {
		parts = append(parts, int(p))
	}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil || resp.Error != nil {
		t.Fatalf("Client.OffsetFetch: %v, %v", err, resp)
	}
	seen := 0
	for _, p := range resp.Topics[topic] {
		seen++
		if p.Error != nil || p.CommittedOffset != want[int32(p.Partition)] {
			t.Errorf("group %s partition %d committed %d (%v), want %d", group, p.Partition, p.CommittedOffset, p.Error, want[int32(p.Partition)])
		}
	}
	if seen != len(want) {
		t.Errorf("OffsetFetch returned %d partitions, want %d: %+v", seen, len(want), resp.Topics)
	}
}
