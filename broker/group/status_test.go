package group

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// statuses is a Config.Status/Loading pair the test changes as it goes.
type statuses struct {
	mu      sync.Mutex
	of      map[string]OwnStatus // absent: Owned
	loading bool
}

func (s *statuses) set(group string, st OwnStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.of[group] = st
}

func (s *statuses) setLoading(b bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loading = b
}

func (s *statuses) status(group string) OwnStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.of[group]; ok {
		return st
	}
	return Owned
}

func (s *statuses) anyLoading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loading
}

func newStatusHarness(t *testing.T) (*harness, *statuses) {
	st := &statuses{of: map[string]OwnStatus{}}
	h := newHarness(t, func(c *Config) {
		c.Status = st.status
		c.Loading = st.anyLoading
	})
	return h, st
}

// codes collects every error code of a group API response.
func codes(t *testing.T, resp kmsg.Response) []int16 {
	t.Helper()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return []int16{r.ErrorCode}
	case *kmsg.SyncGroupResponse:
		return []int16{r.ErrorCode}
	case *kmsg.HeartbeatResponse:
		return []int16{r.ErrorCode}
	case *kmsg.LeaveGroupResponse:
		return []int16{r.ErrorCode}
	case *kmsg.OffsetDeleteResponse:
		return []int16{r.ErrorCode}
	case *kmsg.OffsetCommitResponse:
		var out []int16
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, rp.ErrorCode)
			}
		}
		return out
	case *kmsg.OffsetFetchResponse:
		if r.Version >= 8 {
			var out []int16
			for _, g := range r.Groups {
				out = append(out, g.ErrorCode)
			}
			return out
		}
		out := []int16{r.ErrorCode}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, rp.ErrorCode)
			}
		}
		return out
	case *kmsg.DescribeGroupsResponse:
		var out []int16
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
		return out
	case *kmsg.DeleteGroupsResponse:
		var out []int16
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
		return out
	}
	t.Fatalf("unexpected response %T", resp)
	return nil
}

// groupRequests is one request of every group API key naming group (m is a member of
// it), built fresh on each call.
func groupRequests(m *tmember, group string) map[string]kmsg.Request {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, group, m.gen, m.id
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	lv.Members = append(lv.Members, lm)
	f7 := kmsg.NewPtrOffsetFetchRequest()
	f7.Version, f7.Group = 7, group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "t1", []int32{0}
	f7.Topics = append(f7.Topics, ft)
	f8 := kmsg.NewPtrOffsetFetchRequest()
	f8.Version = 8
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = group
	f8.Groups = append(f8.Groups, fg)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{group}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{group}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = group
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "t2"
	op := kmsg.NewOffsetDeleteRequestTopicPartition()
	ot.Partitions = append(ot.Partitions, op)
	od.Topics = append(od.Topics, ot)
	join := m.joinReq()
	join.Group = group
	sync := m.syncReq(nil)
	sync.Group = group
	return map[string]kmsg.Request{
		"JoinGroup":      join,
		"SyncGroup":      sync,
		"Heartbeat":      hb,
		"LeaveGroup":     lv,
		"OffsetCommit":   commitReq(8, group, m.gen, m.id, "t1", 0, 99),
		"OffsetFetch v7": f7,
		"OffsetFetch v8": f8,
		"DescribeGroups": dg,
		"DeleteGroups":   del,
		"OffsetDelete":   od,
	}
}

