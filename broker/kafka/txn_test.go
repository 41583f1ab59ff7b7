package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// recordingTxn is a TxnCoordinator that records its calls and answers from its fields.
type recordingTxn struct {
	fakeTxnOff
	meta  metadata.Store
	mu    sync.Mutex
	calls []string
	// addErr, when set, answers AddPartitions for that topic/partition.
	addErr map[TxnPartition]error
}

func (r *recordingTxn) note(f string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(f, a...))
}

func (r *recordingTxn) Partition(_ context.Context, txnID string, _ bool) (*metadata.Topic, int32, error) {
	r.note("partition %s", txnID)
	return r.meta.View().Topics["t"], 1, nil
}

func (r *recordingTxn) InitProducerID(_ context.Context, txnID string, timeoutMs int32, pid int64, epoch int16) (int64, int16, error) {
	r.note("init %s %d %d %d", txnID, timeoutMs, pid, epoch)
	return 77, 3, nil
}

func (r *recordingTxn) AddPartitions(_ context.Context, txnID string, pid int64, epoch int16, parts []TxnPartition, verify bool) []error {
	r.note("add %s %d %d %v verify=%v", txnID, pid, epoch, parts, verify)
	errs := make([]error, len(parts))
	for i, p := range parts {
		errs[i] = r.addErr[p]
	}
	return errs
}

func (r *recordingTxn) EndTxn(_ context.Context, txnID string, pid int64, epoch int16, commit bool) error {
	r.note("end %s %d %d commit=%v", txnID, pid, epoch, commit)
	return kerr.ConcurrentTransactions
}

func (r *recordingTxn) Describe(_ context.Context, ids []string) []TxnDescription {
	r.note("describe %v", ids)
	return []TxnDescription{{TxnID: "tx", State: "Ongoing", TimeoutMs: 60000, ProducerID: 77, ProducerEpoch: 3, Partitions: []TxnPartition{{"t", 0}, {"t", 1}}}}
}

func (r *recordingTxn) List(context.Context, []string, []int64) []TxnListing {
	return []TxnListing{{TxnID: "tx", ProducerID: 77, State: "Ongoing"}}
}

// AppendMarker makes the harness backend a MarkerAppender: it records the marker.
func (b *fakeBackend) AppendMarker(t *metadata.Topic, index int32, m recbatch.Marker, done func(error)) {
	b.mu.Lock()
	b.appends = append(b.appends, fmt.Sprintf("marker %s/%d pid %d epoch %d commit %v coordinator epoch %d", t.Name, index, m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch))
	b.mu.Unlock()
	done(nil)
}

