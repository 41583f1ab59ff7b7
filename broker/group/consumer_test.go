package group

import (
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicInfos makes fakeTopics a TopicCatalog; a topic's ID is its name's bytes.
func (f fakeTopics) TopicInfos() []TopicInfo {
	var out []TopicInfo
	for name, n := range f {
		out = append(out, TopicInfo{Name: name, ID: fakeID(name), Partitions: n})
	}
	return out
}

func fakeID(name string) (id [16]byte) {
	copy(id[:], name)
	return id
}

func newConsumerHarness(t *testing.T) *harness {
	return newHarness(t, func(c *Config) {
		c.ConsumerProtocol = true
		c.ConsumerSessionTimeout = 10 * time.Second
	})
}

// cmember is a test KIP-848 member: what it owns is what the last answer assigned.
type cmember struct {
	h     *harness
	group string
	id    string
	epoch int32
	owned map[string][]int32
	inst  *string
}

func (h *harness) cmember(group, id string) *cmember {
	return &cmember{h: h, group: group, id: id, owned: map[string][]int32{}}
}

func (m *cmember) req() *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = m.group, m.id, m.epoch, m.inst
	r.RebalanceTimeoutMillis = 5000
	r.SubscribedTopicNames = []string{"t1", "t2"}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if m.epoch == 0 {
		return r
	}
	for t, ps := range m.owned {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = fakeID(t), ps
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// beat sends a full heartbeat and applies its answer; it returns the error code.
func (m *cmember) beat() int16 {
	return m.send(m.req())
}

func (m *cmember) send(r *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	m.h.t.Helper()
	resp := m.h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = map[string][]int32{}
		for _, t := range resp.Assignment.Topics {
			name := string(t.TopicID[:2])
			m.owned[name] = append([]int32(nil), t.Partitions...)
		}
	}
	return 0
}

func (m *cmember) count() int {
	n := 0
	for _, ps := range m.owned {
		n += len(ps)
	}
	return n
}

// noOverlap fails if two members own one partition at once.
func noOverlap(t *testing.T, ms ...*cmember) {
	t.Helper()
	seen := map[tpKey]string{}
	for _, m := range ms {
		for topic, ps := range m.owned {
			for _, p := range ps {
				k := tpKey{topic, p}
				if o, ok := seen[k]; ok {
					t.Fatalf("%s-%d owned by %s and %s at once", topic, p, o, m.id)
				}
				seen[k] = m.id
			}
		}
	}
}

// converge heartbeats every member until none changes; it checks that no partition is
// ever owned twice.
func converge(t *testing.T, ms ...*cmember) {
	t.Helper()
	for i := 0; i < 20; i++ {
		for _, m := range ms {
			if code := m.beat(); code != 0 {
				t.Fatalf("%s: heartbeat error %v", m.id, kerr.ErrorForCode(code))
			}
			noOverlap(t, ms...)
		}
	}
}

func TestConsumerJoinAndConverge(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	if code := a.beat(); code != 0 || a.epoch != 1 || a.count() != 8 {
		t.Fatalf("first member: code %d epoch %d owns %d, want epoch 1 and all 8", code, a.epoch, a.count())
	}
	if code := b.beat(); code != 0 {
		t.Fatalf("second member: %v", kerr.ErrorForCode(code))
	}
	// b joined at group epoch 2 but a still owns everything: b waits for a's revocation.
	if b.count() != 0 {
		t.Fatalf("b was given %v before a revoked anything", b.owned)
	}
	converge(t, a, b)
	if a.count() != 4 || b.count() != 4 || a.epoch != 2 || b.epoch != 2 {
		t.Fatalf("after converging: a %d (epoch %d), b %d (epoch %d); want 4 and 4 at epoch 2", a.count(), a.epoch, b.count(), b.epoch)
	}
	d := h.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).(*kmsg.ConsumerGroupDescribeResponse)
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 2 || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
}

