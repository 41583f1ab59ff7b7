package broker

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/kafkatest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceAll produces n records per partition concurrently and returns each record's
// acked offset keyed by value.
func produceAll(t *testing.T, cl *kgo.Client, topic string, partitions, n int) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("p%d-%06d", p, i)
			wg.Add(1)
			cl.Produce(testCtx(t), &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
					return
				}
				mu.Lock()
				acked[v] = r.Offset
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return acked
}

// consumeN reads until n records have arrived and returns them per partition in order.
func consumeN(t *testing.T, cl *kgo.Client, n int) map[int32][]*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	got := map[int32][]*kgo.Record{}
	total := 0
	for total < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out after %d of %d records", total, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			total++
		})
	}
	return got
}

// checkDense asserts each partition's records have offsets 0..n-1 in order and that every
// acked value reads back at its acked offset.
func checkDense(t *testing.T, got map[int32][]*kgo.Record, acked map[string]int64) {
	t.Helper()
	for p, recs := range got {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d", p, i, r.Offset)
			}
			if off, ok := acked[string(r.Value)]; ok && off != r.Offset {
				t.Fatalf("%s acked at %d, read at %d", r.Value, off, r.Offset)
			}
		}
	}
	seen := map[string]bool{}
	for _, recs := range got {
		for _, r := range recs {
			seen[string(r.Value)] = true
		}
	}
	for v := range acked {
		if !seen[v] {
			t.Fatalf("acked record %s not read back", v)
		}
	}
}

func TestProduceConsumeManyPartitions(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b.admin(t), "orders", 16, nil)
	prod := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	acked := produceAll(t, prod, "orders", 16, 300)
	cons := b.client(t, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeN(t, cons, 16*300)
	if len(got) != 16 {
		t.Fatalf("got records from %d partitions", len(got))
	}
	checkDense(t, got, acked)
	// Order within a partition is production order: values were sent in sequence.
	for p, recs := range got {
		for i, r := range recs {
			if want := fmt.Sprintf("p%d-%06d", p, i); string(r.Value) != want {
				t.Fatalf("partition %d position %d: %s, want %s", p, i, r.Value, want)
			}
		}
	}
}

func TestCompressedBatchesPassThrough(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		topic := "c" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
		createTopic(t, b.admin(t), topic, 1, nil)
		prod := b.client(t, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
		acked := map[string]int64{}
		for i := 0; i < 50; i++ {
			v := fmt.Sprintf("compressed-%d-%s", i, string(make([]byte, 200)))
			r, err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(v)}).First()
			if err != nil {
				t.Fatal(err)
			}
			acked[v] = r.Offset
		}
		cons := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		checkDense(t, consumeN(t, cons, 50), acked)
	}
}

func TestRestartRecoversRecordsAndOffsets(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	createTopic(t, b.admin(t), "durable", 4, nil)
	acked := produceAll(t, b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), "durable", 4, 200)
	b.Close()

	b2 := startBroker(t, dir, nil)
	cons := b2.client(t, kgo.ConsumeTopics("durable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	checkDense(t, consumeN(t, cons, 800), acked)
	// New appends continue after the replayed end.
	r, err := b2.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(testCtx(t), &kgo.Record{Topic: "durable", Partition: 2, Value: []byte("after")}).First()
	if err != nil || r.Offset != 200 {
		t.Fatalf("append after restart: offset %d err %v", r.Offset, err)
	}
}

// rawProduce sends one batch to partition 0 of topic with acks=all.
func rawProduce(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp, err := kafkatest.Produce(testCtx(t), cl, topic, 0, batch)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestIdempotentSequences(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b.admin(t), "idem", 1, nil)
	cl := b.client(t)
	check := func(name string, got kmsg.ProduceResponseTopicPartition, code int16, offset int64) {
		t.Helper()
		if got.ErrorCode != code || (code == 0 && got.BaseOffset != offset) {
			t.Fatalf("%s: code %v offset %d, want %v offset %d", name, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, kerr.ErrorForCode(code), offset)
		}
	}
	check("first", rawProduce(t, cl, "idem", makeBatch(7, 0, 0, []byte("a"), []byte("b"))), 0, 0)
	check("second", rawProduce(t, cl, "idem", makeBatch(7, 0, 2, []byte("c"))), 0, 2)
	check("retry of first", rawProduce(t, cl, "idem", makeBatch(7, 0, 0, []byte("a"), []byte("b"))), 0, 0)
	check("retry of second", rawProduce(t, cl, "idem", makeBatch(7, 0, 2, []byte("c"))), 0, 2)
	check("gap", rawProduce(t, cl, "idem", makeBatch(7, 0, 5, []byte("d"))), kerr.OutOfOrderSequenceNumber.Code, 0)
	check("new epoch", rawProduce(t, cl, "idem", makeBatch(7, 1, 0, []byte("e"))), 0, 3)
	check("old epoch", rawProduce(t, cl, "idem", makeBatch(7, 0, 3, []byte("f"))), kerr.InvalidProducerEpoch.Code, 0)
	// Kafka (KIP-360) accepts any first sequence from a producer it has no state for.
	check("unknown producer mid-sequence", rawProduce(t, cl, "idem", makeBatch(8, 0, 9, []byte("g"))), 0, 4)
	check("its next batch", rawProduce(t, cl, "idem", makeBatch(8, 0, 10, []byte("g2"))), 0, 5)
	check("its gap", rawProduce(t, cl, "idem", makeBatch(8, 0, 12, []byte("g3"))), kerr.OutOfOrderSequenceNumber.Code, 0)
	check("plain", rawProduce(t, cl, "idem", makeBatch(-1, -1, -1, []byte("h"))), 0, 6)

	// Producer state is rebuilt from the WAL: a retry after a restart is still recognised.
	dir := b.dir
	b.Close()
	b2 := startBroker(t, dir, nil)
	cl2 := b2.client(t)
	check("retry after restart", rawProduce(t, cl2, "idem", makeBatch(7, 1, 0, []byte("e"))), 0, 3)
	check("continue after restart", rawProduce(t, cl2, "idem", makeBatch(7, 1, 1, []byte("i"))), 0, 7)
}

// A kgo idempotent producer hammering one partition with many in-flight requests gets
// dense offsets and no duplicates.
func TestIdempotentProducerNoDuplicates(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b.admin(t), "idem2", 1, nil)
	prod := b.client(t, kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100000))
	acked := produceAll(t, prod, "idem2", 1, 3000)
	cons := b.client(t, kgo.ConsumeTopics("idem2"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeN(t, cons, 3000)
	checkDense(t, got, acked)
	if n := len(got[0]); n != 3000 {
		t.Fatalf("read %d records, want 3000", n)
	}
}
