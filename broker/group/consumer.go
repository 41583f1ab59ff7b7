package group

// consumer.go is the KIP-848 consumer group (Kafka's ConsumerGroup and the consumer
// half of GroupMetadataManager): ConsumerGroupHeartbeat (key 68). A group is classic or
// consumer: group.cg is set for a consumer group, whose members live there (the classic
// members map stays empty), while offsets, the write queue, loads and compaction are the
// group's as for a classic group. Members of a consumer group that use the classic
// protocol (cMember.classic) are served by consumer_classic.go; a group converts between
// the two with members in it by consumer_migrate.go.
//
// Epochs. The group epoch is bumped by every change of what the assignor sees (a member
// joins, leaves or expires, a subscription changes, a subscribed topic changes its
// partitions). When it passes the target assignment epoch the assignor (consumer_assign.go)
// computes the target assignment of every member at that epoch. Each member then
// reconciles towards its target one heartbeat at a time (reconcile):
//
//	stable      member epoch = assignment epoch, it owns its whole target;
//	unrevoked   it must first give up partitions no longer in its target: it keeps its
//	            epoch until a heartbeat's owned partitions no longer hold them (or its
//	            rebalance timeout fences it);
//	unreleased  it has its new epoch and the part of its target that no other member
//	            holds; the rest is given once the previous owner revoked it.
//
// A partition is thus never assigned to a new owner before its previous owner
// acknowledged the revocation, as in Kafka's CurrentAssignmentBuilder.
//
// Durability: after every heartbeat that changed the group, the whole consumer state
// (ConsumerMeta: epochs, members with their subscriptions, epochs, current, revoking and
// target partitions) is written as one record through the group's queue and the
// heartbeat is answered once it is durable; a failed write puts the last durable state
// back. A coordinator that loads the partition resumes every member with its epoch.

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicInfo is one topic as the consumer group assignors see it.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// TopicCatalog is what Topics may offer besides: every topic, for the server-side
// assignors of consumer groups (subscriptions by name and by regex, topic IDs).
type TopicCatalog interface {
	TopicInfos() []TopicInfo
}

type cState int8

const (
	cStable cState = iota
	cUnrevoked
	cUnreleased
)

// parts is a member's partitions by topic name, each list sorted.
type parts map[string][]int32

type cMember struct {
	id                   string
	instanceID, rack     *string
	clientID, clientHost string
	epoch, prevEpoch     int32
	state                cState
	rebalanceTimeout     time.Duration
	topics               []string
	regex                string
	assignor             string
	assigned, revoking   parts
	// classic is set for a member that uses the classic protocol (JoinGroup, SyncGroup,
	// Heartbeat) in this consumer group (consumer_classic.go), nil for a KIP-848 member.
	classic *classicInfo

	sessTimer, rebTimer, joinTimer Timer
	sessTok, rebTok, joinTok       uint64
}

// classicInfo is what a classic member of a consumer group keeps besides (Kafka's
// ClassicMemberMetadata): its session timeout and the protocols of its last JoinGroup.
type classicInfo struct {
	sessionTimeout time.Duration
	protocols      []protocol
}

// sessionTimeout is how long m may stay silent: a classic member's own, else the
// coordinator's.
func (m *cMember) sessionTimeout(def time.Duration) time.Duration {
	if m.classic != nil && m.classic.sessionTimeout > 0 {
		return m.classic.sessionTimeout
	}
	return def
}

type consumerGroup struct {
	epoch, assignEpoch int32
	members            map[string]*cMember
	static             map[string]string // instance id -> member id
	target             map[string]parts  // member id -> target assignment
	subMeta            string            // fingerprint of the subscribed topics at epoch
	durable            *ConsumerMeta     // what the log holds
	pending            int               // consumer writes queued or in flight
	// fromClassic is the classic membership the log held when this group was converted
	// from a classic group with members (consumer_migrate.go), until the first consumer
	// write is durable: a failed conversion write puts the classic group back.
	fromClassic *Meta
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cMember{}, static: map[string]string{}, target: map[string]parts{}}
}

// Assignors are the server-side assignors a ConsumerGroupHeartbeat may name; the first
// is the default (Kafka's group.consumer.assignors).
var Assignors = []string{"uniform", "range"}

