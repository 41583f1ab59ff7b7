package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/faulty"
)

// TestTierColdFetchBudget sends Fetch requests over TCP to a restarted broker whose
// partitions are in objects only (so they are read concurrently), with max bytes below
// the sum of the partition limits and the partitions in a shuffled order: the answer
// keeps the request's partition order, every partition's bytes are whole batches from
// its fetch offset on, each within its partition limit and all within max bytes, and
// the budget is used (partitions after the first get data). Then a consumer reads
// everything back.
func TestTierColdFetchBudget(t *testing.T) {
	dir := t.TempDir()
	store := faultyLocal(t)
	b := tierBroker(t, dir, store, nil)
	createTopic(t, b.admin(t), "coldfetch", 4, nil)
	want := produceN(t, b.client(t), "coldfetch", 4, 400, 1000)
	testutil.Eventually(t, time.Minute, "everything uploaded and the WAL trimmed", func() bool {
		return b.allUploaded() && b.wal.Start() > 0
	})
	b.Close()

	b2 := tierBroker(t, dir, store, nil)
	gets := store.Calls(faulty.Get)
	cl := b2.client(t)
	details, err := b2.admin(t).ListTopics(testCtx(t), "coldfetch")
	if err != nil {
		t.Fatal(err)
	}
	topicID := details["coldfetch"].ID
	order := []int32{2, 0, 3, 1}
	next := map[int32]int64{}
	const maxBytes, partMax = 300_000, 128 << 10
	for round := 0; round < 6; round++ {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "coldfetch", topicID
		for _, p := range order {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, next[p], partMax, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(order) {
			t.Fatalf("round %d: answer has %d topics", round, len(resp.Topics))
		}
		total, withData := 0, 0
		for i, rp := range resp.Topics[0].Partitions {
			if rp.Partition != order[i] {
				t.Fatalf("round %d: answer %d is partition %d, request order %v", round, i, rp.Partition, order)
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("round %d: partition %d: %v", round, rp.Partition, err)
			}
			data := rp.RecordBatches
			last, n := next[rp.Partition]-1, 0
			for pos := 0; pos < len(data); n++ {
				if len(data)-pos < 61 {
					t.Fatalf("round %d: partition %d: %d stray bytes", round, rp.Partition, len(data)-pos)
				}
				base := int64(binary.BigEndian.Uint64(data[pos:]))
				size := 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
				lastDelta := int64(binary.BigEndian.Uint32(data[pos+23:]))
				if n == 0 && (base > next[rp.Partition] || base+lastDelta < next[rp.Partition]) || n > 0 && base != last+1 {
					t.Fatalf("round %d: partition %d: batch %d at offset %d after %d (fetch offset %d)", round, rp.Partition, n, base, last, next[rp.Partition])
				}
				last = base + lastDelta
				pos += size
				if pos > len(data) {
					t.Fatalf("round %d: partition %d: a partial batch", round, rp.Partition)
				}
			}
			if len(data) > partMax && !(total == 0 && n == 1) {
				t.Fatalf("round %d: partition %d got %d bytes, partition max %d", round, rp.Partition, len(data), partMax)
			}
			total += len(data)
			if total > maxBytes && !(total == len(data) && n == 1) {
				t.Fatalf("round %d: %d bytes after partition %d, max bytes %d", round, total, rp.Partition, maxBytes)
			}
			if len(data) > 0 {
				withData++
				next[rp.Partition] = last + 1
			}
		}
		if withData < 2 {
			t.Fatalf("round %d: %d partitions with data in a %d-byte fetch of %d-byte partition limits", round, withData, maxBytes, partMax)
		}
	}
	if store.Calls(faulty.Get) == gets {
		t.Fatal("the restarted broker read no objects")
	}
	consumeAll(t, b2.addr(), "coldfetch", want)
}
