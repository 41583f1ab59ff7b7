package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// verifyingTxn is a coordinator for the produce path's check: each VerifyTxn is
// recorded and answered by answer (which may block, honouring ctx or not).
type verifyingTxn struct {
	fakeTxnOff
	mu     sync.Mutex
	asked  []string
	answer func(ctx context.Context) error
}

func (v *verifyingTxn) VerifyTxn(ctx context.Context, txnID string, pid int64, epoch int16, topic string, partition int32) error {
	v.mu.Lock()
	v.asked = append(v.asked, txnID+"/"+topic)
	answer := v.answer
	v.mu.Unlock()
	return answer(ctx)
}

func (v *verifyingTxn) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.asked)
}

// memWriter appends to a real partition log in memory (prepared and committed at
// once), so a test sees its open transactions, offsets and last stable offset.
type memWriter struct{ p *partlog.Partition }

func (m memWriter) Append(h *recbatch.Header, batch []byte, _ bool, done func(AppendResult)) {
	pr, err := m.p.Prepare(h, batch, -1)
	if err != nil {
		done(AppendResult{Err: err})
		return
	}
	m.p.Commit(pr, noWAL{}, 0)
	ls, _ := m.p.Offsets()
	done(AppendResult{Base: pr.Base(), LogStart: ls, AppendTime: -1})
}
func (m memWriter) Offsets() (int64, int64)                  { return m.p.Offsets() }
func (m memWriter) SetLogStart(context.Context, int64) error { return partlog.ErrNotLeader }
func (m memWriter) OpenTxn(pid int64) bool                   { _, ok := m.p.OpenTxn(pid); return ok }
func (m memWriter) lso() int64                               { return m.p.LastStable() }
func (m memWriter) hw() int64                                { _, hw := m.p.Offsets(); return hw }

// verifyServer serves topic "t" (1 partition) from a fresh partition log, with coord as
// the transaction coordinator and the check on (unless off).
func verifyServer(t *testing.T, coord *verifyingTxn, mods ...func(*Config)) (*rawConn, memWriter) {
	t.Helper()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: t.TempDir() + "/metadata.json", Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	p := partlog.New("t", meta.View().Topics["t"].ID, 0, 0, 0)
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	w := memWriter{p}
	mods = append([]func(*Config){func(c *Config) {
		c.Transactions, c.VerifyTxnPartitions, c.VerifyTxnTimeout = true, true, 5*time.Second
	}}, mods...)
	s, be := startServerDeps(t, meta, func(d *Deps) { d.Txn = coord }, mods...)
	be.writer = func(*metadata.Topic, int32) Writer { return w }
	return dialRaw(t, s), w
}

// sendTxnProduce sends producer 7's transactional batch of sequence seq to t/0 as
// transactional id "app" (nil txnID: none) without waiting for the answer.
func sendTxnProduce(rc *rawConn, corr int32, txnID *string, seq int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 5000, txnID
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = kafkatest.TxnBatch(7, 0, seq, []byte("v"))
	pt.Partitions = append(pt.Partitions, pp)
	req.Topics = append(req.Topics, pt)
	rc.send(corr, req)
	return req
}

func produceAnswer(t *testing.T, rc *rawConn, req *kmsg.ProduceRequest) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return recvDecode(t, rc, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

var appID = func() *string { s := "app"; return &s }()

// TestVerifyTxnInTransaction: the coordinator says yes, the first batch is appended and
// opens the transaction; the next batch finds it open and asks nobody.
func TestVerifyTxnInTransaction(t *testing.T) {
	coord := &verifyingTxn{answer: func(context.Context) error { return nil }}
	rc, w := verifyServer(t, coord)
	for seq := int32(0); seq < 2; seq++ {
		if out := produceAnswer(t, rc, sendTxnProduce(rc, seq, appID, seq)); out.ErrorCode != 0 || out.BaseOffset != int64(seq) {
			t.Fatalf("batch %d: %v at %d", seq, kerr.ErrorForCode(out.ErrorCode), out.BaseOffset)
		}
	}
	if !w.OpenTxn(7) || w.lso() != 0 || w.hw() != 2 {
		t.Fatalf("open %v, LSO %d, HW %d: want the transaction open from 0, HW 2", w.OpenTxn(7), w.lso(), w.hw())
	}
	if coord.count() != 1 || coord.asked[0] != "app/t" {
		t.Fatalf("coordinator asked %v, want app/t once (the second batch is in an open transaction)", coord.asked)
	}
}

// TestVerifyTxnNotInTransaction: the coordinator says the partition is not in the
// transaction (a late batch after the abort): INVALID_TXN_STATE, nothing appended, the
// last stable offset not held. A batch without a transactional id cannot be checked and
// is refused as Kafka refuses it. With the check off the same batch is appended.
func TestVerifyTxnNotInTransaction(t *testing.T) {
	notIn := func(context.Context) error { return kerr.TransactionAbortable }
	rc, w := verifyServer(t, &verifyingTxn{answer: notIn})
	if out := produceAnswer(t, rc, sendTxnProduce(rc, 1, appID, 0)); out.ErrorCode != kerr.InvalidTxnState.Code || out.ErrorMessage == nil {
		t.Fatalf("not in the transaction: %v (%v), want INVALID_TXN_STATE", kerr.ErrorForCode(out.ErrorCode), out.ErrorMessage)
	}
	if out := produceAnswer(t, rc, sendTxnProduce(rc, 2, nil, 0)); out.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("no transactional id: %v", kerr.ErrorForCode(out.ErrorCode))
	}
	if w.OpenTxn(7) || w.hw() != 0 || w.lso() != w.hw() {
		t.Fatalf("after refusals: open %v, HW %d, LSO %d: want nothing appended", w.OpenTxn(7), w.hw(), w.lso())
	}

	rc, w = verifyServer(t, &verifyingTxn{answer: notIn}, func(c *Config) { c.VerifyTxnPartitions = false })
	if out := produceAnswer(t, rc, sendTxnProduce(rc, 1, appID, 0)); out.ErrorCode != 0 || !w.OpenTxn(7) || w.lso() != 0 {
		t.Fatalf("check off: %v, open %v, LSO %d: want the hanging transaction of old", kerr.ErrorForCode(out.ErrorCode), w.OpenTxn(7), w.lso())
	}
}

