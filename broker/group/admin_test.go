package group

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteGroups(h *harness, version int16, groups ...string) *kmsg.DeleteGroupsResponse {
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = version
	r.Groups = groups
	return h.do(r).(*kmsg.DeleteGroupsResponse)
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	a := h.member("active")
	h.stableGroup(a)
	wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, "t1", 0, 1))), nil)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t1", 0, 5))), nil)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t2", 3, 6))), nil)

	resp := deleteGroups(h, 2, "active", "idle", "missing")
	if len(resp.Groups) != 3 {
		t.Fatalf("%d results", len(resp.Groups))
	}
	for i, want := range []*kerr.Error{kerr.NonEmptyGroup, nil, kerr.GroupIDNotFound} {
		wantCode(t, resp.Groups[i].Group, resp.Groups[i].ErrorCode, want)
	}

	// The deletion of "idle" (and nothing else) went through the store.
	var deletions int
	for _, c := range h.store.snapshot() {
		if c.rec.Deleted {
			if c.group != "idle" {
				t.Fatalf("deletion record for group %s", c.group)
			}
			deletions++
		}
	}
	if deletions != 1 || len(h.store.latest("idle")) != 0 {
		t.Fatalf("%d deletion records, store replay %+v", deletions, h.store.latest("idle"))
	}
	if got := h.fetch("idle", "t1", 0); got.Offset != -1 {
		t.Fatalf("offset survived deletion: %+v", got)
	}
	lr := h.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "active" {
		t.Fatalf("groups after delete %+v", lr.Groups)
	}
	if got := h.fetch("active", "t1", 0); got.Offset != 1 {
		t.Fatalf("non-empty group lost its offset: %+v", got)
	}

	// The name can be reused.
	wantCode(t, "commit after delete", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t1", 0, 9))), nil)
	if got := h.fetch("idle", "t1", 0); got.Offset != 9 {
		t.Fatalf("reused group %+v", got)
	}

	// v3 carries an error message.
	r3 := deleteGroups(h, 3, "missing")
	if r3.Groups[0].ErrorMessage == nil {
		t.Fatal("v3 error without message")
	}
}

func TestDeleteGroupsStoreError(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t1", 0, 5))), nil)
	h.store.setErr(errors.New("disk on fire"))
	resp := deleteGroups(h, 2, "idle")
	wantCode(t, "delete", resp.Groups[0].ErrorCode, kerr.NotCoordinator)
	h.store.setErr(nil)
	if got := h.fetch("idle", "t1", 0); got.Offset != 5 {
		t.Fatalf("offset after failed delete %+v", got)
	}
	if st := h.state("idle"); st != "Empty" {
		t.Fatalf("state %s after failed delete", st)
	}
	wantCode(t, "retry", deleteGroups(h, 2, "idle").Groups[0].ErrorCode, nil)
}

