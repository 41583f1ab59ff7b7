package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---- helpers ------------------------------------------------------------------

func newTxnHarness(t *testing.T, mod ...func(*Config)) *harness {
	return newHarness(t, append([]func(*Config){func(c *Config) { c.Transactions = true }}, mod...)...)
}

// txnReq is a TxnOffsetCommit of one producer to group, gen and member as given (v3+).
type txnReq struct {
	version    int16
	group      string
	pid        int64
	epoch      int16
	gen        int32
	member     string
	instanceID *string
}

func (x txnReq) req(commits ...tcommit) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = x.version
	if r.Version == 0 {
		r.Version = 3
	}
	r.TransactionalID = "tx"
	r.Group = x.group
	r.ProducerID, r.ProducerEpoch = x.pid, x.epoch
	r.Generation, r.MemberID, r.InstanceID = x.gen, x.member, x.instanceID
	if x.member == "" && x.gen == 0 {
		r.Generation = -1
	}
	for _, c := range commits {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = c.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = c.partition, c.offset, 3
		rp.Metadata = kmsg.StringPtr("txn")
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	}
	return r
}

type tcommit struct {
	topic     string
	partition int32
	offset    int64
}

func tc(topic string, partition int32, offset int64) tcommit {
	return tcommit{topic, partition, offset}
}

// txnCodes sends a TxnOffsetCommit and returns its per-partition codes in order.
func (h *harness) txnCodes(x txnReq, commits ...tcommit) []int16 {
	h.t.Helper()
	return h.txnCodesOf(x.req(commits...))
}

