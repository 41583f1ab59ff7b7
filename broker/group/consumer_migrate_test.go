package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clm is a test classic member that behaves as a cooperative client: its JoinGroup
// carries what it owns, and after a SyncGroup that took partitions away it rejoins.
type clm struct {
	*tmember
	owned parts
}

func (h *harness) classicMember(group string) *clm {
	m := h.member(group, "cooperative-sticky")
	m.topics = []string{"t1", "t2"}
	return &clm{tmember: m, owned: parts{}}
}

func (m *clm) joinRequest() *kmsg.JoinGroupRequest {
	r := m.joinReq()
	md := kmsg.NewConsumerMemberMetadata()
	md.Version, md.Topics = 1, m.topics
	for _, t := range sortedKeys(m.owned) {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = t, m.owned[t]
		md.OwnedPartitions = append(md.OwnedPartitions, op)
	}
	r.Protocols[0].Metadata = md.AppendTo(nil)
	return r
}

// rejoin runs JoinGroup and SyncGroup (again while partitions were taken away) and
// returns the first error code.
func (m *clm) rejoin() int16 {
	m.h.t.Helper()
	for i := 0; i < 5; i++ {
		resp := m.h.do(m.joinRequest()).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			m.id = resp.MemberID
			resp = m.h.do(m.joinRequest()).(*kmsg.JoinGroupResponse)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		if resp.LeaderID == resp.MemberID {
			m.h.t.Fatalf("classic member %s of a consumer group made leader", m.id)
		}
		m.id, m.gen = resp.MemberID, resp.Generation
		sr := m.h.do(m.syncReq(nil)).(*kmsg.SyncGroupResponse)
		if sr.ErrorCode == kerr.RebalanceInProgress.Code {
			continue
		}
		if sr.ErrorCode != 0 {
			return sr.ErrorCode
		}
		got, err := decodeAssignment(sr.MemberAssignment)
		if err != nil {
			m.h.t.Fatalf("assignment of %s: %v", m.id, err)
		}
		lost := minus(m.owned, got)
		m.owned = got
		if len(lost) == 0 {
			return 0
		}
	}
	return 0
}

// step is one classic heartbeat, and a rejoin when the coordinator asks for one.
func (m *clm) step() int16 {
	m.h.t.Helper()
	switch code := m.heartbeat(); code {
	case kerr.RebalanceInProgress.Code:
		return m.rejoin()
	default:
		return code
	}
}

func (m *clm) count() int { return len(flatten(m.owned)) }

// convergeMixed runs every member until none changes, checking that no partition is
// ever owned by two members at once.
func convergeMixed(t *testing.T, cs []*cmember, ls []*clm) {
	t.Helper()
	for i := 0; i < 20; i++ {
		for _, c := range cs {
			if code := c.beat(); code != 0 {
				t.Fatalf("%s: heartbeat: %v", c.id, kerr.ErrorForCode(code))
			}
			mixedNoOverlap(t, cs, ls)
		}
		for _, l := range ls {
			if code := l.step(); code != 0 {
				t.Fatalf("classic %s: %v", l.id, kerr.ErrorForCode(code))
			}
			mixedNoOverlap(t, cs, ls)
		}
	}
}

func mixedNoOverlap(t *testing.T, cs []*cmember, ls []*clm) {
	t.Helper()
	seen := map[tpKey]string{}
	own := func(who string, ps parts) {
		for _, k := range flatten(ps) {
			if o, ok := seen[k]; ok {
				t.Fatalf("%s-%d owned by %s and %s at once", k.topic, k.part, o, who)
			}
			seen[k] = who
		}
	}
	for _, c := range cs {
		own(c.id, c.owned)
	}
	for _, l := range ls {
		own(l.id, l.owned)
	}
}

// classicPair forms a Stable classic group of two cooperative members: a owns t1, b t2,
// as their leader assigned; a commits an offset.
func classicPair(t *testing.T, h *harness, group string) (a, b *clm) {
	t.Helper()
	a, b = h.classicMember(group), h.classicMember(group)
	h.stableGroupWith(map[*tmember][]byte{
		a.tmember: encodeAssignment(parts{"t1": {0, 1, 2, 3}}, consumerMeta("t1")),
		b.tmember: encodeAssignment(parts{"t2": {0, 1, 2, 3}}, consumerMeta("t1")),
	})
	a.owned, b.owned = parts{"t1": {0, 1, 2, 3}}, parts{"t2": {0, 1, 2, 3}}
	if code := commitCode(t, h.do(a.commitReq(8, "t1", 2, 77))); code != 0 {
		t.Fatalf("classic commit: %v", kerr.ErrorForCode(code))
	}
	return a, b
}

