package kafka

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/metadata"
)

// behindPart is a read replica's partition: asked past its high watermark, it answers
// an error a long poll may wait out (partlog.ErrReplicaBehind's kind).
type behindPart struct{ *livePart }

var errBehind = kcode.NewWaitable("test: replica behind", kcode.OffsetOutOfRange)

func (p behindPart) Read(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	if offset > p.hw() {
		return nil, p.hw(), 0, errBehind
	}
	return p.livePart.Read(ctx, offset, maxBytes, first, epoch)
}

// A consumer redirected to a read replica at an offset the replica has not reached yet
// (the leader's high watermark, ahead of the replica's by the follow's latency) is
// answered when the replica gets there, within the fetch's wait, not with
// OFFSET_OUT_OF_RANGE at once (which sends franz-go into a KIP-392 check with the leader
// costing hundreds of ms); if the replica is still behind when the wait ends, the answer
// is OFFSET_OUT_OF_RANGE, as a Kafka follower's past its log end.
func TestFetchWaitsForReplicaBehind(t *testing.T) {
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(t.TempDir(), "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "s", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	part := behindPart{&livePart{fakePart: fakePart{topic: "s"}, waiters: map[chan struct{}]bool{}}}
	s, be := startServerWith(t, meta)
	be.reader = func(*metadata.Topic, int32) Reader { return part }
	topic := meta.View().Topics["s"]
	rc := dialRaw(t, s)

	part.append() // the replica holds offset 0 (high watermark 1); the consumer asks for offset 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond) // on purpose: the fetch is waiting by then (or answers at once, wrongly)
		part.append()
		part.append() // offset 2 is there now
	}()
	resp, _ := sessionFetch(t, rc, 1, topic, 0, -1, map[int32]int64{0: 2}, 30000)
	<-done
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch past the replica's high watermark: error %v, %d bytes; want the records once it caught up", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}

	// Still behind when the wait ends: OFFSET_OUT_OF_RANGE, after the wait.
	resp, took := sessionFetch(t, rc, 2, topic, 0, -1, map[int32]int64{0: 10}, 300)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || took < 250*time.Millisecond {
		t.Fatalf("fetch far past the replica: error %v after %v; want OFFSET_OUT_OF_RANGE after the 300 ms wait", kerr.ErrorForCode(p.ErrorCode), took)
	}
	// A fetch that does not wait gets the error at once.
	if resp, _ := sessionFetch(t, rc, 3, topic, 0, -1, map[int32]int64{0: 10}, 0); resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch without a wait: error %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}
