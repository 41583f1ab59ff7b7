package broker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/localfs"
)

// errorLog records the messages of a broker's error logs.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

func (l *errorLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "; ")
}

// txnCommit sends a TxnOffsetCommit of group to the broker's coordinator (the Kafka
// server does not route key 28 yet) and fails the test on an error.
func txnCommit(t *testing.T, b *testBroker, g string, pid int64, topic string, partition int32, offset int64) {
	t.Helper()
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group, r.ProducerID = 3, "tx", g, pid
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	testutil.Eventually(t, time.Minute, "TxnOffsetCommit accepted", func() bool {
		ch := make(chan kmsg.Response, 1)
		b.groups.Handle(testCtx(t), r, func(resp kmsg.Response) { ch <- resp })
		code := (<-ch).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		if code != 0 && !kerr.IsRetriable(kerr.ErrorForCode(code)) {
			t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
		}
		return code == 0
	})
}

// stableCode is the error OffsetFetch with require_stable answers for g's topic/partition.
func stableCode(t *testing.T, b *testBroker, g, topic string, partition int32) int16 {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, g, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	r.Topics = append(r.Topics, rt)
	var code int16
	cl := b.client(t)
	testutil.Eventually(t, time.Minute, "stable offset fetch", func() bool {
		resp, err := r.RequestWith(testCtx(t), cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		code = resp.Topics[0].Partitions[0].ErrorCode
		return true
	})
	return code
}

// Offsets committed in a transaction go through the __consumer_offsets partition like
// every group record: pending ones survive compaction and a restart, a transaction's end
// is durable, and a transaction marker in the partition is not taken for a group record.
func TestGroupTxnOffsetsAcrossCompactionAndRestart(t *testing.T) {
	dir := t.TempDir()
	store, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs := &errorLog{}
	mod := func(c *Config) {
		c.OffsetsTopicPartitions = 1
		c.OffsetsCompactBytes = 4 << 10
		c.OffsetsCompactCheck = 50 * time.Millisecond
		c.Group.Transactions = true
		c.Logger = slog.New(logs)
	}
	b := tierBroker(t, dir, store, mod)
	adm := b.admin(t)
	createTopic(t, adm, "t", 2, nil)
	commit := func(b *testBroker, g string, at int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		if resp, err := b.admin(t).CommitOffsets(testCtx(t), g, offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
	}
	commit(b, "g", 1)
	txnCommit(t, b, "g", 7, "t", 0, 100)  // committed before the restart
	txnCommit(t, b, "g", 8, "t", 1, 200)  // still pending at the restart
	txnCommit(t, b, "g2", 9, "t", 0, 300) // aborted before the restart

	otp, idx, err := b.coordinatorPartition(testCtx(t), "g", false)
	if err != nil {
		t.Fatal(err)
	}
	appendMarker := func() {
		t.Helper()
		p := b.parts.Get(otp.ID, idx)
		marker := recbatch.EncodeMarker(recbatch.Marker{ProducerID: -1, ProducerEpoch: -1, Commit: true}, b.now().UnixMilli())
		h, err := recbatch.Parse(marker)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		b.appendBatch(p, &h, marker, false, func(_, _, _ int64, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatalf("appending a marker to the offsets partition: %v", err)
		}
	}
	appendMarker()

	belongs := belongsTo(idx, len(otp.Partitions))
	if err := b.groups.CompleteTxn(testCtx(t), belongs, 7, true); err != nil {
		t.Fatal(err)
	}
	if err := b.groups.CompleteTxn(testCtx(t), belongs, 9, false); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 200; r++ { // grow the log past the compaction threshold
		commit(b, fmt.Sprintf("filler%d", r%5), int64(r))
	}
	testutil.Eventually(t, time.Minute, "the offsets partition compacted", func() bool {
		return b.meta.View().Topics[otp.Name].Partitions[idx].LogStartOffset > 0
	})
	appendMarker() // above the log start: the restart reads it
	b.Close()

	b2 := tierBroker(t, dir, store, mod)
	if got := stableCode(t, b2, "g", "t", 1); got != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending offset after the restart: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(got))
	}
	if got := stableCode(t, b2, "g2", "t", 0); got != 0 {
		t.Fatalf("aborted offset after the restart: %v", kerr.ErrorForCode(got))
	}
	fetch := func(g string) kadm.OffsetResponses {
		got, err := b2.admin(t).FetchOffsets(testCtx(t), g)
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch %s: %v %v", g, err, got.Error())
		}
		return got
	}
	if o, ok := fetch("g").Lookup("t", 0); !ok || o.At != 100 {
		t.Fatalf("committed transactional offset after the restart: %+v %v", o, ok)
	}
	if _, ok := fetch("g2").Lookup("t", 0); ok {
		t.Fatal("aborted offset served after the restart")
	}
	if err := b2.groups.CompleteTxn(testCtx(t), belongs, 8, true); err != nil {
		t.Fatal(err)
	}
	if o, ok := fetch("g").Lookup("t", 1); !ok || o.At != 200 {
		t.Fatalf("transaction committed after the restart: %+v %v", o, ok)
	}
	if msgs := logs.all(); strings.Contains(msgs, "undecodable") {
		t.Fatalf("loading logged: %s", msgs)
	}
}
