package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSimpleCommitFetchRoundTrip(t *testing.T) {
	h := newHarness(t)
	// Generation -1, no member: a "simple" group is created.
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t1", 2, 42))), nil)
	got := h.fetch("simple", "t1", 2)
	if got.Offset != 42 || got.LeaderEpoch != 7 || got.Metadata == nil || *got.Metadata != "meta" || got.ErrorCode != 0 {
		t.Fatalf("fetched %+v", got)
	}
	if o := h.c.Committed("simple")["t1"][2]; o.Offset != 42 || o.CommitTime != h.clock.Now() || o.Metadata != "meta" {
		t.Fatalf("Committed %+v", o)
	}
	calls := h.store.snapshot()
	if len(calls) != 1 || calls[0].group != "simple" || len(calls[0].offsets) != 1 || calls[0].offsets[0].Offset != 42 || calls[0].offsets[0].Delete {
		t.Fatalf("store calls %+v", calls)
	}
	// Uncommitted partition: -1, no error, empty metadata.
	if got := h.fetch("simple", "t1", 3); got.Offset != -1 || got.LeaderEpoch != -1 || got.Metadata == nil || *got.Metadata != "" {
		t.Fatalf("uncommitted %+v", got)
	}
	// Unknown group: -1 too.
	if got := h.fetch("nobody", "t1", 0); got.Offset != -1 {
		t.Fatalf("unknown group %+v", got)
	}

	// v0 commit (no generation) and v1 fetch.
	wantCode(t, "v0 commit", commitCode(t, h.do(commitReq(0, "simple", 99, "", "t2", 0, 7))), nil)
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 1
	f.Group = "simple"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic = "t2"
	ft.Partitions = []int32{0}
	f.Topics = append(f.Topics, ft)
	fr := h.do(f).(*kmsg.OffsetFetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.Offset != 7 || p.LeaderEpoch != -1 {
		t.Fatalf("v1 fetch %+v", p)
	}

	// All partitions (null topics), v5.
	f = kmsg.NewPtrOffsetFetchRequest()
	f.Version = 5
	f.Group = "simple"
	fr = h.do(f).(*kmsg.OffsetFetchResponse)
	if len(fr.Topics) != 2 || fr.Topics[0].Topic != "t1" || fr.Topics[1].Topic != "t2" ||
		fr.Topics[0].Partitions[0].Offset != 42 || fr.Topics[1].Partitions[0].Offset != 7 {
		t.Fatalf("all-partitions fetch %+v", fr.Topics)
	}

	// v8 multi-group fetch: one group all, one group specific.
	f = kmsg.NewPtrOffsetFetchRequest()
	f.Version = 8
	g1 := kmsg.NewOffsetFetchRequestGroup()
	g1.Group = "simple"
	g2 := kmsg.NewOffsetFetchRequestGroup()
	g2.Group = "nobody"
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic = "t1"
	gt.Partitions = []int32{0, 1}
	g2.Topics = append(g2.Topics, gt)
	f.Groups = append(f.Groups, g1, g2)
	fr = h.do(f).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 2 || fr.Groups[0].Group != "simple" || len(fr.Groups[0].Topics) != 2 ||
		fr.Groups[0].Topics[0].Partitions[0].Offset != 42 ||
		fr.Groups[1].Group != "nobody" || len(fr.Groups[1].Topics[0].Partitions) != 2 || fr.Groups[1].Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("v8 fetch %+v", fr.Groups)
	}

	// The simple group is listed with an empty protocol type.
	lr := h.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "simple" || lr.Groups[0].ProtocolType != "" {
		t.Fatalf("list %+v", lr.Groups)
	}
}