// stableGroupWith is stableGroup with the leader's assignments given.
func (h *harness) stableGroupWith(assign map[*tmember][]byte) {
	h.t.Helper()
	var ms []*tmember
	for m := range assign {
		ms = append(ms, m)
	}
	chs := make([]<-chan kmsg.Response, len(ms))
	for i, m := range ms {
		chs[i] = m.join()
	}
	h.clock.Advance(2 * h.c.cfg.InitialRebalanceDelay)
	var leader *tmember
	for i, m := range ms {
		if resp := m.joined(chs[i]); resp.LeaderID == m.id {
			leader = m
		}
	}
	byID := map[string][]byte{}
	for m, a := range assign {
		byID[m.id] = a
	}
	syncs := make([]<-chan kmsg.Response, len(ms))
	for i, m := range ms {
		if m != leader {
			syncs[i] = m.sync(nil)
		}
	}
	for i, m := range ms {
		if m == leader {
			syncs[i] = m.sync(byID)
		}
	}
	for i := range ms {
		wantCode(h.t, "sync", h.wait(syncs[i]).(*kmsg.SyncGroupResponse).ErrorCode, nil)
	}
}

func (h *harness) describeConsumer(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{group}
	return h.do(r).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

// memberTypes is how many members of the described group are classic (type 0) and
// KIP-848 (type 1).
func memberTypes(g kmsg.ConsumerGroupDescribeResponseGroup) (classic, consumer int) {
	for _, m := range g.Members {
		if m.MemberType == 0 {
			classic++
		} else {
			consumer++
		}
	}
	return
}

// The online upgrade: a KIP-848 member joining a Stable classic group converts it; the
// classic members keep their assignments and the offsets, and hand partitions over
// through the classic protocol.
func TestConsumerOnlineUpgrade(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := classicPair(t, h, "g")
	gen := a.gen
	x := h.cmember("g", "x")
	if code := x.beat(); code != 0 {
		t.Fatalf("KIP-848 member joining the classic group: %v", kerr.ErrorForCode(code))
	}
	if x.count() != 0 {
		t.Fatalf("the new member took %v while the classic members hold everything", x.owned)
	}
	d := h.describeConsumer("g")
	if cl, co := memberTypes(d); d.ErrorCode != 0 || cl != 2 || co != 1 {
		t.Fatalf("after the upgrade: %v, %d classic and %d consumer members", kerr.ErrorForCode(d.ErrorCode), cl, co)
	}
	for _, m := range d.Members {
		if m.MemberID == a.id && (len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t1" ||
			len(m.Assignment.TopicPartitions[0].Partitions) != 4 || m.MemberEpoch != gen) {
			t.Fatalf("classic member a after the upgrade: epoch %d (generation was %d), assignment %+v", m.MemberEpoch, gen, m.Assignment)
		}
	}
	if dg := h.describe(5, "g").Groups[0]; dg.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of the consumer group: %v", kerr.ErrorForCode(dg.ErrorCode))
	}
	if o := h.fetch("g", "t1", 2); o.Offset != 77 {
		t.Fatalf("committed offset after the upgrade: %d, want 77", o.Offset)
	}
	// The classic members are told to rejoin; they give up partitions and x gets them.
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the epoch moved: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	convergeMixed(t, []*cmember{x}, []*clm{a, b})
	if n := a.count() + b.count() + x.count(); n != 8 || x.count() < 2 || a.count() < 2 || b.count() < 2 {
		t.Fatalf("after converging: a %d, b %d, x %d", a.count(), b.count(), x.count())
	}
	// A classic member commits with its member epoch as its generation.
	if code := commitCode(t, h.do(a.commitReq(8, "t1", a.owned["t1"][0], 5))); code != 0 {
		t.Fatalf("classic member's commit in the consumer group: %v", kerr.ErrorForCode(code))
	}
	if code := commitCode(t, h.do(commitReq(8, "g", a.gen+7, a.id, "t1", 0, 5))); code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic commit with a wrong generation: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(code))
	}
	// A classic member leaving by LeaveGroup: its partitions go to the others.
	if resp := b.leave(); resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 {
		t.Fatalf("classic leave: %+v", resp)
	}
	b.owned = parts{}
	convergeMixed(t, []*cmember{x}, []*clm{a})
	if a.count()+x.count() != 8 {
		t.Fatalf("after b left: a %d, x %d", a.count(), x.count())
	}
	// A new classic member joins the consumer group (JoinGroup to a mixed group).
	c := h.classicMember("g")
	if code := c.rejoin(); code != 0 {
		t.Fatalf("classic join to the consumer group: %v", kerr.ErrorForCode(code))
	}
	convergeMixed(t, []*cmember{x}, []*clm{a, c})
	if c.count() == 0 || a.count()+x.count()+c.count() != 8 {
		t.Fatalf("after c joined: a %d, x %d, c %d", a.count(), x.count(), c.count())
	}
}

