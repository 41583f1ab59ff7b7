package group

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncThreeMembers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 100 * time.Millisecond })
	ms := []*tmember{h.member("g"), h.member("g"), h.member("g")}
	chs := make([]<-chan kmsg.Response, len(ms))
	for i, m := range ms {
		chs[i] = m.join()
	}
	for _, ch := range chs {
		noResponse(t, ch) // initial rebalance delay not elapsed
	}
	if got := h.state("g"); got != "PreparingRebalance" {
		t.Fatalf("state %s, want PreparingRebalance", got)
	}
	h.clock.Advance(100 * time.Millisecond)
	for _, ch := range chs {
		noResponse(t, ch) // members arrived during the delay: extended once
	}
	h.clock.Advance(100 * time.Millisecond)

	var leader *tmember
	for i, m := range ms {
		resp := m.joined(chs[i])
		if resp.Generation != 1 {
			t.Fatalf("generation %d, want 1", resp.Generation)
		}
		if resp.Protocol == nil || *resp.Protocol != "range" || resp.ProtocolType == nil || *resp.ProtocolType != "consumer" {
			t.Fatalf("protocol %v/%v", resp.ProtocolType, resp.Protocol)
		}
		if resp.LeaderID != ms[0].id && ms[0].id != "" {
			t.Fatalf("leader %s, want first member %s", resp.LeaderID, ms[0].id)
		}
		if resp.LeaderID == m.id {
			leader = m
			if len(resp.Members) != 3 {
				t.Fatalf("leader got %d members, want 3", len(resp.Members))
			}
			for _, rm := range resp.Members {
				if string(rm.ProtocolMetadata) != string(consumerMeta("t1")) {
					t.Fatalf("member metadata %q", rm.ProtocolMetadata)
				}
			}
		} else if len(resp.Members) != 0 {
			t.Fatalf("follower got %d members", len(resp.Members))
		}
	}
	if leader != ms[0] {
		t.Fatal("first member is not the leader")
	}
	if got := h.state("g"); got != "CompletingRebalance" {
		t.Fatalf("state %s, want CompletingRebalance", got)
	}

	// Followers sync first and wait for the leader.
	f1, f2 := ms[1].sync(nil), ms[2].sync(nil)
	noResponse(t, f1)
	noResponse(t, f2)
	l := leader.sync(map[string][]byte{ms[0].id: []byte("A0"), ms[1].id: []byte("A1"), ms[2].id: []byte("A2"), "ghost": []byte("x")})
	for i, ch := range []<-chan kmsg.Response{l, f1, f2} {
		resp := h.wait(ch).(*kmsg.SyncGroupResponse)
		wantCode(t, "sync", resp.ErrorCode, nil)
		if want := "A" + string(rune('0'+i)); string(resp.MemberAssignment) != want {
			t.Fatalf("member %d assignment %q, want %q", i, resp.MemberAssignment, want)
		}
		if resp.Protocol == nil || *resp.Protocol != "range" {
			t.Fatalf("sync v5 protocol %v", resp.Protocol)
		}
	}
	if got := h.state("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
	for _, m := range ms {
		wantCode(t, "heartbeat", m.heartbeat(), nil)
	}
	// A late follower sync in Stable gets its assignment.
	resp := h.wait(ms[1].sync(nil)).(*kmsg.SyncGroupResponse)
	wantCode(t, "stable sync", resp.ErrorCode, nil)
	if string(resp.MemberAssignment) != "A1" {
		t.Fatalf("stable sync assignment %q", resp.MemberAssignment)
	}
}

func TestInitialRebalanceDelayExtendsForNewMembers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	m1, m2 := h.member("g"), h.member("g")
	c1 := m1.join()
	h.clock.Advance(2 * time.Second)
	c2 := m2.join()
	h.clock.Advance(1 * time.Second) // first delay over, but a member arrived meanwhile
	noResponse(t, c1)
	noResponse(t, c2)
	h.clock.Advance(3 * time.Second)
	r1, r2 := m1.joined(c1), m2.joined(c2)
	if r1.Generation != 1 || r2.Generation != 1 {
		t.Fatalf("generations %d %d", r1.Generation, r2.Generation)
	}

	// Without newcomers the delay is not extended.
	h2 := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	m := h2.member("g")
	ch := m.join()
	h2.clock.Advance(3*time.Second - time.Millisecond)
	noResponse(t, ch)
	h2.clock.Advance(time.Millisecond)
	m.joined(ch)
}

