package group

import (
	"context"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

// loadFrom is a fresh coordinator (own store, same clock and config) loaded from recs.
func loadFrom(t *testing.T, h *harness, recs []storeCall) *harness {
	t.Helper()
	store := &memStore{}
	c := New(h.c.cfg, store, h.c.topics)
	t.Cleanup(c.Close)
	if _, err := c.Load(all, func(apply func(string, Record)) error {
		for _, r := range recs {
			apply(r.group, r.rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, c: c, clock: h.clock, store: store}
}

// A coordinator that loads the log has the pending offsets (still pending), the ended
// transactions applied, and no aborted offset back; it completes what is still open.
func TestTxnOffsetsSurviveReload(t *testing.T) {
	h := newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 5))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1, epoch: 4}, tc("t1", 0, 10))
	h.txnCommit(txnReq{group: "g", pid: 2}, tc("t1", 1, 20))
	h.txnCommit(txnReq{group: "g", pid: 3}, tc("t1", 2, 30))
	h.txnCommit(txnReq{group: "g", pid: 5}, tc("t1", 3, 50))
	h.endTxn(3, false)
	h.endTxn(5, true)

	h2 := h.takeover()
	h.c.Unload(all)
	wantOffset(t, h2, "g", "t1", 0, 5)
	wantOffset(t, h2, "g", "t1", 1, -1)
	wantOffset(t, h2, "g", "t1", 3, 50)
	wantStable(t, h2, "g", "t1", 0, true)
	wantStable(t, h2, "g", "t1", 1, true)
	wantStable(t, h2, "g", "t1", 2, false) // aborted: not resurrected
	wantOffset(t, h2, "g", "t1", 2, -1)
	// The loaded producer epoch still fences an older one.
	wantCode(t, "older epoch after the load", h2.txnCodes(txnReq{group: "g", pid: 1, epoch: 3}, tc("t1", 0, 11))[0], kerr.InvalidProducerEpoch)

	h2.endTxn(1, true)
	h2.endTxn(2, false)
	wantOffset(t, h2, "g", "t1", 0, 10)
	wantOffset(t, h2, "g", "t1", 1, -1)

	h3 := h2.takeover()
	h2.c.Unload(all)
	for p, want := range []int64{10, -1, -1, 50} {
		wantOffset(t, h3, "g", "t1", int32(p), want)
		wantStable(t, h3, "g", "t1", int32(p), false)
	}
	if len(h3.c.txnGroups) != 0 {
		t.Fatalf("index after a load with nothing pending: %v", h3.c.txnGroups)
	}
}

// Compaction keeps pending offsets with their order and stale marks: a coordinator loaded
// from the Full records only ends every transaction exactly as one loaded from the whole
// log, and as the one that wrote it.
func TestTxnCompactionKeepsPending(t *testing.T) {
	h := newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 5))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10), tc("t1", 1, 11))
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 15))), nil) // pid 1's t1/0 is stale
	h.txnCommit(txnReq{group: "g", pid: 2}, tc("t1", 2, 30))
	h.txnCommit(txnReq{group: "g", pid: 3}, tc("t1", 2, 40)) // later than pid 2's
	h.txnCommit(txnReq{group: "g", pid: 4}, tc("t1", 3, 60))
	h.endTxn(4, false)
	h.txnCommit(txnReq{group: "only-txn", pid: 2}, tc("t2", 0, 7))

	cut := len(h.store.snapshot())
	if n, err := h.c.Compact(context.Background(), all); err != nil || n != 2 {
		t.Fatalf("compacted %d groups: %v", n, err)
	}
	calls := h.store.snapshot()
	full := calls[cut:]
	for _, c := range full {
		if c.group == "g" {
			stale := 0
			for _, x := range c.rec.Txn {
				if x.Stale {
					stale++
				}
			}
			if !c.rec.Full || len(c.rec.Txn) != 4 || stale != 1 {
				t.Fatalf("g's Full record: %+v", c.rec)
			}
		}
	}
	fromFull := loadFrom(t, h, full)
	fromAll := loadFrom(t, h, calls)
	wantStable(t, fromFull, "g", "t1", 0, true) // stale, but its transaction is open
	wantStable(t, fromFull, "only-txn", "t2", 0, true)
	wantStable(t, fromFull, "g", "t1", 3, false)

	for _, x := range []*harness{h, fromFull, fromAll} {
		x.endTxn(3, true)
		x.endTxn(1, true)
		x.endTxn(2, true)
	}
	want := map[string]map[int32]Offset{}
	for _, x := range []*harness{h, fromFull, fromAll} {
		got := x.c.Committed("g")["t1"]
		if got[0].Offset != 15 || got[1].Offset != 11 || got[2].Offset != 40 {
			t.Fatalf("after the ends: t1 %+v; want 15, 11, 40", got)
		}
		if _, ok := got[3]; ok {
			t.Fatalf("aborted offset committed: %+v", got[3])
		}
		if x == h {
			want["t1"] = got
			continue
		}
		if !reflect.DeepEqual(got, want["t1"]) {
			t.Fatalf("loaded coordinator's offsets %+v, the writer's %+v", got, want["t1"])
		}
		wantOffset(t, x, "only-txn", "t2", 0, 7)
	}
}