// The online downgrade: the last KIP-848 member leaving makes the group classic again,
// the classic members' target assignments their assignments, and a rebalance starts.
func TestConsumerOnlineDowngrade(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := classicPair(t, h, "g")
	x := h.cmember("g", "x")
	x.beat()
	convergeMixed(t, []*cmember{x}, []*clm{a, b})
	r := x.req()
	r.MemberEpoch = -1
	if resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	d := h.describe(5, "g").Groups[0]
	if d.ErrorCode != 0 || d.State != "PreparingRebalance" || len(d.Members) != 2 {
		t.Fatalf("after the last KIP-848 member left: %v state %q, %d members", kerr.ErrorForCode(d.ErrorCode), d.State, len(d.Members))
	}
	if cd := h.describeConsumer("g"); cd.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of the classic group: %v", kerr.ErrorForCode(cd.ErrorCode))
	}
	// The Meta written holds each member's target assignment.
	calls := h.store.snapshot()
	last := calls[len(calls)-1].rec
	if last.Meta == nil || len(last.Meta.Members) != 2 {
		t.Fatalf("downgrade record: %+v", last)
	}
	for _, mm := range last.Meta.Members {
		want := a.owned
		if mm.ID == b.id {
			want = b.owned
		}
		if got, err := decodeAssignment(mm.Assignment); err != nil || !samePartitions(got, want) {
			t.Fatalf("member %s's assignment in the downgrade record: %v %v, want %v", mm.ID, got, err, want)
		}
	}
	// The classic members rejoin through the classic protocol.
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic heartbeat after the downgrade: %v", kerr.ErrorForCode(code))
	}
	h.stableGroupWith(map[*tmember][]byte{a.tmember: []byte("x"), b.tmember: []byte("y")})
	if st := h.state("g"); st != "Stable" {
		t.Fatalf("state after the classic rebalance: %s", st)
	}
	if o := h.fetch("g", "t1", 2); o.Offset != 77 {
		t.Fatalf("committed offset after the downgrade: %d, want 77", o.Offset)
	}
}