func TestInvalidJoins(t *testing.T) {
	h := newHarness(t)
	m := h.member("g")
	m.session = 1000 // below the 6s minimum
	resp := h.do(m.joinReq()).(*kmsg.JoinGroupResponse)
	wantCode(t, "short session", resp.ErrorCode, kerr.InvalidSessionTimeout)

	m = h.member("")
	wantCode(t, "empty group", h.do(m.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidGroupID)

	m = h.member("g")
	m.protos = nil
	wantCode(t, "no protocols", h.do(m.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)

	m = h.member("g")
	m.id = "made-up"
	wantCode(t, "unknown member of unknown group", h.do(m.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID)

	// Failed joins leave no group behind.
	lr := kmsg.NewPtrListGroupsRequest()
	if n := len(h.do(lr).(*kmsg.ListGroupsResponse).Groups); n != 0 {
		t.Fatalf("%d groups listed after failed joins", n)
	}

	a := h.member("g", "range")
	h.stableGroup(a)
	b := h.member("g", "roundrobin")
	ch := h.send(b.joinReq()) // v9 unknown member: checked before MEMBER_ID_REQUIRED
	wantCode(t, "incompatible protocol", h.wait(ch).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	c := h.member("g", "range")
	c.ptype = "connect"
	wantCode(t, "other protocol type", h.wait(h.send(c.joinReq())).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t)
	leader := h.member("g", "sticky", "range", "roundrobin")
	follower := h.member("g", "roundrobin", "range")
	c1, c2 := leader.join(), follower.join()
	h.clock.Advance(0)
	// Common protocols: range, roundrobin; one vote each: the leader's order wins.
	for _, r := range []*kmsg.JoinGroupResponse{leader.joined(c1), follower.joined(c2)} {
		if *r.Protocol != "range" {
			t.Fatalf("selected %s, want range", *r.Protocol)
		}
	}

	// Kafka's vote: two members preferring roundrobin outvote the leader.
	h2 := newHarness(t)
	ms := []*tmember{h2.member("g", "range", "roundrobin"), h2.member("g", "roundrobin", "range"), h2.member("g", "roundrobin", "range")}
	var chs []<-chan kmsg.Response
	for _, m := range ms {
		chs = append(chs, m.join())
	}
	h2.clock.Advance(0)
	for i, m := range ms {
		if r := m.joined(chs[i]); *r.Protocol != "roundrobin" {
			t.Fatalf("selected %s, want roundrobin", *r.Protocol)
		}
	}
}

func TestMemberIDRequired(t *testing.T) {
	h := newHarness(t)
	m := h.member("g")
	first := h.do(m.joinReq()).(*kmsg.JoinGroupResponse)
	wantCode(t, "v9 first join", first.ErrorCode, kerr.MemberIDRequired)
	if first.MemberID == "" || first.Generation != -1 {
		t.Fatalf("bad MEMBER_ID_REQUIRED response %+v", first)
	}
	m.id = first.MemberID
	ch := h.send(m.joinReq())
	h.clock.Advance(0)
	if r := m.joined(ch); r.MemberID != first.MemberID || r.LeaderID != first.MemberID {
		t.Fatalf("joined as %s (leader %s), want %s", r.MemberID, r.LeaderID, first.MemberID)
	}

	// v3 joins directly.
	old := h.member("g3")
	old.version = 3
	ch = h.send(old.joinReq())
	h.clock.Advance(0)
	if r := old.joined(ch); r.MemberID == "" {
		t.Fatal("v3 join got no member id")
	}

	// A pending member ID expires after the session timeout.
	p := h.member("gp")
	resp := h.do(p.joinReq()).(*kmsg.JoinGroupResponse)
	wantCode(t, "pending", resp.ErrorCode, kerr.MemberIDRequired)
	h.clock.Advance(10 * time.Second)
	p.id = resp.MemberID
	wantCode(t, "expired pending", h.do(p.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID)
}

func TestNewMemberTriggersRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	if a.gen != 1 {
		t.Fatalf("generation %d", a.gen)
	}

	c := h.member("g")
	cch := c.join()
	noResponse(t, cch)
	if got := h.state("g"); got != "PreparingRebalance" {
		t.Fatalf("state %s, want PreparingRebalance", got)
	}
	wantCode(t, "heartbeat a", a.heartbeat(), kerr.RebalanceInProgress)
	wantCode(t, "heartbeat b", b.heartbeat(), kerr.RebalanceInProgress)
	// Commits with the current (old) generation are still accepted.
	wantCode(t, "commit during rebalance", commitCode(t, h.do(a.commitReq(8, "t1", 0, 5))), nil)
	// SyncGroup during the join phase.
	wantCode(t, "sync", h.wait(a.sync(nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.RebalanceInProgress)

	ach := a.join()
	noResponse(t, ach)
	bch := b.join() // last one in: join phase completes at once
	ra, rb, rc := a.joined(ach), b.joined(bch), c.joined(cch)
	for _, r := range []*kmsg.JoinGroupResponse{ra, rb, rc} {
		if r.Generation != 2 {
			t.Fatalf("generation %d, want 2", r.Generation)
		}
	}
	if ra.LeaderID != a.id || len(ra.Members) != 3 {
		t.Fatalf("leader %s with %d members", ra.LeaderID, len(ra.Members))
	}
	// The old generation is now illegal.
	a.gen = 1
	wantCode(t, "old generation", a.heartbeat(), kerr.IllegalGeneration)
	a.gen = 2
	wantCode(t, "heartbeat while completing", a.heartbeat(), nil)
}

func TestLeaderRejoinInStableTriggersRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	// A follower rejoining with unchanged metadata gets the current generation.
	r := b.joined(b.join())
	if r.Generation != 1 || h.state("g") != "Stable" {
		t.Fatalf("follower rejoin: generation %d, state %s", r.Generation, h.state("g"))
	}
	// The leader rejoining forces a rebalance; b never rejoins and is dropped
	// after the rebalance timeout, even though it keeps heartbeating.
	ach := a.join()
	wantCode(t, "b heartbeat", b.heartbeat(), kerr.RebalanceInProgress)
	for i := 0; i < 2; i++ { // stay within b's 10s session
		h.clock.Advance(9 * time.Second)
		wantCode(t, "b heartbeat", b.heartbeat(), kerr.RebalanceInProgress)
	}
	h.clock.Advance(time.Second)
	noResponse(t, ach)
	h.clock.Advance(time.Second) // 20s rebalance timeout
	ra := a.joined(ach)
	if ra.Generation != 2 || len(ra.Members) != 1 {
		t.Fatalf("generation %d with %d members", ra.Generation, len(ra.Members))
	}
	wantCode(t, "dropped member", b.heartbeat(), kerr.UnknownMemberID)
}

func TestLeaveGroupTriggersRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)

	resp := a.leave() // the leader leaves
	wantCode(t, "leave", resp.ErrorCode, nil)
	if len(resp.Members) != 1 || resp.Members[0].ErrorCode != 0 || resp.Members[0].MemberID != a.id {
		t.Fatalf("leave members %+v", resp.Members)
	}
	wantCode(t, "left member heartbeat", a.heartbeat(), kerr.UnknownMemberID)
	wantCode(t, "b heartbeat", b.heartbeat(), kerr.RebalanceInProgress)
	r := b.joined(b.join()) // only member: completes at once
	if r.Generation != 2 || r.LeaderID != b.id || len(r.Members) != 1 {
		t.Fatalf("after leave: gen %d leader %s members %d", r.Generation, r.LeaderID, len(r.Members))
	}

	// v0 leave of an unknown member: top-level error.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 0
	lr.Group = "g"
	lr.MemberID = "nobody"
	wantCode(t, "v0 unknown leave", h.do(lr).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID)

	// Last member leaving (v1) empties the group.
	lr = kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 1
	lr.Group = "g"
	lr.MemberID = b.id
	wantCode(t, "v1 leave", h.do(lr).(*kmsg.LeaveGroupResponse).ErrorCode, nil)
	d := h.describe(5, "g").Groups[0]
	if d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after last leave: %s with %d members", d.State, len(d.Members))
	}
}

func TestLeaveWhileJoinParked(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	bch := b.join() // b is a follower with unchanged metadata: answered at once
	b.joined(bch)
	ach := a.join() // leader: parked
	noResponse(t, ach)
	resp := a.leave()
	wantCode(t, "leave", resp.Members[0].ErrorCode, nil)
	r := h.wait(ach).(*kmsg.JoinGroupResponse)
	wantCode(t, "parked join of leaving member", r.ErrorCode, kerr.UnknownMemberID)
}

func TestSessionTimeoutExpiresMember(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	h.clock.Advance(6 * time.Second)
	wantCode(t, "a heartbeat", a.heartbeat(), nil)
	h.clock.Advance(3 * time.Second)
	wantCode(t, "a heartbeat", a.heartbeat(), nil)
	if n := len(h.describe(5, "g").Groups[0].Members); n != 2 {
		t.Fatalf("%d members before b's session lapsed", n)
	}
	h.clock.Advance(1 * time.Second) // b silent for 10s
	d := h.describe(5, "g").Groups[0]
	if len(d.Members) != 1 || d.Members[0].MemberID != a.id || d.State != "PreparingRebalance" {
		t.Fatalf("after expiry: %s %+v", d.State, d.Members)
	}
	wantCode(t, "expired heartbeat", b.heartbeat(), kerr.UnknownMemberID)
	wantCode(t, "survivor heartbeat", a.heartbeat(), kerr.RebalanceInProgress)
	if r := a.joined(a.join()); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("gen %d members %d", r.Generation, len(r.Members))
	}
}

func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	a.session, b.session = 30000, 30000 // longer than the 20s rebalance timeout
	ca, cb := a.join(), b.join()
	h.clock.Advance(0)
	a.joined(ca)
	b.joined(cb)
	// b never syncs; the leader does.
	ra := h.wait(a.sync(map[string][]byte{a.id: []byte("x"), b.id: []byte("y")})).(*kmsg.SyncGroupResponse)
	wantCode(t, "leader sync", ra.ErrorCode, nil)
	wantCode(t, "b heartbeat", b.heartbeat(), nil) // heartbeats alone do not count
	h.clock.Advance(20 * time.Second)              // rebalance timeout
	if got := h.state("g"); got != "PreparingRebalance" {
		t.Fatalf("state %s after pending sync expiry", got)
	}
	wantCode(t, "b removed", b.heartbeat(), kerr.UnknownMemberID)
}