func (h *harness) txnCodesOf(r *kmsg.TxnOffsetCommitRequest) []int16 {
	h.t.Helper()
	resp := h.do(r).(*kmsg.TxnOffsetCommitResponse)
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// txnCommit commits in a transaction and fails the test on any error.
func (h *harness) txnCommit(x txnReq, commits ...tcommit) {
	h.t.Helper()
	for i, code := range h.txnCodes(x, commits...) {
		wantCode(h.t, "txn commit of "+commits[i].topic, code, nil)
	}
}

func (h *harness) endTxn(pid int64, commit bool) {
	h.t.Helper()
	if err := h.c.CompleteTxn(context.Background(), all, pid, commit); err != nil {
		h.t.Fatalf("CompleteTxn(%d, %v): %v", pid, commit, err)
	}
}

// stable fetches group/topic/partition with RequireStable (v7).
func (h *harness) stable(group, topic string, partition int32) kmsg.OffsetFetchResponseTopicPartition {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	r.Topics = append(r.Topics, rt)
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	wantCode(h.t, "stable fetch", resp.ErrorCode, nil)
	return resp.Topics[0].Partitions[0]
}

// offsetOf is the committed offset OffsetFetch serves (-1: none).
func (h *harness) offsetOf(group, topic string, partition int32) int64 {
	h.t.Helper()
	return h.fetch(group, topic, partition).Offset
}

func wantOffset(t *testing.T, h *harness, group, topic string, partition int32, want int64) {
	t.Helper()
	if got := h.offsetOf(group, topic, partition); got != want {
		t.Fatalf("%s %s/%d: offset %d, want %d", group, topic, partition, got, want)
	}
}

func wantStable(t *testing.T, h *harness, group, topic string, partition int32, unstable bool) {
	t.Helper()
	got := h.stable(group, topic, partition)
	var want *kerr.Error
	if unstable {
		want = kerr.UnstableOffsetCommit
		if got.Offset != -1 {
			t.Fatalf("%s %s/%d: unstable answer with offset %d", group, topic, partition, got.Offset)
		}
	}
	wantCode(t, "stable fetch of "+topic, got.ErrorCode, want)
}

// ---- the switch ----------------------------------------------------------------

// Until the transaction coordinator is wired, TxnOffsetCommit is refused as every
// transactional request is today, and nothing is written.
func TestTxnOffsetCommitOffByDefault(t *testing.T) {
	h := newHarness(t)
	x := txnReq{group: "g", pid: 1}
	for _, v := range []int16{0, 4} {
		r := x.req(tc("t1", 0, 5), tc("t2", 1, 6))
		r.Version = v
		for _, code := range h.txnCodesOf(r) {
			wantCode(t, "TxnOffsetCommit with transactions off", code, kerr.TransactionalIDAuthorizationFailed)
		}
	}
	if calls := h.store.snapshot(); len(calls) != 0 {
		t.Fatalf("written with transactions off: %+v", calls)
	}
	if mv := MaxVersions(); mv[kmsg.TxnOffsetCommit.Int16()] != 0 {
		t.Fatal("TxnOffsetCommit advertised before the transaction coordinator is wired")
	}
	h2 := newTxnHarness(t)
	for v := int16(0); v <= TxnOffsetCommitMaxVersion; v++ { // every version answers in kind
		r := x.req(tc("t1", 0, 5))
		r.Version = v
		wantCode(t, "TxnOffsetCommit with transactions on", h2.txnCodesOf(r)[0], nil)
	}
	r := x.req(tc("t1", 0, 5))
	r.Version = TxnOffsetCommitMaxVersion + 1
	wantCode(t, "TxnOffsetCommit v5", h2.do(r).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.UnsupportedVersion)
}

// ---- visibility, commit, abort -----------------------------------------------------

// Offsets committed in a transaction are durable but not served until it commits; a
// fetch that requires stable offsets is told UNSTABLE_OFFSET_COMMIT for their partitions,
// in every form of OffsetFetch.
func TestTxnOffsetsPendingUntilCommit(t *testing.T) {
	h := newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 5))), nil)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 2, 7))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1, epoch: 2}, tc("t1", 0, 10), tc("t1", 1, 20))
	last := h.store.snapshot()[2].rec
	if len(last.Txn) != 2 || last.Txn[0].ProducerID != 1 || last.Txn[0].ProducerEpoch != 2 || len(last.Offsets) != 0 {
		t.Fatalf("store record of the txn commit: %+v", last)
	}

	wantOffset(t, h, "g", "t1", 0, 5)
	wantOffset(t, h, "g", "t1", 1, -1)
	wantStable(t, h, "g", "t1", 0, true)
	wantStable(t, h, "g", "t1", 1, true)
	wantStable(t, h, "g", "t1", 2, false)

	// v8 form, named partitions and all partitions.
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	named := kmsg.NewOffsetFetchRequestGroup()
	named.Group = "g"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "t1", []int32{0, 1, 2}
	named.Topics = append(named.Topics, rt)
	allOf := kmsg.NewOffsetFetchRequestGroup()
	allOf.Group = "g"
	r.Groups = append(r.Groups, named, allOf)
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	got := map[string][]int16{}
	for _, g := range resp.Groups {
		for _, p := range g.Topics[0].Partitions {
			got[g.Group] = append(got[g.Group], p.ErrorCode)
		}
	}
	u := kerr.UnstableOffsetCommit.Code
	if w := []int16{u, u, 0, u, 0}; len(got["g"]) != len(w) || got["g"][0] != w[0] || got["g"][1] != w[1] || got["g"][2] != w[2] || got["g"][3] != w[3] || got["g"][4] != w[4] {
		t.Fatalf("v8 stable fetch codes %v, want %v (named 0,1,2; all: 0,2)", got["g"], w)
	}
	// Without RequireStable, a fetch of all topics serves only the committed offsets.
	plain := kmsg.NewPtrOffsetFetchRequest()
	plain.Version, plain.Group, plain.Topics = 7, "g", nil
	ft := h.do(plain).(*kmsg.OffsetFetchResponse).Topics
	if len(ft) != 1 || len(ft[0].Partitions) != 2 || ft[0].Partitions[0].Offset != 5 || ft[0].Partitions[1].Offset != 7 {
		t.Fatalf("fetch of all offsets: %+v", ft)
	}

	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 10)
	wantOffset(t, h, "g", "t1", 1, 20)
	wantOffset(t, h, "g", "t1", 2, 7)
	wantStable(t, h, "g", "t1", 0, false)
	if o := h.c.Committed("g")["t1"][1]; o.LeaderEpoch != 3 || o.Metadata != "txn" {
		t.Fatalf("committed from the transaction: %+v", o)
	}
	calls := h.store.snapshot()
	if end := calls[len(calls)-1].rec; len(end.TxnEnds) != 1 || end.TxnEnds[0] != (TxnEnd{ProducerID: 1, Commit: true}) {
		t.Fatalf("last record %+v: want the transaction's end", end)
	}
	if got := h.store.latest("g"); got["t1"][0].Offset != 10 || got["t1"][1].Offset != 20 {
		t.Fatalf("replayed store: %+v", got)
	}
	// Ending it again changes nothing.
	n := len(h.store.snapshot())
	h.endTxn(1, false)
	wantOffset(t, h, "g", "t1", 0, 10)
	if len(h.store.snapshot()) != n {
		t.Fatal("an ended transaction's end written again")
	}
}