// The migration policy: disabled refuses both conversions, upgrade refuses the downgrade,
// downgrade the upgrade; a group of another protocol type is never upgraded.
func TestConsumerMigrationPolicy(t *testing.T) {
	for _, p := range []MigrationPolicy{MigrationDisabled, MigrationDowngrade, MigrationUpgrade} {
		h := newHarness(t, func(c *Config) { c.ConsumerProtocol, c.MigrationPolicy = true, p })
		classicPair(t, h, "g")
		x := h.cmember("g", "x")
		code := x.beat()
		if !p.upgrade() {
			if code != kerr.GroupIDNotFound.Code {
				t.Fatalf("policy %s: heartbeat to a classic group with members: %v, want GROUP_ID_NOT_FOUND", p, kerr.ErrorForCode(code))
			}
			if st := h.state("g"); st != "Stable" {
				t.Fatalf("policy %s: classic group %s after the refusal", p, st)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("policy %s: upgrade refused: %v", p, kerr.ErrorForCode(code))
		}
		r := x.req()
		r.MemberEpoch = -1
		h.do(r)
		if d := h.describeConsumer("g"); d.ErrorCode != 0 || len(d.Members) != 2 {
			t.Fatalf("policy %s: after the last KIP-848 member left: %v, %d members; want a consumer group of 2", p, kerr.ErrorForCode(d.ErrorCode), len(d.Members))
		}
	}
	h := newConsumerHarness(t)
	m := h.member("other")
	m.ptype = "connect"
	h.stableGroup(m)
	if code := h.cmember("other", "x").beat(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("upgrade of a %q group: %v, want GROUP_ID_NOT_FOUND", m.ptype, kerr.ErrorForCode(code))
	}
	if _, err := ParseMigrationPolicy("sideways"); !errors.Is(err, ErrMigrationPolicy) {
		t.Fatalf("bad policy: %v", err)
	}
	if p, err := ParseMigrationPolicy("BIDIRECTIONAL"); err != nil || p != MigrationBidirectional || DefaultConfig().MigrationPolicy != p {
		t.Fatalf("bidirectional: %v %v, default %v", p, err, DefaultConfig().MigrationPolicy)
	}
}

// A mixed group survives a coordinator failover: the new coordinator loads the classic
// members with their epochs, assignments and protocols, and serves their classic
// requests; after a downgrade it loads a classic group.
func TestConsumerMixedGroupSurvivesLoad(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := classicPair(t, h, "g")
	x := h.cmember("g", "x")
	x.beat()
	// a is told to give partitions up and is in the middle of it at the failover.
	a.heartbeat()
	before := h.describeConsumer("g")
	reloadConsumers(t, h)
	after := h.describeConsumer("g")
	if cl, co := memberTypes(after); after.ErrorCode != 0 || cl != 2 || co != 1 || after.Epoch != before.Epoch {
		t.Fatalf("after the load: %v, %d classic and %d consumer members, epoch %d (was %d)", kerr.ErrorForCode(after.ErrorCode), cl, co, after.Epoch, before.Epoch)
	}
	sameMembers := map[string]int32{}
	for _, m := range before.Members {
		sameMembers[m.MemberID] = m.MemberEpoch
	}
	for _, m := range after.Members {
		if e, ok := sameMembers[m.MemberID]; !ok || e != m.MemberEpoch {
			t.Fatalf("member %s: epoch %d after the load, %d (%v) before", m.MemberID, m.MemberEpoch, e, ok)
		}
	}
	if code := b.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the load: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	convergeMixed(t, []*cmember{x}, []*clm{a, b})
	if a.count()+b.count()+x.count() != 8 || x.count() == 0 {
		t.Fatalf("after the load and converging: a %d, b %d, x %d", a.count(), b.count(), x.count())
	}
	// Downgrade, then another failover: a classic group is loaded.
	r := x.req()
	r.MemberEpoch = -1
	h.do(r)
	reloadConsumers(t, h)
	if d := h.describe(5, "g").Groups[0]; d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 2 || d.ProtocolType != "consumer" {
		t.Fatalf("classic group after the downgrade and a load: %+v", d)
	}
	if o := h.fetch("g", "t1", 2); o.Offset != 77 {
		t.Fatalf("committed offset after the loads: %d", o.Offset)
	}
}

// An upgrade whose record cannot be written leaves the classic group as the log has it.
func TestConsumerUpgradeWriteFailureKeepsClassic(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := classicPair(t, h, "g")
	h.store.setErr(kerr.NotEnoughReplicas)
	if code := h.cmember("g", "x").beat(); code == 0 {
		t.Fatal("upgrade answered although its record was not written")
	}
	h.store.setErr(nil)
	if d := h.describe(5, "g").Groups[0]; d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("classic group after the failed upgrade: %+v", d)
	}
	if ca, cb := a.heartbeat(), b.heartbeat(); ca != 0 || cb != 0 {
		t.Fatalf("classic heartbeats after the failed upgrade: %v %v", kerr.ErrorForCode(ca), kerr.ErrorForCode(cb))
	}
	// A heartbeat refused after the conversion (its instance is a classic member's that
	// did not leave) upgrades nothing either.
	s := h.classicMember("s")
	s.static("inst")
	h.stableGroupWith(map[*tmember][]byte{s.tmember: encodeAssignment(parts{"t1": {0}}, consumerMeta("t1"))})
	x := h.cmember("s", "x")
	x.inst = kmsg.StringPtr("inst")
	if code := x.beat(); code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("KIP-848 member taking a classic static member's instance: %v, want UNRELEASED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	if d := h.describe(5, "s").Groups[0]; d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("classic group after the refused upgrade: %+v", d)
	}
	if code := s.heartbeat(); code != 0 {
		t.Fatalf("classic static member's heartbeat after the refused upgrade: %v", kerr.ErrorForCode(code))
	}
}

// A classic member told to rejoin that keeps heartbeating but never rejoins is fenced
// after its rebalance timeout, so its partitions can move.
func TestConsumerClassicMemberJoinTimeout(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := classicPair(t, h, "g")
	x := h.cmember("g", "x")
	x.beat()
	for _, m := range []*clm{a, b} {
		if code := m.heartbeat(); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic heartbeat after the upgrade: %v", kerr.ErrorForCode(code))
		}
	}
	if code := b.rejoin(); code != 0 {
		t.Fatalf("b's rejoin: %v", kerr.ErrorForCode(code))
	}
	// a heartbeats within its session (10 s) but does not rejoin within its rebalance
	// timeout (20 s).
	for i := 0; i < 3; i++ {
		h.clock.Advance(7 * time.Second)
		x.beat()
		b.step()
		if code := a.heartbeat(); i < 2 && code != kerr.RebalanceInProgress.Code {
			t.Fatalf("a's heartbeat %d s after it was told to rejoin: %v", 7*(i+1), kerr.ErrorForCode(code))
		} else if i == 2 && code != kerr.UnknownMemberID.Code {
			t.Fatalf("a's heartbeat past its rebalance timeout: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
		}
	}
	a.owned = parts{}
	convergeMixed(t, []*cmember{x}, []*clm{b})
	if x.count()+b.count() != 8 {
		t.Fatalf("after a was fenced: x %d, b %d", x.count(), b.count())
	}
}