func TestDeleteGroupsWhileWriting(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t1", 0, 5))), nil)
	gate := make(chan struct{})
	inFly := make(chan struct{}, 10)
	h.store.gate, h.store.inFly = gate, inFly
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = 2
	r.Groups = []string{"idle"}
	ch := h.send(r)
	<-inFly
	// While the tombstones are being written the group is Dead.
	wantCode(t, "commit while deleting", commitCode(t, h.do(commitReq(8, "idle", -1, "", "t1", 0, 6))), kerr.CoordinatorNotAvailable)
	m := h.member("idle")
	m.version = 3
	wantCode(t, "join while deleting", h.do(m.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.CoordinatorNotAvailable)
	close(gate)
	wantCode(t, "delete", h.wait(ch).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)
}

func offsetDelete(h *harness, group string, topics map[string][]int32) *kmsg.OffsetDeleteResponse {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = group
	for _, name := range []string{"t1", "t2", "t3", "missing"} {
		ps, ok := topics[name]
		if !ok {
			continue
		}
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = name
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return h.do(r).(*kmsg.OffsetDeleteResponse)
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t)
	a := h.member("g") // subscribes to t1
	h.stableGroup(a)
	wantCode(t, "commit t1", commitCode(t, h.do(a.commitReq(8, "t1", 0, 1))), nil)
	wantCode(t, "commit t2", commitCode(t, h.do(a.commitReq(8, "t2", 0, 2))), nil)

	resp := offsetDelete(h, "g", map[string][]int32{"t1": {0}, "t2": {0, 1}, "missing": {0}})
	wantCode(t, "top-level", resp.ErrorCode, nil)
	if len(resp.Topics) != 3 {
		t.Fatalf("topics %+v", resp.Topics)
	}
	wantCode(t, "subscribed t1", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "t2/0", resp.Topics[1].Partitions[0].ErrorCode, nil)
	wantCode(t, "t2/1 (no offset)", resp.Topics[1].Partitions[1].ErrorCode, nil)
	wantCode(t, "missing topic", resp.Topics[2].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	if got := h.fetch("g", "t1", 0); got.Offset != 1 {
		t.Fatalf("subscribed offset deleted: %+v", got)
	}
	if got := h.fetch("g", "t2", 0); got.Offset != -1 {
		t.Fatalf("t2 offset not deleted: %+v", got)
	}
	if latest := h.store.latest("g"); len(latest["t2"]) != 0 || latest["t1"][0].Offset != 1 {
		t.Fatalf("store replay %+v", latest)
	}

	wantCode(t, "unknown group", offsetDelete(h, "nope", map[string][]int32{"t1": {0}}).ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "empty name", offsetDelete(h, "", nil).ErrorCode, kerr.InvalidGroupID)

	// Non-consumer protocol with members: NON_EMPTY_GROUP.
	c := h.member("connect")
	c.ptype = "connect"
	h.stableGroup(c)
	wantCode(t, "non-consumer group", offsetDelete(h, "connect", map[string][]int32{"t1": {0}}).ErrorCode, kerr.NonEmptyGroup)

	// Deleting the last offset of an Empty group removes the group.
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t3", 0, 4))), nil)
	r := offsetDelete(h, "simple", map[string][]int32{"t3": {0}})
	wantCode(t, "simple delete", r.Topics[0].Partitions[0].ErrorCode, nil)
	if h.c.Committed("simple") != nil {
		t.Fatal("empty group without offsets not removed")
	}
}

func TestOffsetDeleteStoreError(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "s", -1, "", "t1", 0, 4))), nil)
	h.store.setErr(kerr.NotEnoughReplicas)
	r := offsetDelete(h, "s", map[string][]int32{"t1": {0}})
	wantCode(t, "store error", r.ErrorCode, kerr.CoordinatorNotAvailable)
	if got := h.fetch("s", "t1", 0); got.Offset != 4 {
		t.Fatalf("offset after failed delete %+v", got)
	}
}