func TestCommitValidation(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)

	wantCode(t, "member commit", commitCode(t, h.do(a.commitReq(8, "t1", 0, 10))), nil)
	if got := h.fetch("g", "t1", 0); got.Offset != 10 {
		t.Fatalf("fetched %d", got.Offset)
	}

	wrongGen := a.commitReq(8, "t1", 0, 11)
	wrongGen.Generation = a.gen + 1
	wantCode(t, "wrong generation", commitCode(t, h.do(wrongGen)), kerr.IllegalGeneration)
	unknown := a.commitReq(8, "t1", 0, 11)
	unknown.MemberID = "nobody"
	wantCode(t, "unknown member", commitCode(t, h.do(unknown)), kerr.UnknownMemberID)
	wantCode(t, "generation-less commit to active group", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 11))), kerr.UnknownMemberID)
	wantCode(t, "unknown group with generation", commitCode(t, h.do(commitReq(8, "nope", 3, "m", "t1", 0, 1))), kerr.IllegalGeneration)
	wantCode(t, "unknown group with generation v9", commitCode(t, h.do(commitReq(9, "nope", 3, "m", "t1", 0, 1))), kerr.GroupIDNotFound)
	if got := h.fetch("g", "t1", 0); got.Offset != 10 {
		t.Fatalf("rejected commits changed the offset to %d", got.Offset)
	}
	if h.c.Committed("nope") != nil {
		t.Fatal("rejected commit created a group")
	}

	// Unknown partitions are rejected individually; a partition with too
	// large metadata too.
	r := a.commitReq(8, "t1", 0, 12)
	bad := kmsg.NewOffsetCommitRequestTopicPartition()
	bad.Partition = 99
	r.Topics[0].Partitions = append(r.Topics[0].Partitions, bad)
	big := kmsg.NewOffsetCommitRequestTopicPartition()
	big.Partition = 1
	big.Metadata = kmsg.StringPtr(string(make([]byte, 4097)))
	r.Topics[0].Partitions = append(r.Topics[0].Partitions, big)
	nt := kmsg.NewOffsetCommitRequestTopic()
	nt.Topic = "missing"
	nt.Partitions = append(nt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	r.Topics = append(r.Topics, nt)
	resp := h.do(r).(*kmsg.OffsetCommitResponse)
	wantCode(t, "good partition", resp.Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "unknown partition", resp.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "large metadata", resp.Topics[0].Partitions[2].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantCode(t, "unknown topic", resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	if resp.Topics[1].Topic != "missing" || resp.Topics[0].Partitions[1].Partition != 99 {
		t.Fatalf("response shape %+v", resp.Topics)
	}
	if c := h.c.Committed("g"); c["t1"][0].Offset != 12 || len(c["t1"]) != 1 {
		t.Fatalf("committed %+v", c)
	}

	// During CompletingRebalance commits are refused.
	ca := a.join()
	cb := b.join()
	a.joined(ca)
	b.joined(cb)
	wantCode(t, "completing", commitCode(t, h.do(a.commitReq(8, "t1", 0, 13))), kerr.RebalanceInProgress)
}

func TestCommitWaitsForStore(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	inFly := make(chan struct{}, 10)
	h.store.gate, h.store.inFly = gate, inFly

	ch := h.send(commitReq(8, "s", -1, "", "t1", 0, 5))
	select {
	case <-inFly:
	case <-time.After(waitTimeout):
		t.Fatal("store not called")
	}
	noResponse(t, ch)
	if got := h.fetch("s", "t1", 0); got.Offset != -1 {
		t.Fatalf("offset visible before it is durable: %d", got.Offset)
	}
	// A second commit queues behind the first and lands after it.
	ch2 := h.send(commitReq(8, "s", -1, "", "t1", 0, 6))
	close(gate)
	wantCode(t, "commit", commitCode(t, h.wait(ch)), nil)
	wantCode(t, "commit 2", commitCode(t, h.wait(ch2)), nil)
	if got := h.fetch("s", "t1", 0); got.Offset != 6 {
		t.Fatalf("offset %d after both commits, want 6", got.Offset)
	}
}

func TestCommitStoreErrorLeavesMemoryUntouched(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "first commit", commitCode(t, h.do(commitReq(8, "s", -1, "", "t1", 0, 5))), nil)

	h.store.setErr(errors.New("fdatasync: input/output error"))
	wantCode(t, "failed commit", commitCode(t, h.do(commitReq(8, "s", -1, "", "t1", 0, 6))), kerr.NotCoordinator)
	if got := h.fetch("s", "t1", 0); got.Offset != 5 {
		t.Fatalf("offset %d after failed commit, want 5", got.Offset)
	}
	if c := h.c.Committed("s"); c["t1"][0].Offset != 5 {
		t.Fatalf("Committed %+v", c)
	}

	h.store.setErr(fmt.Errorf("append: %w", kerr.NotEnoughReplicas))
	wantCode(t, "kerr commit", commitCode(t, h.do(commitReq(8, "s", -1, "", "t1", 0, 7))), kerr.CoordinatorNotAvailable)
	h.store.setErr(kerr.KafkaStorageError)
	wantCode(t, "storage error", commitCode(t, h.do(commitReq(8, "s", -1, "", "t1", 0, 7))), kerr.NotCoordinator)

	// A simple group created by a failed commit does not linger.
	wantCode(t, "failed first commit", commitCode(t, h.do(commitReq(8, "fresh", -1, "", "t1", 0, 1))), kerr.NotCoordinator)
	if h.c.Committed("fresh") != nil {
		t.Fatal("group created by a failed commit still exists")
	}
	h.store.setErr(nil)
	if got := h.fetch("s", "t1", 0); got.Offset != 5 {
		t.Fatalf("offset %d", got.Offset)
	}
	if latest := h.store.latest("s"); latest["t1"][0].Offset != 5 {
		t.Fatalf("store has %+v", latest)
	}
}

func TestCommitCancelledRequestIsNotWritten(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	inFly := make(chan struct{}, 10)
	h.store.gate, h.store.inFly = gate, inFly
	first := h.send(commitReq(8, "s", -1, "", "t1", 0, 1))
	<-inFly
	ctx, cancel := context.WithCancel(context.Background())
	second := h.sendCtx(ctx, commitReq(8, "s", -1, "", "t1", 0, 2))
	cancel() // client went away while queued
	close(gate)
	wantCode(t, "first", commitCode(t, h.wait(first)), nil)
	wantCode(t, "cancelled", commitCode(t, h.wait(second)), kerr.CoordinatorNotAvailable)
	if got := h.fetch("s", "t1", 0); got.Offset != 1 {
		t.Fatalf("offset %d", got.Offset)
	}
}

// Concurrent commits: what is in memory always equals what a WAL replay gives.
func TestConcurrentCommitsMatchStore(t *testing.T) {
	h := newHarness(t)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				r := commitReq(8, "s", -1, "", "t1", int32(i%4), int64(w*1000+i))
				ch := h.send(r)
				select {
				case resp := <-ch:
					if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
						t.Errorf("commit error %d", code)
					}
				case <-time.After(waitTimeout):
					t.Error("commit timed out")
				}
			}
		}()
	}
	wg.Wait()
	mem, wal := h.c.Committed("s"), h.store.latest("s")
	for p := int32(0); p < 4; p++ {
		if mem["t1"][p].Offset != wal["t1"][p].Offset {
			t.Fatalf("partition %d: memory %d, store replay %d", p, mem["t1"][p].Offset, wal["t1"][p].Offset)
		}
	}
}