// An abort drops the pending offsets: the committed ones stay, and a simple group that
// only had the aborted offsets is gone.
func TestTxnAbortDropsPending(t *testing.T) {
	h := newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 5))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10), tc("t1", 1, 20))
	h.txnCommit(txnReq{group: "only-txn", pid: 1}, tc("t2", 0, 1))
	h.endTxn(1, false)
	wantOffset(t, h, "g", "t1", 0, 5)
	wantOffset(t, h, "g", "t1", 1, -1)
	wantStable(t, h, "g", "t1", 0, false)
	wantStable(t, h, "g", "t1", 1, false)
	if h.c.lookup("only-txn") != nil {
		t.Fatal("a simple group with only aborted offsets was kept")
	}
	if got := h.store.latest("g"); got["t1"][0].Offset != 5 || len(got["t1"]) != 1 {
		t.Fatalf("replayed store after the abort: %+v", got)
	}
	if len(h.c.txnGroups) != 0 {
		t.Fatalf("index after every transaction ended: %v", h.c.txnGroups)
	}
}

// Two producers' pending offsets in one group are apart: each commit or abort takes only
// its own.
func TestTxnProducersKeptApart(t *testing.T) {
	h := newTxnHarness(t)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10), tc("t1", 2, 30))
	h.txnCommit(txnReq{group: "g", pid: 2}, tc("t1", 1, 20), tc("t1", 3, 40))
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 10)
	wantOffset(t, h, "g", "t1", 2, 30)
	wantOffset(t, h, "g", "t1", 1, -1)
	wantStable(t, h, "g", "t1", 1, true)
	wantStable(t, h, "g", "t1", 0, false)
	h.endTxn(2, false)
	wantOffset(t, h, "g", "t1", 1, -1)
	wantOffset(t, h, "g", "t1", 3, -1)
	wantStable(t, h, "g", "t1", 3, false)
	// A producer's end in another partition's groups touches nothing here.
	h.txnCommit(txnReq{group: "g", pid: 3}, tc("t1", 1, 21))
	if err := h.c.CompleteTxn(context.Background(), func(string) bool { return false }, 3, true); err != nil {
		t.Fatal(err)
	}
	wantStable(t, h, "g", "t1", 1, true)
}

// Kafka's rule when commits mix: a committed transactional offset replaces the current
// one only if it is later in the log. Both producers commit the same partition; whatever
// order their transactions end in, the later record wins. A plain commit after a
// pending offset wins over it too, and the partition stays unstable until the
// transaction ends, as in Kafka.
func TestTxnLaterRecordWins(t *testing.T) {
	for _, firstEnd := range []int64{1, 2} {
		h := newTxnHarness(t)
		h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 30))
		h.txnCommit(txnReq{group: "g", pid: 2}, tc("t1", 0, 40))
		h.endTxn(firstEnd, true)
		h.endTxn(3-firstEnd, true)
		wantOffset(t, h, "g", "t1", 0, 40)
		h2 := h.takeover()
		wantOffset(t, h2, "g", "t1", 0, 40)
	}

	h := newTxnHarness(t)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10), tc("t1", 1, 11))
	wantCode(t, "plain commit after the pending one", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 15))), nil)
	wantOffset(t, h, "g", "t1", 0, 15)
	wantStable(t, h, "g", "t1", 0, true)
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 15)
	wantOffset(t, h, "g", "t1", 1, 11)
	wantStable(t, h, "g", "t1", 0, false)
	wantOffset(t, h.takeover(), "g", "t1", 0, 15)

	// A plain commit before the pending one loses to it.
	h = newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 15))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10))
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, 10)
	wantOffset(t, h.takeover(), "g", "t1", 0, 10)
}