func TestDescribeAndListGroups(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("stable"), h.member("stable")
	a.instance = kmsg.StringPtr("inst-a")
	h.stableGroup(a, b)
	p := h.member("preparing")
	pch := p.join() // initial rebalance not completed yet (no Advance)
	noResponse(t, pch)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t1", 0, 1))), nil)

	d := h.describe(6, "stable", "preparing", "missing")
	if len(d.Groups) != 3 {
		t.Fatalf("%d groups described", len(d.Groups))
	}
	s := d.Groups[0]
	if s.ErrorCode != 0 || s.State != "Stable" || s.ProtocolType != "consumer" || s.Protocol != "range" || len(s.Members) != 2 {
		t.Fatalf("stable group %+v", s)
	}
	for _, m := range s.Members {
		if m.ClientID != "client" || m.ClientHost != "/127.0.0.1" || string(m.MemberAssignment) != "a-"+m.MemberID ||
			string(m.ProtocolMetadata) != string(consumerMeta("t1")) {
			t.Fatalf("member %+v", m)
		}
	}
	if s.Members[0].MemberID != a.id || s.Members[0].InstanceID == nil || *s.Members[0].InstanceID != "inst-a" {
		t.Fatalf("first member %+v", s.Members[0])
	}
	pg := d.Groups[1]
	if pg.State != "PreparingRebalance" || pg.Protocol != "" || len(pg.Members) != 1 || len(pg.Members[0].ProtocolMetadata) != 0 {
		t.Fatalf("preparing group %+v", pg)
	}
	wantCode(t, "missing v6", d.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	if d.Groups[2].State != "Dead" {
		t.Fatalf("missing group state %s", d.Groups[2].State)
	}
	if old := h.describe(5, "missing").Groups[0]; old.ErrorCode != 0 || old.State != "Dead" {
		t.Fatalf("missing group v5 %+v", old)
	}

	list := func(version int16, states, types []string) []kmsg.ListGroupsResponseGroup {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = version
		r.StatesFilter = states
		r.TypesFilter = types
		resp := h.do(r).(*kmsg.ListGroupsResponse)
		wantCode(t, "list", resp.ErrorCode, nil)
		return resp.Groups
	}
	all := list(5, nil, nil)
	if len(all) != 3 || all[0].Group != "preparing" || all[1].Group != "simple" || all[2].Group != "stable" {
		t.Fatalf("list %+v", all)
	}
	if all[2].GroupState != "Stable" || all[2].ProtocolType != "consumer" || all[2].GroupType != "classic" || all[1].GroupState != "Empty" {
		t.Fatalf("list entries %+v", all)
	}
	if got := list(4, []string{"stable", "Empty"}, nil); len(got) != 2 || got[0].Group != "simple" || got[1].Group != "stable" {
		t.Fatalf("states filter %+v", got)
	}
	if got := list(5, nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("types filter consumer %+v", got)
	}
	if got := list(5, nil, []string{"Classic"}); len(got) != 3 {
		t.Fatalf("types filter classic %+v", got)
	}
	if got := list(3, []string{"Stable"}, nil); len(got) != 3 { // filter not in v3
		t.Fatalf("v3 ignores filters %+v", got)
	}
}

// Every API at every advertised version answers with a response of the same
// version that encodes without panicking.
func TestAllVersionsRespond(t *testing.T) {
	h := newHarness(t)
	a := h.member("g")
	h.stableGroup(a)
	for key, maxV := range MaxVersions() {
		for v := int16(0); v <= maxV; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.JoinGroupRequest:
				*r = *a.joinReq()
				r.Version = v
				r.Group = "join-" + string(rune('0'+v))
				r.MemberID = ""
				r.InstanceID = nil
			case *kmsg.SyncGroupRequest:
				r.Group, r.MemberID, r.Generation = "g", a.id, a.gen
			case *kmsg.HeartbeatRequest:
				r.Group, r.MemberID, r.Generation = "g", a.id, a.gen
			case *kmsg.LeaveGroupRequest:
				r.Group, r.MemberID = "g", "nobody"
			case *kmsg.OffsetCommitRequest:
				*r = *commitReq(v, "simple", -1, "", "t1", 0, int64(v))
			case *kmsg.OffsetFetchRequest:
				r.Group = "simple"
				r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "simple", MemberEpoch: -1}}
			case *kmsg.DescribeGroupsRequest:
				r.Groups = []string{"g", "missing"}
			case *kmsg.DeleteGroupsRequest:
				r.Groups = []string{"missing"}
			case *kmsg.OffsetDeleteRequest:
				r.Group = "simple"
			}
			ch := h.sendCtx(context.Background(), req)
			if key == kmsg.JoinGroup.Int16() {
				h.clock.Advance(0)
			}
			resp := h.wait(ch)
			if resp.GetVersion() != v {
				t.Fatalf("key %d v%d: response version %d", key, v, resp.GetVersion())
			}
			_ = resp.AppendTo(nil)
		}
	}
	// Unsupported versions are rejected.
	r := commitReq(8, "simple", -1, "", "t1", 0, 1)
	r.Version = 10
	wantCode(t, "commit v10", commitCode(t, h.do(r)), kerr.UnsupportedVersion)
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 10
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "x"
	f.Groups = append(f.Groups, g)
	wantCode(t, "fetch v10", h.do(f).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode, kerr.UnsupportedVersion)
}

func TestMaxVersions(t *testing.T) {
	mv := MaxVersions()
	if len(mv) != 10 {
		t.Fatalf("%d keys", len(mv))
	}
	for key, v := range mv {
		req := kmsg.RequestForKey(key)
		if req == nil || v > req.MaxVersion() {
			t.Fatalf("key %d: version %d beyond kmsg", key, v)
		}
	}
	if mv[kmsg.OffsetCommit.Int16()] >= 10 || mv[kmsg.OffsetFetch.Int16()] >= 10 {
		t.Fatal("topic-ID versions advertised")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.MaxSessionTimeout = c.MinSessionTimeout - 1
	if c.Validate() == nil {
		t.Fatal("max < min accepted")
	}
	c = DefaultConfig()
	c.InitialRebalanceDelay = -1
	c.Clock = nil
	if c.Validate() == nil {
		t.Fatal("negative delay / nil clock accepted")
	}
}