// Writes queued behind a store call are merged into one record only in the order a
// record applies them, so the log replays to what memory holds: a pending offset, a
// plain commit of its partition and the transaction's commit, queued together.
func TestTxnQueuedWritesReplayInOrder(t *testing.T) {
	h := newTxnHarness(t)
	gate := make(chan struct{})
	h.store.gate, h.store.inFly = gate, make(chan struct{}, 8)
	first := h.send(commitReq(8, "g", -1, "", "t2", 0, 1))
	<-h.store.inFly
	txn := h.send(txnReq{group: "g", pid: 1}.req(tc("t1", 0, 10)))
	plain := h.send(commitReq(8, "g", -1, "", "t1", 0, 15))
	ended := make(chan error, 1)
	go func() { ended <- h.c.CompleteTxn(context.Background(), all, 1, true) }()
	waitQueued(t, h, "g", 3)
	close(gate)
	wantCode(t, "first", commitCode(t, h.wait(first)), nil)
	wantCode(t, "txn", h.wait(txn).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "plain", commitCode(t, h.wait(plain)), nil)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	wantOffset(t, h, "g", "t1", 0, 15)
	if got := h.store.latest("g")["t1"][0].Offset; got != 15 {
		t.Fatalf("the log replays to %d, memory holds 15", got)
	}
	if n := len(h.store.snapshot()); n != 3 {
		t.Fatalf("%d store calls, want 3 (the plain commit and the end merged)", n)
	}
}

// waitQueued waits until n writes of group wait in its queue.
func waitQueued(t *testing.T, h *harness, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		g := h.c.lookup(group)
		g.lock()
		q := len(g.writeQ)
		g.unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond) // on purpose: polls the write queue, which has no change signal to wait on
	}
}

// CompleteTxn fails, rather than succeeding without them, while the partition's groups
// are loading or gone elsewhere; once loaded again it ends the transaction.
func TestCompleteTxnNeedsTheGroupsServed(t *testing.T) {
	st := &statuses{of: map[string]OwnStatus{}}
	h := newTxnHarness(t, func(c *Config) { c.Status = st.status })
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10))
	n := len(h.store.snapshot())

	st.set("g", Loading)
	if err := h.c.CompleteTxn(context.Background(), all, 1, true); !errors.Is(err, ErrLoading) {
		t.Fatalf("CompleteTxn while loading: %v", err)
	}
	h.c.Unload(all)
	if err := h.c.CompleteTxn(context.Background(), all, 1, true); !errors.Is(err, ErrLoading) {
		t.Fatalf("CompleteTxn while unloaded and loading: %v", err)
	}
	st.set("g", NotOwned)
	if err := h.c.CompleteTxn(context.Background(), all, 1, true); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("CompleteTxn of a partition served elsewhere: %v", err)
	}
	if len(h.store.snapshot()) != n {
		t.Fatal("an end was written for groups not served")
	}
	if _, err := h.c.Load(all, h.store.replay); err != nil {
		t.Fatal(err)
	}
	st.set("g", Owned)
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 10)
}

// An offset with a pending transactional offset of its partition does not expire, and a
// group with pending offsets is not deleted, until the transaction ends.
func TestTxnPendingHoldsExpiry(t *testing.T) {
	h, _ := newIDHarness(t, time.Hour)
	h.c.cfg.Transactions = true
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 1))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 2))
	h.txnCommit(txnReq{group: "only-txn", pid: 1}, tc("t1", 1, 3))
	h.clock.Advance(2 * time.Hour)
	if n := h.c.Expire(context.Background()); n != 0 {
		t.Fatalf("expired %d offsets with a transaction open", n)
	}
	if h.c.lookup("only-txn") == nil {
		t.Fatal("group with pending offsets deleted")
	}
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 2)
	if n := h.c.Expire(context.Background()); n != 2 {
		t.Fatalf("expired %d offsets after the transaction, want 2", n)
	}
}