// TestVerifyTxnSlowAnswerKeepsOrder: while the first batch's check is outstanding the
// producer's next batches wait behind it (the connection is still read: they arrive),
// then all are appended in sequence order; the coordinator was asked once.
func TestVerifyTxnSlowAnswerKeepsOrder(t *testing.T) {
	release := make(chan struct{})
	coord := &verifyingTxn{answer: func(context.Context) error { <-release; return nil }}
	rc, w := verifyServer(t, coord)
	var reqs []*kmsg.ProduceRequest
	for seq := int32(0); seq < 3; seq++ {
		reqs = append(reqs, sendTxnProduce(rc, seq, appID, seq))
	}
	// The three requests are read by the connection's reader while the check waits;
	// give them time to reach the gate (nothing may be appended meanwhile).
	deadline := time.Now().Add(5 * time.Second)
	for coord.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling for the check to start
	}
	time.Sleep(100 * time.Millisecond) // lets batches 1 and 2 arrive behind the check
	if w.hw() != 0 {
		t.Fatalf("HW %d before the coordinator answered", w.hw())
	}
	close(release)
	for seq, req := range reqs {
		if out := produceAnswer(t, rc, req); out.ErrorCode != 0 || out.BaseOffset != int64(seq) {
			t.Fatalf("batch %d: %v at %d (in order: at %d)", seq, kerr.ErrorForCode(out.ErrorCode), out.BaseOffset, seq)
		}
	}
	if coord.count() != 1 {
		t.Fatalf("coordinator asked %d times, want once", coord.count())
	}
}

// TestVerifyTxnTimeout: a coordinator that does not answer (not even to its context)
// gives NOT_ENOUGH_REPLICAS, retriable, within the timeout; nothing is appended, and the
// batches waiting behind get the same answer.
func TestVerifyTxnTimeout(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	coord := &verifyingTxn{answer: func(context.Context) error { <-hang; return nil }}
	rc, w := verifyServer(t, coord, func(c *Config) { c.VerifyTxnTimeout = 200 * time.Millisecond })
	start := time.Now()
	r0, r1 := sendTxnProduce(rc, 0, appID, 0), sendTxnProduce(rc, 1, appID, 1)
	for _, req := range []*kmsg.ProduceRequest{r0, r1} {
		if out := produceAnswer(t, rc, req); out.ErrorCode != kerr.NotEnoughReplicas.Code {
			t.Fatalf("coordinator silent: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(out.ErrorCode))
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("answered after %v, the timeout is 200ms", d)
	}
	if w.hw() != 0 || w.OpenTxn(7) {
		t.Fatalf("HW %d, open %v: want nothing appended", w.hw(), w.OpenTxn(7))
	}
}

// TestUnverifiedCodes: the coordinator's answers become the codes Kafka's leader gives
// producers.
func TestUnverifiedCodes(t *testing.T) {
	for in, want := range map[*kerr.Error]*kerr.Error{
		kerr.TransactionAbortable:       kerr.InvalidTxnState,
		kerr.ClusterAuthorizationFailed: kerr.InvalidTxnState,
		kerr.ProducerFenced:             kerr.InvalidProducerEpoch,
		kerr.NotCoordinator:             kerr.NotEnoughReplicas,
		kerr.CoordinatorLoadInProgress:  kerr.NotEnoughReplicas,
		kerr.ConcurrentTransactions:     kerr.NotEnoughReplicas,
		kerr.NetworkException:           kerr.NotEnoughReplicas,
		kerr.InvalidProducerIDMapping:   kerr.InvalidProducerIDMapping,
	} {
		if got := kafkaCode(unverified(in)); got != want.Code {
			t.Errorf("%v: %v, want %v", in, kerr.ErrorForCode(got), want)
		}
	}
	if unverified(nil) != nil {
		t.Error("a yes became an error")
	}
}