func TestSyncGroupErrors(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)

	r := a.syncReq(nil)
	r.Generation = 5
	wantCode(t, "wrong generation", h.do(r).(*kmsg.SyncGroupResponse).ErrorCode, kerr.IllegalGeneration)
	r = a.syncReq(nil)
	r.MemberID = "nobody"
	wantCode(t, "unknown member", h.do(r).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID)
	r = a.syncReq(nil)
	r.Protocol = kmsg.StringPtr("roundrobin")
	wantCode(t, "wrong protocol", h.do(r).(*kmsg.SyncGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	r = a.syncReq(nil)
	r.ProtocolType = kmsg.StringPtr("connect")
	wantCode(t, "wrong protocol type", h.do(r).(*kmsg.SyncGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	r = a.syncReq(nil)
	r.Group = "nope"
	wantCode(t, "unknown group", h.do(r).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID)

	// A parked follower sync is failed when a rebalance starts.
	c := h.member("g")
	cc := c.join() // triggers the rebalance
	ca, cb := a.join(), b.join()
	a.joined(ca)
	b.joined(cb)
	c.joined(cc)
	bs := b.sync(nil)
	noResponse(t, bs)
	d := h.member("g")
	dch := d.join()
	wantCode(t, "parked sync", h.wait(bs).(*kmsg.SyncGroupResponse).ErrorCode, kerr.RebalanceInProgress)
	noResponse(t, dch)
}

func TestStaticMemberReplacement(t *testing.T) {
	h := newHarness(t)
	a := h.member("g").static("inst-a")
	b := h.member("g")
	h.stableGroup(a, b)
	oldID := a.id

	// A new incarnation of inst-a (unknown member ID): no rebalance, same
	// generation, the old assignment is kept.
	a2 := h.member("g").static("inst-a")
	a2.version = 8
	r := a2.joined(a2.join())
	if r.MemberID == oldID || r.Generation != 1 {
		t.Fatalf("replacement got id %s gen %d", r.MemberID, r.Generation)
	}
	if r.LeaderID != oldID || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("v8 replaced leader must see the old leader id: leader %s members %d", r.LeaderID, len(r.Members))
	}
	if got := h.state("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
	s := h.wait(a2.sync(nil)).(*kmsg.SyncGroupResponse)
	wantCode(t, "replacement sync", s.ErrorCode, nil)
	if string(s.MemberAssignment) != "a-"+oldID {
		t.Fatalf("replacement assignment %q, want old %q", s.MemberAssignment, "a-"+oldID)
	}
	wantCode(t, "b unaffected", b.heartbeat(), nil)

	// The old incarnation is fenced.
	wantCode(t, "old heartbeat", a.heartbeat(), kerr.FencedInstanceID)
	wantCode(t, "old commit", commitCode(t, h.do(func() kmsg.Request {
		r := a.commitReq(8, "t1", 0, 1)
		r.InstanceID = a.instance
		return r
	}())), kerr.FencedInstanceID)
	wantCode(t, "old join", h.do(a.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.FencedInstanceID)
	wantCode(t, "old leave", a.leave().Members[0].ErrorCode, kerr.FencedInstanceID)

	// v9: a replaced leader is told to skip the assignment.
	a3 := h.member("g").static("inst-a")
	r = a3.joined(a3.join())
	if r.LeaderID != r.MemberID || !r.SkipAssignment || len(r.Members) != 2 {
		t.Fatalf("v9 replaced leader: leader %s self %s skip %v members %d", r.LeaderID, r.MemberID, r.SkipAssignment, len(r.Members))
	}
	a2.gen = 1
	wantCode(t, "a2 fenced", a2.heartbeat(), kerr.FencedInstanceID)

	// Administrative removal by instance ID (empty member ID).
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 4
	lr.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = kmsg.StringPtr("inst-a")
	lr.Members = append(lr.Members, lm)
	resp := h.do(lr).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave by instance", resp.Members[0].ErrorCode, nil)
	wantCode(t, "b after removal", b.heartbeat(), kerr.RebalanceInProgress)
}

func TestStaticMemberReplacedWhileParked(t *testing.T) {
	h := newHarness(t)
	a := h.member("g").static("i")
	b := h.member("g")
	h.stableGroup(a, b)
	ach := a.join() // leader rejoin: parked in PreparingRebalance
	noResponse(t, ach)
	a2 := h.member("g").static("i")
	a2ch := a2.join()
	wantCode(t, "fenced parked join", h.wait(ach).(*kmsg.JoinGroupResponse).ErrorCode, kerr.FencedInstanceID)
	b.joined(b.join())
	r := a2.joined(a2ch)
	if r.Generation != 2 || r.LeaderID != a2.id || len(r.Members) != 2 {
		t.Fatalf("gen %d leader %s (self %s) members %d", r.Generation, r.LeaderID, a2.id, len(r.Members))
	}
}

func TestStaticMemberKeptWhenNotRejoining(t *testing.T) {
	h := newHarness(t)
	a := h.member("g")
	s := h.member("g").static("s")
	h.stableGroup(a, s)
	ach := a.join()
	for i := 0; i < 2; i++ { // s stays alive but does not rejoin
		h.clock.Advance(9 * time.Second)
		wantCode(t, "s heartbeat", s.heartbeat(), kerr.RebalanceInProgress)
	}
	h.clock.Advance(2 * time.Second) // rebalance timeout: static s is not dropped
	r := a.joined(ach)
	if r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("gen %d members %d", r.Generation, len(r.Members))
	}
}

func TestCloseFailsParkedRequests(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = time.Second })
	m := h.member("g")
	ch := m.join()
	noResponse(t, ch)
	h.c.Close()
	wantCode(t, "parked join", h.wait(ch).(*kmsg.JoinGroupResponse).ErrorCode, kerr.CoordinatorNotAvailable)
	wantCode(t, "join after close", h.do(m.joinReq()).(*kmsg.JoinGroupResponse).ErrorCode, kerr.CoordinatorNotAvailable)
	if n := h.clock.pendingTimers(); n != 0 {
		t.Fatalf("%d timers still pending after Close", n)
	}
	h.c.Close() // idempotent
}

// TestRealClock runs in a synctest bubble: RealClock's timers are the time package's,
// which the bubble's fake clock drives, so the delay passes at once and exactly.
func TestRealClock(t *testing.T) {
	synctest.Test(t, testRealClock)
}

func testRealClock(t *testing.T) {
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 10 * time.Millisecond
	c := New(cfg, &memStore{}, nil)
	defer c.Close()
	h := &harness{t: t, c: c}
	m := h.member("g")
	start := time.Now()
	m.joined(m.join()) // completes on the timer's goroutine
	if d := time.Since(start); d != cfg.InitialRebalanceDelay {
		t.Fatalf("join completed after %v, want the initial rebalance delay %v", d, cfg.InitialRebalanceDelay)
	}
	if m.gen != 1 {
		t.Fatalf("generation %d", m.gen)
	}
}