func TestRestoreThenFetch(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	h.c.Restore("r", Offset{Topic: "t1", Partition: 0, Offset: 100, LeaderEpoch: 3, Metadata: "m", CommitTime: now})
	h.c.Restore("r", Offset{Topic: "t1", Partition: 1, Offset: 200, LeaderEpoch: -1, CommitTime: now})
	h.c.Restore("r", Offset{Topic: "t1", Partition: 0, Offset: 150, LeaderEpoch: 4, Metadata: "m2", CommitTime: now})
	h.c.Restore("r", Offset{Topic: "t1", Partition: 1, Delete: true})
	h.c.Restore("gone", Offset{Topic: "t2", Partition: 0, Offset: 1})
	h.c.Restore("gone", Offset{Topic: "t2", Partition: 0, Delete: true})

	got := h.fetch("r", "t1", 0)
	if got.Offset != 150 || got.LeaderEpoch != 4 || *got.Metadata != "m2" {
		t.Fatalf("restored %+v", got)
	}
	if got := h.fetch("r", "t1", 1); got.Offset != -1 {
		t.Fatalf("tombstoned partition %+v", got)
	}
	if len(h.store.snapshot()) != 0 {
		t.Fatal("Restore wrote to the store")
	}
	lr := h.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "r" {
		t.Fatalf("groups after restore %+v", lr.Groups)
	}
	// A restored group can be joined and its offsets survive.
	m := h.member("r")
	h.stableGroup(m)
	if got := h.fetch("r", "t1", 0); got.Offset != 150 {
		t.Fatalf("after join %+v", got)
	}
}