func (c *Coordinator) handleConsumerHeartbeat(ctx context.Context, r *kmsg.ConsumerGroupHeartbeatRequest, respond func(kmsg.Response)) {
	fail := func(code int16, msg string) {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		respond(resp)
	}
	if code, msg := validateConsumerHeartbeat(r); code != 0 {
		fail(code, msg)
		return
	}
	g := c.lockedGroup(r.Group, r.MemberEpoch == 0)
	if g == nil {
		fail(kerr.GroupIDNotFound.Code, "group "+r.Group+" does not exist")
		return
	}
	defer g.unlock()
	if g.cg == nil {
		switch {
		case r.MemberEpoch != 0:
			g.send(respond, consumerError(r, kerr.GroupIDNotFound.Code, "group "+r.Group+" is not a consumer group"))
			return
		case g.state == stateEmpty && len(g.members) == 0:
			g.cg = newConsumerGroup() // an empty classic group becomes a consumer group
			g.protocolType = "consumer"
		default:
			// A classic group with members: upgraded online if the policy and the
			// group allow it (consumer_migrate.go), as Kafka's convertToConsumerGroup.
			if err := g.convertToConsumer(); err != nil {
				g.send(respond, consumerError(r, kerr.GroupIDNotFound.Code, err.Error()))
				return
			}
		}
	}
	code, msg, resp := g.consumerHeartbeat(r)
	if cg := g.cg; code != 0 && cg != nil && cg.fromClassic != nil && cg.durable == nil && cg.pending == 0 {
		// The heartbeat that upgraded the group failed: nothing of the upgrade is
		// written, so the group stays what the log says (Kafka appends nothing).
		g.revertToClassic(cg.fromClassic)
	}
	if m := g.consumerMember(r.MemberID); m != nil && code == 0 {
		m.clientID, m.clientHost = clientFrom(ctx)
	}
	if code != 0 {
		g.send(respond, consumerError(r, code, msg))
		return
	}
	g.persistGroup(func(err error) {
		if err != nil {
			g.send(respond, consumerError(r, storeErrorCode(err, kerr.UnknownServerError.Code), ""))
			return
		}
		g.send(respond, resp)
	})
}

// consumerMember is the consumer group's member id, nil if there is none (or the group
// is classic again after a downgrade).
func (g *group) consumerMember(id string) *cMember {
	if g.cg == nil {
		return nil
	}
	return g.cg.members[id]
}