// TestTxnHandlers: with a coordinator, the transaction keys are advertised and each
// request reaches it with its fields, its answers and errors mapped back per Kafka's
// shapes (AddPartitionsToTxn's OPERATION_NOT_ATTEMPTED beside an unknown partition, the
// v4 batched form, WriteTxnMarkers through the backend); FindCoordinator names the
// leader of the transactional id's partition.
func TestTxnHandlers(t *testing.T) {
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: t.TempDir() + "/m.json", Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	tx := &recordingTxn{meta: meta, addErr: map[TxnPartition]error{{"t", 1}: kerr.ConcurrentTransactions}}
	s, be := startServerWith(t, meta)
	s.txn = tx
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.lns[0].Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b := cl.SeedBrokers()[0]
	// Clients pick the highest version both sides speak: AddPartitionsToTxn's client
	// form (v3) needs a client that stops there.
	v3 := kversion.Stable()
	v3.SetMaxKeyVersion(24, 3)
	cl3, err := kgo.NewClient(kgo.SeedBrokers(s.lns[0].Addr().String()), kgo.MaxVersions(v3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl3.Close)
	b3 := cl3.SeedBrokers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(resp kmsg.Response, err error) kmsg.Response {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	av := must(kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b)).(*kmsg.ApiVersionsResponse)
	for _, key := range []int16{24, 25, 26, 27, 65, 66} {
		if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key }) {
			t.Errorf("key %d not advertised with a coordinator", key)
		}
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"tx"}
	if r := must(fc.RequestWith(ctx, b)).(*kmsg.FindCoordinatorResponse); len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != 0 || r.Coordinators[0].NodeID != 0 || r.Coordinators[0].Port != 1 {
		t.Fatalf("FindCoordinator(transaction): %+v", r)
	}

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = kmsg.StringPtr("tx"), 60000, -1, -1
	if r := must(ip.RequestWith(ctx, b)).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerID != 77 || r.ProducerEpoch != 3 {
		t.Fatalf("InitProducerId: %+v", r)
	}

	add := func(parts ...int32) map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", 77, 3
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "t", parts
		req.Topics = append(req.Topics, rt)
		r := must(req.RequestWith(ctx, b3)).(*kmsg.AddPartitionsToTxnResponse)
		if r.Version != 3 || len(r.Topics) != 1 {
			t.Fatalf("AddPartitionsToTxn v3 answered %+v", r)
		}
		out := map[int32]int16{}
		for _, p := range r.Topics[0].Partitions {
			out[p.Partition] = p.ErrorCode
		}
		return out
	}
	if got := add(0, 1); got[0] != 0 || got[1] != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitionsToTxn t/0 t/1: %v", got)
	}
	if got := add(0, 9); got[0] != kerr.OperationNotAttempted.Code || got[9] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AddPartitionsToTxn with an unknown partition: %v", got)
	}
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.SetVersion(4)
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = "tx", 77, 3, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "t", []int32{0}
	tr.Topics = append(tr.Topics, tt)
	v4.Transactions = append(v4.Transactions, tr)
	if r := must(v4.RequestWith(ctx, b)).(*kmsg.AddPartitionsToTxnResponse); r.ErrorCode != 0 || len(r.Transactions) != 1 || r.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn v4: %+v", r)
	}

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = "tx", 77, 3, true
	if r := must(et.RequestWith(ctx, b)).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn: %+v, want the coordinator's CONCURRENT_TRANSACTIONS", r)
	}

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 77, 3, true, 5
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{1, 7}
	m.Topics = append(m.Topics, mt)
	wm.Markers = append(wm.Markers, m)
	r := must(wm.RequestWith(ctx, b)).(*kmsg.WriteTxnMarkersResponse)
	if ps := r.Markers[0].Topics[0].Partitions; ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("WriteTxnMarkers: %+v", ps)
	}
	be.mu.Lock()
	appended := slices.Clone(be.appends)
	be.mu.Unlock()
	if !slices.Contains(appended, "marker t/1 pid 77 epoch 3 commit true coordinator epoch 5") {
		t.Fatalf("backend appends %v", appended)
	}

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx", "nope"}
	d := must(dt.RequestWith(ctx, b)).(*kmsg.DescribeTransactionsResponse)
	if st := d.TransactionStates; len(st) != 2 || st[0].State != "Ongoing" || st[0].ProducerID != 77 || len(st[0].Topics) != 1 || len(st[0].Topics[0].Partitions) != 2 ||
		st[1].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("DescribeTransactions: %+v", st)
	}
	lt := must(kmsg.NewPtrListTransactionsRequest().RequestWith(ctx, b)).(*kmsg.ListTransactionsResponse)
	if len(lt.TransactionStates) != 1 || lt.TransactionStates[0].TransactionalID != "tx" {
		t.Fatalf("ListTransactions: %+v", lt)
	}

	tx.mu.Lock()
	calls := slices.Clone(tx.calls)
	tx.mu.Unlock()
	for _, want := range []string{"partition tx", "init tx 60000 -1 -1", "add tx 77 3 [{t 0} {t 1}] verify=false", "add tx 77 3 [{t 0}] verify=true", "end tx 77 3 commit=true"} {
		if !slices.Contains(calls, want) {
			t.Errorf("the coordinator was not asked %q: %q", want, calls)
		}
	}
	// The unknown partition was never passed on.
	for _, c := range calls {
		if c == "add tx 77 3 [{t 0} {t 9}] verify=false" {
			t.Errorf("a request with an unknown partition reached the coordinator")
		}
	}
}

// TestTxnCodeForOldClients: PRODUCER_FENCED reaches clients that know it, and becomes
// INVALID_PRODUCER_EPOCH for those that predate it (Kafka's downgrade).
func TestTxnCodeForOldClients(t *testing.T) {
	for _, tc := range []struct {
		key, v int16
		want   int16
	}{
		{22, 3, kerr.InvalidProducerEpoch.Code}, {22, 4, kerr.ProducerFenced.Code},
		{24, 1, kerr.InvalidProducerEpoch.Code}, {24, 2, kerr.ProducerFenced.Code},
		{25, 1, kerr.InvalidProducerEpoch.Code}, {26, 1, kerr.InvalidProducerEpoch.Code}, {26, 3, kerr.ProducerFenced.Code},
	} {
		if got := txnCode(kerr.ProducerFenced, tc.key, tc.v); got != tc.want {
			t.Errorf("key %d v%d: %d, want %d", tc.key, tc.v, got, tc.want)
		}
	}
	if got := txnCode(kerr.ConcurrentTransactions, 22, 0); got != kerr.ConcurrentTransactions.Code {
		t.Errorf("another code changed: %d", got)
	}
}