// A partition moves to its new owner only once its previous owner's heartbeat no longer
// lists it.
func TestConsumerRevocationBeforeReassignment(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	a.beat()
	b.beat()
	// a is told to revoke: its answer drops 4 partitions but it keeps its epoch.
	a.beat()
	if a.count() != 4 || a.epoch != 1 {
		t.Fatalf("a after the revocation request: owns %d at epoch %d, want 4 at epoch 1", a.count(), a.epoch)
	}
	// a keepalive heartbeat (no owned partitions) is no acknowledgement: b gets nothing.
	r := a.req()
	r.Topics = nil
	a.send(r)
	b.beat()
	if b.count() != 0 {
		t.Fatalf("b got %v before a acknowledged the revocation", b.owned)
	}
	// a acknowledges (its owned list no longer has them); b may now take them.
	a.beat()
	if a.epoch != 2 {
		t.Fatalf("a's epoch after acknowledging: %d, want 2", a.epoch)
	}
	b.beat()
	if b.count() != 4 || b.epoch != 2 {
		t.Fatalf("b after a's acknowledgement: owns %d at epoch %d", b.count(), b.epoch)
	}
	noOverlap(t, a, b)
}

func TestConsumerLeaveAndSessionExpiry(t *testing.T) {
	h := newConsumerHarness(t)
	a, b, c := h.cmember("g", "a"), h.cmember("g", "b"), h.cmember("g", "c")
	converge(t, a, b, c)
	r := c.req()
	r.MemberEpoch = -1
	if resp := h.do(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("leave: code %d epoch %d", resp.ErrorCode, resp.MemberEpoch)
	}
	converge(t, a, b)
	if a.count()+b.count() != 8 || a.count() != 4 {
		t.Fatalf("after c left: a %d, b %d", a.count(), b.count())
	}
	if code := c.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of the member that left: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	// b stops heartbeating; a keeps going: b expires and a gets everything.
	for i := 0; i < 3; i++ {
		h.clock.Advance(4 * time.Second)
		a.beat()
	}
	a.beat()
	if a.count() != 8 {
		t.Fatalf("after b's session expired a owns %d, want 8", a.count())
	}
	if code := b.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
}

func TestConsumerFencedEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	a := h.cmember("g", "a")
	a.beat()
	r := a.req()
	r.MemberEpoch = a.epoch + 1
	if code := a.send(r); code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v, want FENCED_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	b := h.cmember("g", "b")
	b.beat()
	converge(t, a, b) // a is at epoch 2 now, previous 1
	r = a.req()
	r.MemberEpoch = 1 // the previous epoch with a subset of its partitions: accepted
	if code := a.send(r); code != 0 {
		t.Fatalf("previous epoch with owned partitions its own: %v", kerr.ErrorForCode(code))
	}
	r = a.req()
	r.MemberEpoch = 1
	r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: fakeID("t1"), Partitions: b.owned["t1"]})
	if len(b.owned["t1"]) > 0 {
		if code := a.send(r); code != kerr.FencedMemberEpoch.Code {
			t.Fatalf("previous epoch owning another member's partitions: %v, want FENCED_MEMBER_EPOCH", kerr.ErrorForCode(code))
		}
	}
	// A fenced member rejoins with epoch 0 and the same ID and gets partitions again.
	a.epoch, a.owned = 0, map[string][]int32{}
	converge(t, a, b)
	if a.count() != 4 || b.count() != 4 {
		t.Fatalf("after the rejoin: a %d, b %d", a.count(), b.count())
	}
	if code := h.cmember("nosuch", "x").send(&kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: "nosuch", MemberID: "x", MemberEpoch: 3}); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group, epoch 3: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	if code := h.cmember("g", "x").send(&kmsg.ConsumerGroupHeartbeatRequest{Version: 1, Group: "g", MemberID: "x", MemberEpoch: 0, RebalanceTimeoutMillis: 1000, Topics: []kmsg.ConsumerGroupHeartbeatRequestTopic{{}}, SubscribedTopicNames: []string{"t1"}}); code != kerr.InvalidRequest.Code {
		t.Fatalf("join owning partitions: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
}

// A member that does not revoke within its rebalance timeout is removed.
func TestConsumerRebalanceTimeoutFences(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	a.beat()
	b.beat()
	a.beat() // told to revoke
	r := a.req()
	r.Topics = nil
	for i := 0; i < 3; i++ { // keepalives only: never acknowledges
		h.clock.Advance(2 * time.Second)
		a.send(r)
		b.beat()
	}
	if code := a.send(r); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member past its rebalance timeout: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	b.beat()
	if b.count() != 8 {
		t.Fatalf("b owns %d after a was fenced, want 8", b.count())
	}
}

func TestConsumerStaticMember(t *testing.T) {
	h := newConsumerHarness(t)
	inst := "i1"
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	a.inst = &inst
	converge(t, a, b)
	owned, epoch := a.owned, a.epoch
	a2 := h.cmember("g", "a2")
	a2.inst = &inst
	if code := a2.beat(); code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("instance still held: %v, want UNRELEASED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	r := a.req()
	r.MemberEpoch = -2
	if code := a.send(r); code != 0 || a.epoch != -2 {
		t.Fatalf("static leave: %v epoch %d", kerr.ErrorForCode(code), a.epoch)
	}
	if code := a2.beat(); code != 0 || a2.epoch != epoch || a2.count() != len(owned["t1"])+len(owned["t2"]) {
		t.Fatalf("replacement: code %d epoch %d (want %d) owns %v (want %v)", code, a2.epoch, epoch, a2.owned, owned)
	}
}

func TestConsumerRangeAndRegex(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	for _, m := range []*cmember{a, b} {
		r := m.req()
		r.SubscribedTopicNames = nil
		re := "t[12]"
		r.SubscribedTopicRegex = &re
		rng := "range"
		r.ServerAssignor = &rng
		m.send(r)
	}
	converge(t, a, b)
	got := func(m *cmember, topic string) []int32 {
		ps := m.owned[topic]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		return ps
	}
	if p := got(a, "t1"); len(p) != 2 || p[0] != 0 || p[1] != 1 {
		t.Fatalf("range: a owns t1 %v, want [0 1]", p)
	}
	if p := got(b, "t2"); len(p) != 2 || p[0] != 2 {
		t.Fatalf("range: b owns t2 %v, want [2 3]", p)
	}
	r := a.req()
	bad := "("
	r.SubscribedTopicRegex = &bad
	if code := a.send(r); code != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(code))
	}
}