func consumerError(r *kmsg.ConsumerGroupHeartbeatRequest, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// validateConsumerHeartbeat is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func validateConsumerHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	inv := kerr.InvalidRequest.Code
	switch {
	case r.Group == "":
		return inv, "GroupId can't be empty."
	case r.Version >= 1 && r.MemberID == "":
		return inv, "MemberId can't be empty."
	case r.MemberEpoch < -2:
		return inv, "MemberEpoch is invalid."
	case r.MemberEpoch == -2 && r.InstanceID == nil:
		return inv, "InstanceId can't be null when leaving as a static member."
	}
	if r.MemberEpoch == 0 {
		switch {
		case r.RebalanceTimeoutMillis == -1:
			return inv, "RebalanceTimeoutMs must be provided in first request."
		case len(r.Topics) > 0:
			return inv, "TopicPartitions must be empty when (re-)joining."
		case r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
			return inv, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	if r.SubscribedTopicRegex != nil {
		if _, err := regexp.Compile(*r.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, err.Error()
		}
	}
	if r.ServerAssignor != nil && !knownAssignor(*r.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *r.ServerAssignor + " is not supported."
	}
	return 0, ""
}

func knownAssignor(name string) bool {
	for _, a := range Assignors {
		if a == name {
			return true
		}
	}
	return false
}

// consumerHeartbeat runs one heartbeat with g locked: it returns an error code or the
// response (sent once the state it leads to is durable).
func (g *group) consumerHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) (int16, string, *kmsg.ConsumerGroupHeartbeatResponse) {
	cg := g.cg
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID = &r.MemberID
	resp.HeartbeatIntervalMillis = int32(g.c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	m := cg.members[r.MemberID]
	if m != nil && m.classic != nil {
		return kerr.UnknownMemberID.Code, "member " + m.id + " uses the classic protocol", nil
	}
	bump := false // the group epoch moves at most once per heartbeat
	switch r.MemberEpoch {
	case -1, -2:
		if m == nil || (r.InstanceID != nil && cg.static[*r.InstanceID] != r.MemberID) {
			if r.InstanceID != nil && cg.static[*r.InstanceID] != "" && cg.static[*r.InstanceID] != r.MemberID {
				return kerr.FencedInstanceID.Code, "", nil
			}
			return kerr.UnknownMemberID.Code, "", nil
		}
		resp.MemberEpoch = r.MemberEpoch
		if r.MemberEpoch == -2 {
			// A static member leaving for a while keeps its assignment until its
			// session expires or its instance rejoins (Kafka's LEAVE_GROUP_STATIC).
			m.epoch = -2
			g.scheduleConsumerSession(m)
			return 0, "", resp
		}
		g.fenceConsumerMember(m)
		return 0, "", resp
	case 0:
		isNew := m == nil
		m = g.joinConsumer(r, m)
		bump = isNew && m != nil && m.id == r.MemberID && m.epoch == 0
		if m == nil {
			return kerr.UnreleasedInstanceID.Code, "instance " + *r.InstanceID + " is still in use", nil
		}
	default:
		if m == nil {
			return kerr.UnknownMemberID.Code, "", nil
		}
		if code := m.checkEpoch(r.MemberEpoch, g.ownedOf(r.Topics, r.Topics != nil)); code != 0 {
			return code, "", nil
		}
	}
	if g.updateSubscription(m, r) {
		bump = true
	}
	g.refreshTarget(bump)
	owned := g.ownedOf(r.Topics, r.Topics != nil)
	changed := g.reconcile(m, owned)
	g.scheduleConsumerSession(m)
	g.scheduleConsumerRebalance(m)
	resp.MemberEpoch = m.epoch
	if changed || r.MemberEpoch == 0 || (owned != nil && !samePartitions(owned, m.assigned)) {
		resp.Assignment = g.assignmentOf(m.assigned)
	}
	g.consumerStateChanged()
	return 0, "", resp
}

// joinConsumer is a member's heartbeat with epoch 0: a new member, a member rejoining
// (after a fence: it owns nothing now) or a static member taking its instance back. It
// returns nil when the instance is held by a member that did not leave
// (UNRELEASED_INSTANCE_ID).
func (g *group) joinConsumer(r *kmsg.ConsumerGroupHeartbeatRequest, m *cMember) *cMember {
	cg := g.cg
	if r.InstanceID != nil {
		if prevID, ok := cg.static[*r.InstanceID]; ok && prevID != r.MemberID {
			prev := cg.members[prevID]
			if prev != nil && prev.epoch != -2 {
				return nil
			}
			if prev != nil {
				// The new incarnation takes the old one's place: its epoch and
				// assignment, so nothing moves (Kafka's static member replacement).
				g.stopConsumerTimers(prev)
				delete(cg.members, prevID)
				nm := *prev
				nm.id = r.MemberID
				nm.sessTimer, nm.rebTimer = nil, nil
				if nm.epoch == -2 {
					nm.epoch = prev.prevEpoch
				}
				cg.members[nm.id] = &nm
				cg.target[nm.id] = cg.target[prevID]
				delete(cg.target, prevID)
				cg.static[*r.InstanceID] = nm.id
				return &nm
			}
		}
	}
	if m != nil {
		// Rejoin: the member lost its partitions (a fence, a restart with the same
		// id); it reconciles from nothing towards its target.
		m.assigned, m.revoking = parts{}, parts{}
		m.prevEpoch, m.epoch, m.state = m.epoch, 0, cStable
		return m
	}
	m = &cMember{id: r.MemberID, instanceID: r.InstanceID, assigned: parts{}, revoking: parts{}, assignor: Assignors[0]}
	cg.members[m.id] = m
	if r.InstanceID != nil {
		cg.static[*r.InstanceID] = m.id
	}
	return m
}

// checkEpoch is Kafka's throwIfMemberEpochIsInvalid: a member may be one epoch behind
// (the answer that bumped it was lost) if it owns no partition it was not given.
func (m *cMember) checkEpoch(epoch int32, owned parts) int16 {
	if epoch > m.epoch {
		return kerr.FencedMemberEpoch.Code
	}
	if epoch < m.epoch && (epoch != m.prevEpoch || owned == nil || len(flatten(minus(owned, m.assigned))) > 0) {
		return kerr.FencedMemberEpoch.Code
	}
	return 0
}

// updateSubscription applies the request's non-null fields; it reports whether what the
// assignor sees changed.
func (g *group) updateSubscription(m *cMember, r *kmsg.ConsumerGroupHeartbeatRequest) bool {
	changed := false
	if r.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.RackID != nil && (m.rack == nil || *m.rack != *r.RackID) {
		m.rack, changed = r.RackID, true
	}
	if r.SubscribedTopicNames != nil {
		ts := append([]string(nil), r.SubscribedTopicNames...)
		sort.Strings(ts)
		if !slices.Equal(ts, m.topics) {
			m.topics, changed = ts, true
		}
		if r.SubscribedTopicRegex == nil && m.regex != "" && r.MemberEpoch == 0 {
			m.regex, changed = "", true
		}
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != m.regex {
		m.regex, changed = *r.SubscribedTopicRegex, true
		if r.SubscribedTopicNames == nil {
			m.topics = nil
		}
	}
	if r.ServerAssignor != nil && *r.ServerAssignor != m.assignor {
		m.assignor, changed = *r.ServerAssignor, true
	}
	return changed
}

// topicInfos is the catalog of topics (nil without one).
func (c *Coordinator) topicInfos() []TopicInfo {
	if tc, ok := c.topics.(TopicCatalog); ok {
		return tc.TopicInfos()
	}
	return nil
}

// subscribed is the set of topics (with their partition counts) some member subscribes
// to, by name or regex, among those that exist.
func (g *group) subscribed(infos []TopicInfo) map[string]TopicInfo {
	out := map[string]TopicInfo{}
	byName := map[string]TopicInfo{}
	for _, ti := range infos {
		byName[ti.Name] = ti
	}
	for _, m := range g.cg.members {
		for _, t := range m.topics {
			if ti, ok := byName[t]; ok {
				out[t] = ti
			}
		}
		if m.regex != "" {
			re, err := regexp.Compile("^(?:" + m.regex + ")$")
			if err != nil {
				continue
			}
			for _, ti := range infos {
				if re.MatchString(ti.Name) {
					out[ti.Name] = ti
				}
			}
		}
	}
	return out
}

// memberTopics is the topics m subscribes to among those subscribed.
func (m *cMember) memberTopics(sub map[string]TopicInfo) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range m.topics {
		if _, ok := sub[t]; ok && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if m.regex != "" {
		if re, err := regexp.Compile("^(?:" + m.regex + ")$"); err == nil {
			for t := range sub {
				if !seen[t] && re.MatchString(t) {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// refreshTarget bumps the group epoch when the subscribed topics changed (created,
// deleted, more partitions) and computes the target assignment when the group epoch
// passed the assignment epoch. bump: this heartbeat changed what the assignor sees.
func (g *group) refreshTarget(bump bool) {
	cg := g.cg
	sub := g.subscribed(g.c.topicInfos())
	fp := fingerprint(sub)
	if fp != cg.subMeta {
		cg.subMeta = fp
		bump = true
	}
	if bump {
		cg.epoch++
	}
	if cg.epoch <= cg.assignEpoch {
		return
	}
	assignor := Assignors[0]
	ids := make([]string, 0, len(cg.members))
	for id, m := range cg.members {
		ids = append(ids, id)
		if m.assignor != "" {
			assignor = m.assignor // Kafka: the most used; members of one client agree
		}
	}
	sort.Strings(ids)
	subs := make([]assignMember, 0, len(ids))
	for _, id := range ids {
		m := cg.members[id]
		subs = append(subs, assignMember{id: id, topics: m.memberTopics(sub), prev: cg.target[id]})
	}
	cg.target = assign(assignor, subs, sub)
	cg.assignEpoch = cg.epoch
}

func fingerprint(sub map[string]TopicInfo) string {
	names := make([]string, 0, len(sub))
	for n := range sub {
		names = append(names, n)
	}
	sort.Strings(names)
	var w binWriter
	for _, n := range names {
		w.str(n)
		id := sub[n].ID
		w.b = append(w.b, id[:]...)
		w.varint(int64(sub[n].Partitions))
	}
	return string(w.b)
}

// ownedOf translates a heartbeat's owned partitions (by topic ID) to names; nil when the
// request did not carry them. IDs of unknown topics are left out.
func (g *group) ownedOf(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, given bool) parts {
	if !given {
		return nil
	}
	names := map[[16]byte]string{}
	for _, ti := range g.c.topicInfos() {
		names[ti.ID] = ti.Name
	}
	out := parts{}
	for _, t := range ts {
		if n, ok := names[t.TopicID]; ok {
			ps := append([]int32(nil), t.Partitions...)
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			out[n] = append(out[n], ps...)
		}
	}
	return out
}

// heldByOthers is every partition a member other than self has assigned or is revoking.
func (g *group) heldByOthers(self *cMember) map[tpKey]bool {
	held := map[tpKey]bool{}
	for _, m := range g.cg.members {
		if m == self {
			continue
		}
		for t, ps := range m.assigned {
			for _, p := range ps {
				held[tpKey{t, p}] = true
			}
		}
		for t, ps := range m.revoking {
			for _, p := range ps {
				held[tpKey{t, p}] = true
			}
		}
	}
	return held
}

type tpKey struct {
	topic string
	part  int32
}

// reconcile moves m one step towards its target (Kafka's CurrentAssignmentBuilder),
// given the partitions its heartbeat says it owns (nil: not said). It reports whether
// m's epoch or assignment changed.
func (g *group) reconcile(m *cMember, owned parts) bool {
	cg := g.cg
	target := cg.target[m.id]
	if m.epoch == -2 {
		return false
	}
	before := m.epoch
	beforeAssigned := len(flatten(m.assigned))
	switch m.state {
	case cUnrevoked:
		if owned == nil || intersects(owned, m.revoking) {
			return false // still owns what it must give up
		}
		m.revoking = parts{}
	case cStable:
		if m.epoch == cg.assignEpoch {
			return false
		}
	}
	keep := intersect(m.assigned, target)
	revoke := minus(m.assigned, target)
	// A member that says it no longer owns what it must give up (a classic member's
	// JoinGroup after an eager revocation) skips the revocation, as Kafka's
	// CurrentAssignmentBuilder.
	if len(revoke) > 0 && (owned == nil || intersects(owned, revoke)) {
		m.assigned, m.revoking, m.state = keep, revoke, cUnrevoked
		return true
	}
	held := g.heldByOthers(m)
	next := parts{}
	complete := true
	for t, ps := range target {
		for _, p := range ps {
			if held[tpKey{t, p}] {
				complete = false
				continue
			}
			next[t] = append(next[t], p)
		}
	}
	for t := range next {
		sort.Slice(next[t], func(i, j int) bool { return next[t][i] < next[t][j] })
	}
	m.assigned = next
	if m.epoch != cg.assignEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignEpoch
	}
	if complete {
		m.state = cStable
	} else {
		m.state = cUnreleased
	}
	return m.epoch != before || len(flatten(m.assigned)) != beforeAssigned || !samePartitions(next, keep)
}

// removeConsumerMember drops m (leave, expiry, fence): its partitions are free at once
// and the group epoch moves so the rest are reassigned.
func (g *group) removeConsumerMember(m *cMember) {
	cg := g.cg
	g.stopConsumerTimers(m)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	cg.epoch++
	if len(cg.members) == 0 {
		g.state = stateEmpty
		g.emptySince = g.c.cfg.Clock.Now()
		g.refreshTarget(false)
	}
}

func (g *group) stopConsumerTimers(m *cMember) {
	if m.sessTimer != nil {
		m.sessTimer.Stop()
		m.sessTimer = nil
	}
	if m.rebTimer != nil {
		m.rebTimer.Stop()
		m.rebTimer = nil
	}
	g.stopJoinTimer(m)
	m.sessTok++
	m.rebTok++
}

// fenceConsumerMember removes m (a leave, an expiry, a fence) or, when the members left
// all use the classic protocol, converts the group back to a classic one without it
// (consumer_migrate.go; Kafka's consumerGroupFenceMember).
func (g *group) fenceConsumerMember(m *cMember) {
	if g.canDowngradeWithout(m) {
		g.convertToClassic(m)
		return
	}
	g.removeConsumerMember(m)
}

// persistGroup makes the group's membership durable: the consumer state, or the classic
// Meta when a downgrade just made the group classic again.
func (g *group) persistGroup(done func(err error)) {
	if g.cg != nil {
		g.consumerStateChanged()
		g.persistConsumer(done)
		return
	}
	g.storeMeta(g.metaOf(nil, g.c.cfg.Clock.Now()), done)
}

// scheduleConsumerSession (re)starts m's session timer: a member silent for the session
// timeout is removed (a static member that left with -2 too).
func (g *group) scheduleConsumerSession(m *cMember) {
	if m.sessTimer != nil {
		m.sessTimer.Stop()
	}
	m.sessTok++
	tok := m.sessTok
	cg := g.cg
	m.sessTimer = g.after(m.sessionTimeout(g.c.cfg.ConsumerSessionTimeout), func() {
		if g.cg != cg || cg.members[m.id] != m || m.sessTok != tok {
			return
		}
		g.fenceConsumerMember(m)
		g.persistGroup(nil)
	})
}

// scheduleConsumerRebalance starts m's rebalance timer when it has partitions to revoke
// and stops it otherwise: a member that does not revoke within its rebalance timeout is
// fenced (removed), so its partitions can move.
func (g *group) scheduleConsumerRebalance(m *cMember) {
	if m.state != cUnrevoked {
		if m.rebTimer != nil {
			m.rebTimer.Stop()
			m.rebTimer = nil
			m.rebTok++
		}
		return
	}
	if m.rebTimer != nil {
		return // running since the revocation started
	}
	m.rebTok++
	tok := m.rebTok
	cg := g.cg
	d := m.rebalanceTimeout
	if d <= 0 {
		d = g.c.cfg.ConsumerSessionTimeout
	}
	m.rebTimer = g.after(d, func() {
		if g.cg != cg || cg.members[m.id] != m || m.rebTok != tok || m.state != cUnrevoked {
			return
		}
		g.fenceConsumerMember(m)
		g.persistGroup(nil)
	})
}

// consumerStateChanged keeps the group's classic state in step: Stable while it has
// members, Empty otherwise (DeleteGroups, expiry and commits look at it).
func (g *group) consumerStateChanged() {
	if len(g.cg.members) > 0 {
		g.state = stateStable
		g.generation = g.cg.epoch
	} else {
		g.state = stateEmpty
	}
}

// persistConsumer writes the consumer state if it differs from what was last queued;
// done (if not nil) runs with the outcome. On failure the last durable state is put back
// unless a later write is queued (it carries the whole state again).
func (g *group) persistConsumer(done func(err error)) {
	cg := g.cg
	meta := g.consumerMeta()
	if cg.durable != nil && consumerMetaEqual(meta, cg.durable) && cg.pending == 0 {
		if done != nil {
			done(nil)
		}
		return
	}
	cg.pending++
	g.enqueueWrite(&write{ctx: g.c.baseCtx, consumer: meta, apply: func(err error) {
		cg.pending--
		switch {
		case err == nil:
			cg.durable, cg.fromClassic = meta, nil
		case cg.pending == 0 && g.cg == cg && !g.removed && cg.durable == nil && cg.fromClassic != nil:
			g.revertToClassic(cg.fromClassic) // the upgrade never became durable
		case cg.pending == 0 && g.cg == cg && !g.removed:
			g.restoreConsumer(cg.durable)
		}
		if done != nil {
			done(err)
		}
	}})
}

// assignmentOf is ps as a heartbeat's assignment (by topic ID).
func (g *group) assignmentOf(ps parts) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	ids := map[string][16]byte{}
	for _, ti := range g.c.topicInfos() {
		ids[ti.Name] = ti.ID
	}
	a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	names := make([]string, 0, len(ps))
	for t := range ps {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		id, ok := ids[t]
		if !ok || len(ps[t]) == 0 {
			continue
		}
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = id, append([]int32(nil), ps[t]...)
		a.Topics = append(a.Topics, at)
	}
	return a
}

// ---- partition set helpers ----------------------------------------------------

func flatten(ps parts) []tpKey {
	var out []tpKey
	for t, l := range ps {
		for _, p := range l {
			out = append(out, tpKey{t, p})
		}
	}
	return out
}

func setOf(ps parts) map[tpKey]bool {
	s := map[tpKey]bool{}
	for _, k := range flatten(ps) {
		s[k] = true
	}
	return s
}

func intersect(a, b parts) parts { return filter(a, b, true) }

func minus(a, b parts) parts { return filter(a, b, false) }

// filter is the partitions of a that are (in) or are not (!in) in b.
func filter(a, b parts, in bool) parts {
	sb := setOf(b)
	out := parts{}
	for t, l := range a {
		for _, p := range l {
			if sb[tpKey{t, p}] == in {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

func intersects(a, b parts) bool { return len(intersect(a, b)) > 0 }

func samePartitions(a, b parts) bool {
	sa, sb := setOf(a), setOf(b)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}