// Every group API answers COORDINATOR_LOAD_IN_PROGRESS for a group whose partition is
// still being restored (no "no committed offset", no commit that an older restored one
// would overwrite), NOT_COORDINATOR for a group another coordinator owns; ListGroups
// reports the load at top level and leaves unrestored groups out; once Owned, the
// restored offsets are served.
func TestStatusGatesEveryGroupAPI(t *testing.T) {
	h, st := newStatusHarness(t)
	m := h.member("g")
	h.stableGroup(m)
	wantCode(t, "commit while owned", commitCode(t, h.do(m.commitReq(8, "t1", 0, 5))), nil)
	wantCode(t, "commit t2 while owned", commitCode(t, h.do(m.commitReq(8, "t2", 0, 6))), nil)
	before := len(h.store.snapshot())

	st.set("g", Loading)
	st.setLoading(true)
	for name, req := range groupRequests(m, "g") {
		cs := codes(t, h.do(req))
		if len(cs) == 0 {
			t.Fatalf("%s: no error code in the response", name)
		}
		for _, c := range cs {
			wantCode(t, name+" while loading", c, kerr.CoordinatorLoadInProgress)
		}
	}
	if n := len(h.store.snapshot()); n != before {
		t.Fatalf("%d writes reached the store while the group was loading", n-before)
	}
	if got := h.c.Committed("g")["t1"][0].Offset; got != 5 {
		t.Fatalf("offset changed to %d while loading", got)
	}

	st.set("foreign", NotOwned)
	for name, req := range groupRequests(m, "foreign") {
		for _, c := range codes(t, h.do(req)) {
			wantCode(t, name+" for a foreign group", c, kerr.NotCoordinator)
		}
	}
	// A batch naming a foreign group goes elsewhere; one with a loading group waits.
	for _, tc := range []struct {
		groups []string
		want   *kerr.Error
	}{
		{[]string{"g", "foreign"}, kerr.NotCoordinator},
		{[]string{"other", "g"}, kerr.CoordinatorLoadInProgress},
	} {
		for _, c := range codes(t, h.describe(5, tc.groups...)) {
			wantCode(t, "describe "+tc.groups[0]+","+tc.groups[1], c, tc.want)
		}
	}

	h.c.Restore("restored", Offset{Topic: "t1", Partition: 1, Offset: 42, LeaderEpoch: -1})
	st.set("restored", Loading)
	h.c.Restore("other", Offset{Topic: "t1", Partition: 1, Offset: 1, LeaderEpoch: -1})
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	resp := h.do(lg).(*kmsg.ListGroupsResponse)
	wantCode(t, "list groups while a partition loads", resp.ErrorCode, kerr.CoordinatorLoadInProgress)
	var listed []string
	for _, g := range resp.Groups {
		listed = append(listed, g.Group)
	}
	if !slices.Equal(listed, []string{"other"}) {
		t.Fatalf("ListGroups while loading lists %v, want only the owned group [other]", listed)
	}
	var infos []string
	for _, gi := range h.c.Groups() {
		infos = append(infos, gi.Name)
	}
	if !slices.Equal(infos, []string{"other"}) {
		t.Fatalf("Groups() while loading = %v, want [other]", infos)
	}

	st.set("g", Owned)
	st.set("restored", Owned)
	st.setLoading(false)
	resp = h.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	wantCode(t, "list groups once restored", resp.ErrorCode, nil)
	if len(resp.Groups) != 3 {
		t.Fatalf("ListGroups once restored lists %+v, want g, other and restored", resp.Groups)
	}
	if o := h.fetch("restored", "t1", 1); o.Offset != 42 {
		t.Fatalf("restored offset = %d, want 42", o.Offset)
	}
	if code := m.heartbeat(); code != 0 {
		t.Fatalf("heartbeat once owned again: %v", kerr.ErrorForCode(code))
	}
}

// A commit already on its way to the store when its group's partition was lost and a
// restore of it began must not overwrite what the restore rebuilt from the log: the
// restore read the log after the write, so it is the newer state.
func TestRestoreWinsOverWriteInFlight(t *testing.T) {
	h, st := newStatusHarness(t)
	gate := make(chan struct{})
	h.store.gate, h.store.inFly = gate, make(chan struct{}, 4)
	ch := h.send(commitReq(8, "g", -1, "", "t1", 0, 10))
	<-h.store.inFly

	st.set("g", Loading)
	h.c.Restore("g", Offset{Topic: "t1", Partition: 0, Offset: 7, LeaderEpoch: -1})
	close(gate)
	wantCode(t, "commit across a restore", commitCode(t, h.wait(ch)), kerr.NotCoordinator)
	if got := h.c.Committed("g")["t1"][0].Offset; got != 7 {
		t.Fatalf("offset after the restore = %d, want the restored 7", got)
	}
	st.set("g", Owned)
	if o := h.fetch("g", "t1", 0); o.Offset != 7 {
		t.Fatalf("fetched offset = %d, want the restored 7", o.Offset)
	}
}

// A commit accepted while the group was owned but still queued behind another write when
// its partition started loading is not written: it would land in the log after the
// restore's snapshot and be overwritten in memory by older restored commits.
func TestQueuedWriteRecheckedBeforeStore(t *testing.T) {
	h, st := newStatusHarness(t)
	gate := make(chan struct{})
	h.store.gate, h.store.inFly = gate, make(chan struct{}, 4)
	first := h.send(commitReq(8, "g", -1, "", "t1", 0, 1))
	<-h.store.inFly
	second := h.send(commitReq(8, "g", -1, "", "t1", 1, 2))
	st.set("g", Loading)
	close(gate)
	wantCode(t, "commit written before loading", commitCode(t, h.wait(first)), nil)
	wantCode(t, "commit queued when loading began", commitCode(t, h.wait(second)), kerr.CoordinatorLoadInProgress)
	if calls := h.store.snapshot(); len(calls) != 1 {
		t.Fatalf("%d store calls, want 1 (the queued commit must not be written)", len(calls))
	}

	st.set("g", NotOwned)
	wantCode(t, "commit to a lost group", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 2, 3))), kerr.NotCoordinator)
}