// A coordinator that loads the group's records resumes every member with its epoch and
// assignment: nobody rejoins.
func TestConsumerGroupSurvivesLoad(t *testing.T) {
	h := newConsumerHarness(t)
	a, b := h.cmember("g", "a"), h.cmember("g", "b")
	converge(t, a, b)
	commit := commitReq(9, "g", a.epoch, "a", "t1", a.owned["t1"][0], 42)
	if code := commitCode(t, h.do(commit)); code != 0 {
		t.Fatalf("commit with the member epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commitCode(t, h.do(commitReq(9, "g", a.epoch+5, "a", "t1", 0, 1))); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with a wrong epoch: %v, want STALE_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	cfg := DefaultConfig()
	cfg.Clock, cfg.ConsumerProtocol = h.clock, true
	c2 := New(cfg, h.store, fakeTopics{"t1": 4, "t2": 4, "t3": 1})
	defer c2.Close()
	if _, err := c2.Load(func(string) bool { return true }, h.store.replay); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	h.c = c2
	ea, eb := a.epoch, b.epoch
	converge(t, a, b)
	if a.epoch != ea || b.epoch != eb || a.count() != 4 || b.count() != 4 {
		t.Fatalf("after the load: epochs %d %d (were %d %d), owned %d %d", a.epoch, b.epoch, ea, eb, a.count(), b.count())
	}
	if o := h.fetch("g", "t1", commit.Topics[0].Partitions[0].Partition); o.Offset != 42 {
		t.Fatalf("offset after the load: %d", o.Offset)
	}
	// Full records (compaction) keep the consumer state too.
	if _, err := c2.Compact(t.Context(), func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	calls := h.store.snapshot()
	last := calls[len(calls)-1].rec
	if !last.Full || last.Consumer == nil || len(last.Consumer.Members) != 2 {
		t.Fatalf("full record without the consumer state: %+v", last)
	}
	b2, err := DecodeRecord(mustEncode(t, last))
	if err != nil || b2.Consumer == nil || !consumerMetaEqual(b2.Consumer, last.Consumer) {
		t.Fatalf("consumer record does not round-trip: %v", err)
	}
}

func mustEncode(t *testing.T, rec Record) []byte {
	b, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Without the online migration (consumer_migrate_test.go) a classic group converts only
// while it is empty.
func TestConsumerClassicConversion(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ConsumerProtocol, c.MigrationPolicy = true, MigrationDisabled })
	m := h.member("cl")
	h.stableGroup(m)
	c := h.cmember("cl", "x")
	if code := c.beat(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat to a classic group with members: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	m.leave()
	if code := c.beat(); code != 0 || c.count() != 8 {
		t.Fatalf("consumer heartbeat to the emptied classic group: %v, owns %d", kerr.ErrorForCode(code), c.count())
	}
	off := newHarness(t, func(c *Config) { c.ConsumerProtocol = false })
	if resp := off.do(h.cmember("g", "a").req()).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("protocol off: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