// The records' binary form carries pending offsets and ends; a record without them is
// the very bytes brokers wrote before (so old records decode as ever), and a reader that
// meets a flag it does not know refuses the record.
func TestTxnRecordEncoding(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123).UTC()
	rec := Record{Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 2, LeaderEpoch: 4, CommitTime: now, TopicID: "x"}},
		Txn: []TxnOffset{
			{ProducerID: 1 << 40, ProducerEpoch: 32767, Stale: true, Offset: Offset{Topic: "t", Partition: 2, Offset: 9, LeaderEpoch: 1, Metadata: "m", CommitTime: now, TopicID: "x"}},
			{ProducerID: 7, Offset: Offset{Topic: "v", Partition: 0, Offset: 3, LeaderEpoch: -1}}},
		TxnEnds: []TxnEnd{{ProducerID: 1 << 40, Commit: true}, {ProducerID: 7}}}
	b, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(b)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("round trip:\n got %+v %v\nwant %+v", got, err, rec)
	}
	for cut := 1; cut < len(b); cut++ {
		if _, err := DecodeRecord(b[:cut]); !errors.Is(err, ErrRecord) {
			t.Fatalf("record cut at %d of %d: %v", cut, len(b), err)
		}
	}
	bad := append([]byte{}, b...)
	bad[4] |= 32
	if _, err := DecodeRecord(bad); !errors.Is(err, ErrRecord) {
		t.Fatalf("unknown flag: %v", err)
	}

	// The bytes a broker before transactions wrote for this record (EncodeRecord of main).
	old := Record{Full: true, Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 2, LeaderEpoch: 4, Metadata: "m", CommitTime: now, TopicID: "x"}, {Topic: "u", Partition: 0, Offset: -1, LeaderEpoch: -1, Delete: true}},
		Meta: &Meta{Generation: 3, ProtocolType: "consumer", Protocol: "range", Leader: "m", Time: now, Members: []MemberMeta{{ID: "m", ClientID: "c", SessionTimeout: time.Second, Assignment: []byte{1}}}}}
	const golden = "00574702050608636f6e73756d65720572616e6765016df6a1abfef96201016d00016300e8070000020102017401780175000200020408016df6a1abfef9620001000101000001"
	enc, _ := EncodeRecord(old)
	if hex.EncodeToString(enc) != golden {
		t.Fatalf("a record without transactions encodes differently from before:\n%x\n%s", enc, golden)
	}
	gb, _ := hex.DecodeString(golden)
	if dec, err := DecodeRecord(gb); err != nil || !reflect.DeepEqual(dec, old) {
		t.Fatalf("old record: %+v %v", dec, err)
	}
}

// ACLs: Write on the transactional ID, then Read on the group, then Read on each topic.
func TestTxnOffsetCommitAuthorization(t *testing.T) {
	h := newTxnHarness(t)
	x := txnReq{group: "g", pid: 1}
	grants := []acl.Binding{
		{ResourceType: acl.ResourceTransactionalID, ResourceName: "tx"},
		{ResourceType: acl.ResourceGroup, ResourceName: "g"},
		{ResourceType: acl.ResourceTopic, ResourceName: "t1"},
		{ResourceType: acl.ResourceTopic, ResourceName: "t2"},
	}
	for _, c := range []struct {
		name    string
		without int // the grant left out
		want    []*kerr.Error
	}{
		{"no transactional id", 0, []*kerr.Error{kerr.TransactionalIDAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed}},
		{"no group", 1, []*kerr.Error{kerr.GroupAuthorizationFailed, kerr.GroupAuthorizationFailed}},
		{"no t2", 3, []*kerr.Error{nil, kerr.TopicAuthorizationFailed}},
	} {
		var bs []acl.Binding
		for i, b := range grants {
			if i != c.without {
				b.PatternType, b.Principal, b.Host, b.Operation, b.Permission = acl.PatternLiteral, "User:p", acl.Wildcard, acl.OpAll, acl.Allow
				bs = append(bs, b)
			}
		}
		set := acl.NewSet(bs)
		ss := &acl.Session{Principal: "User:p", Host: "h", Authorizer: acl.NewAuthorizer(nil, false), ACLs: func() *acl.Set { return set }}
		resp := h.wait(h.sendCtx(acl.NewContext(context.Background(), ss), x.req(tc("t1", 0, 1), tc("t2", 0, 1)))).(*kmsg.TxnOffsetCommitResponse)
		var got []int16
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got = append(got, rp.ErrorCode)
			}
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: codes %v", c.name, got)
		}
		for i, w := range c.want {
			wantCode(t, c.name, got[i], w)
		}
	}
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 1)
	wantOffset(t, h, "g", "t2", 0, -1)
}