// A tombstone (OffsetDelete) drops the pending offsets of its partition, and a deleted
// group takes its pending offsets with it (Kafka's replay of a tombstone).
func TestTxnTombstoneDropsPending(t *testing.T) {
	h := newTxnHarness(t)
	wantCode(t, "plain commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 5))), nil)
	h.txnCommit(txnReq{group: "g", pid: 1}, tc("t1", 0, 10), tc("t1", 1, 11))
	if resp := offsetDelete(h, "g", map[string][]int32{"t1": {0}}); resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	wantStable(t, h, "g", "t1", 0, false)
	h.endTxn(1, true)
	wantOffset(t, h, "g", "t1", 0, -1)
	wantOffset(t, h, "g", "t1", 1, 11)
	wantOffset(t, h.takeover(), "g", "t1", 0, -1)

	h.txnCommit(txnReq{group: "d", pid: 2}, tc("t2", 0, 1))
	if code := deleteGroups(h, 2, "d").Groups[0].ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	h.endTxn(2, true)
	wantOffset(t, h, "d", "t2", 0, -1)
	if h2 := h.takeover(); h2.c.lookup("d") != nil {
		t.Fatal("deleted group came back with its pending offsets")
	}
}

// ---- validation --------------------------------------------------------------------

// Generation and member are checked as Kafka does for transactional commits (v3+):
// current member and generation required when given; without them any state accepts the
// commit; no REBALANCE_IN_PROGRESS. An older producer epoch than the pending offsets' is
// refused, as are unknown partitions and too long metadata.
func TestTxnOffsetCommitValidation(t *testing.T) {
	h := newTxnHarness(t)
	a, b := h.member("g"), h.member("g").static("b-inst")
	h.stableGroup(a, b)
	ok := txnReq{group: "g", pid: 1, epoch: 1, gen: a.gen, member: a.id}
	h.txnCommit(ok, tc("t1", 0, 1))

	bad := ok
	bad.gen = a.gen + 1
	wantCode(t, "wrong generation", h.txnCodes(bad, tc("t1", 0, 2))[0], kerr.IllegalGeneration)
	bad = ok
	bad.member = "nobody"
	wantCode(t, "unknown member", h.txnCodes(bad, tc("t1", 0, 2))[0], kerr.UnknownMemberID)
	inst := "b-inst"
	bad = ok
	bad.member, bad.instanceID = a.id, &inst
	wantCode(t, "fenced static member", h.txnCodes(bad, tc("t1", 0, 2))[0], kerr.FencedInstanceID)
	missing := ok
	missing.group = "nope"
	wantCode(t, "missing group with a generation", h.txnCodes(missing, tc("t1", 0, 2))[0], kerr.IllegalGeneration)
	if h.c.lookup("nope") != nil {
		t.Fatal("group created by a refused commit")
	}
	for _, v := range []int16{0, 1, 2} { // no generation, no member: accepted in Stable
		r := txnReq{group: "g", pid: 1, epoch: 1}.req(tc("t1", 1, int64(v)))
		r.Version = v
		wantCode(t, "v0-v2 commit to a Stable group", h.txnCodesOf(r)[0], nil)
	}
	// v3 without generation and member too (Kafka: transactional commits need neither).
	wantCode(t, "v3 commit without member", h.txnCodes(txnReq{group: "g", pid: 1, epoch: 1}, tc("t1", 1, 3))[0], nil)
	// OffsetCommit of the same shape is refused (UNKNOWN_MEMBER_ID); the transactional one is not.
	wantCode(t, "plain commit without member", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 1, 3))), kerr.UnknownMemberID)

	older := ok
	older.epoch = 0
	wantCode(t, "older producer epoch", h.txnCodes(older, tc("t1", 0, 2))[0], kerr.InvalidProducerEpoch)
	newer := ok
	newer.epoch = 2
	codes := h.txnCodes(newer, tc("t1", 9, 2), tc("t1", 2, 2))
	wantCode(t, "unknown partition", codes[0], kerr.UnknownTopicOrPartition)
	wantCode(t, "newer epoch", codes[1], nil)
	long := newer.req(tc("t1", 3, 1))
	long.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(string(make([]byte, h.c.cfg.OffsetMetadataMaxBytes+1)))
	wantCode(t, "metadata too large", h.do(long).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)

	// CompletingRebalance: a transactional commit of the current generation is accepted.
	ja, jb := a.join(), b.join()
	a.joined(ja)
	b.joined(jb)
	if st := h.state("g"); st != "CompletingRebalance" {
		t.Fatalf("state %s", st)
	}
	wantCode(t, "plain commit in CompletingRebalance", commitCode(t, h.do(a.commitReq(8, "t1", 0, 9))), kerr.RebalanceInProgress)
	cur := txnReq{group: "g", pid: 1, epoch: 2, gen: a.gen, member: a.id}
	wantCode(t, "txn commit in CompletingRebalance", h.txnCodes(cur, tc("t1", 0, 9))[0], nil)
}
