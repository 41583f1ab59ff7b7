package group

// JoinGroup (API key 11), versions 0-9.
//
// Behaviour (Kafka's classic protocol):
//   - INVALID_GROUP_ID for an empty group; INVALID_SESSION_TIMEOUT outside
//     [MinSessionTimeout, MaxSessionTimeout]. v0 has no rebalance timeout:
//     the session timeout is used.
//   - A join with an empty member ID creates the group if needed. A join with
//     a member ID for a group that does not exist gets UNKNOWN_MEMBER_ID.
//   - INCONSISTENT_GROUP_PROTOCOL if the protocol type is empty / differs
//     from the group's, the protocol list is empty, or no protocol is
//     supported by all other members.
//   - v4+: a dynamic member joining without a member ID gets
//     MEMBER_ID_REQUIRED with a generated ID ("<client.id>-<uuid>") and is
//     held as a pending member for one session timeout; the rebalance waits
//     for pending members.
//   - Static members (v5+ group.instance.id): joining without a member ID
//     while the instance ID is known replaces the old member (it keeps the
//     old assignment; requests parked by the old member ID, and any later
//     use of it, get FENCED_INSTANCE_ID). In Stable, when the group protocol
//     would not change, no rebalance happens: v9+ tells a replaced leader to
//     skip the assignment (SkipAssignment, KIP-814), older versions report
//     the old leader ID so the member does not act as leader. In
//     CompletingRebalance a rebalance is forced. A known member ID with a
//     mismatching instance ID gets FENCED_INSTANCE_ID.
//   - Existing members: in PreparingRebalance the join is parked; in
//     CompletingRebalance an unchanged member gets the current generation
//     back (the leader with the member list) and a changed one triggers a
//     rebalance; in Stable a follower with unchanged metadata gets the
//     current generation back while the leader or a changed member triggers
//     a rebalance.
//   - The first join of an Empty group waits InitialRebalanceDelay (extended
//     while members keep arriving, bounded by the rebalance timeout); other
//     rebalances complete as soon as every member has rejoined or after the
//     largest rebalance timeout, dropping dynamic members that did not rejoin.
//   - The response of a completed join carries the generation, protocol type
//     (v7+) and name, the leader, and for the leader only all members with
//     their metadata for the chosen protocol.
// Not implemented: group.max.size (GROUP_MAX_SIZE_REACHED), the Reason field
// (v8+) is ignored.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type joinRequest struct {
	version          int16
	memberID         string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []protocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
}

func (c *Coordinator) handleJoinGroup(ctx context.Context, r *kmsg.JoinGroupRequest, respond func(kmsg.Response)) {
	v := r.Version
	if r.Group == "" {
		respond(joinError(v, r.MemberID, kerr.InvalidGroupID.Code))
		return
	}
	session := ms(r.SessionTimeoutMillis)
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		respond(joinError(v, r.MemberID, kerr.InvalidSessionTimeout.Code))
		return
	}
	rebalance := ms(r.RebalanceTimeoutMillis)
	if v == 0 || r.RebalanceTimeoutMillis <= 0 {
		rebalance = session
	}
	j := &joinRequest{
		version:          v,
		memberID:         r.MemberID,
		protocolType:     r.ProtocolType,
		sessionTimeout:   session,
		rebalanceTimeout: rebalance,
	}
	if v >= 5 && r.InstanceID != nil {
		j.instanceID = strp(*r.InstanceID)
	}
	j.clientID, j.clientHost = clientFrom(ctx)
	for _, p := range r.Protocols {
		j.protocols = append(j.protocols, protocol{name: p.Name, metadata: p.Metadata})
	}
	w := &waiter{version: v, respond: respond}

	newMember := r.MemberID == ""
	g := c.lockedGroup(r.Group, newMember)
	if g == nil {
		respond(joinError(v, r.MemberID, kerr.UnknownMemberID.Code))
		return
	}
	defer g.unlock()
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			// A classic member of a consumer group (a mixed group, consumer_classic.go).
			g.classicJoinToConsumer(j, w)
			return
		}
		g.cg = nil // an empty consumer group becomes classic again, as in Kafka
	}
	if newMember {
		g.joinNewMember(j, w)
	} else {
		g.joinExistingMember(j, w)
	}
	if g.unused() && g.generation == 0 {
		// A failed first join must not leave an empty group behind.
		g.removeFromCoordinator()
	}
}

func (g *group) joinNewMember(j *joinRequest, w *waiter) {
	if g.state == stateDead {
		g.send(w.respond, joinError(j.version, "", kerr.CoordinatorNotAvailable.Code))
		return
	}
	if !g.supportsProtocols(j.protocolType, j.protocols, nil) {
		g.send(w.respond, joinError(j.version, "", kerr.InconsistentGroupProtocol.Code))
		return
	}
	prefix := j.clientID
	if j.instanceID != nil {
		prefix = *j.instanceID
	}
	id := newMemberID(prefix)
	switch {
	case j.instanceID != nil:
		if old, ok := g.static[*j.instanceID]; ok {
			g.replaceStaticMember(j, old, id, w)
		} else {
			g.addMemberAndRebalance(j, id, w)
		}
	case j.version >= 4:
		g.addPendingMember(id, j.sessionTimeout)
		g.send(w.respond, joinError(j.version, id, kerr.MemberIDRequired.Code))
	default:
		g.addMemberAndRebalance(j, id, w)
	}
}

func (g *group) joinExistingMember(j *joinRequest, w *waiter) {
	fail := func(code int16) { g.send(w.respond, joinError(j.version, j.memberID, code)) }
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if !g.supportsProtocols(j.protocolType, j.protocols, g.members[j.memberID]) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	if _, ok := g.pending[j.memberID]; ok {
		if j.instanceID != nil {
			// Pending members are always dynamic (Kafka treats this as an
			// illegal state); make the client start over.
			fail(kerr.UnknownMemberID.Code)
			return
		}
		g.removePending(j.memberID)
		g.addMemberAndRebalance(j, j.memberID, w)
		return
	}
	if code := g.validateMember(j.memberID, j.instanceID); code != 0 {
		fail(code)
		return
	}
	m := g.members[j.memberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, j, w)
		g.maybePrepareRebalanceOrCompleteJoin()
	case stateCompletingRebalance:
		if m.matches(j.protocols) {
			// Probably a retry of a join whose response was lost.
			isLeader := m.id == g.leader
			g.send(w.respond, g.joinResponse(j.version, m.id, isLeader, g.leader, false))
		} else {
			g.updateMember(m, j, w)
			g.maybePrepareRebalanceOrCompleteJoin()
		}
	case stateStable:
		if m.id == g.leader || !m.matches(j.protocols) {
			// The leader rejoining forces a rebalance, so that it can react
			// to changes not visible in member metadata (e.g. new partitions).
			g.updateMember(m, j, w)
			g.maybePrepareRebalanceOrCompleteJoin()
		} else {
			g.send(w.respond, g.joinResponse(j.version, m.id, false, g.leader, false))
		}
	default: // Empty cannot have members
		fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) addMemberAndRebalance(j *joinRequest, id string, w *waiter) {
	m := &member{
		id:               id,
		instanceID:       j.instanceID,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		protocolType:     j.protocolType,
		protocols:        j.protocols,
		sessionTimeout:   j.sessionTimeout,
		rebalanceTimeout: j.rebalanceTimeout,
		join:             w,
		isNew:            true,
	}
	if g.state == statePreparingRebalance && g.prevState == stateEmpty {
		g.newMemberAdded = true
	}
	g.addMember(m)
	// New members cannot heartbeat yet; bound their parked join instead.
	g.scheduleHeartbeat(m, g.c.cfg.NewMemberJoinTimeout)
	g.maybePrepareRebalanceOrCompleteJoin()
}

// updateMember records a rejoin of m and parks its JoinGroup.
func (g *group) updateMember(m *member, j *joinRequest, w *waiter) {
	m.protocols = j.protocols
	m.protocolType = j.protocolType
	if len(g.members) == 1 {
		g.protocolType = j.protocolType
	}
	m.sessionTimeout = j.sessionTimeout
	m.rebalanceTimeout = j.rebalanceTimeout
	if m.join != nil && m.join != w {
		// A duplicate join supersedes the parked one; the client retries.
		g.send(m.join.respond, joinError(m.join.version, m.id, kerr.RebalanceInProgress.Code))
	}
	m.join = w
}

// replaceStaticMember hands the identity of a static member to a new member ID.
func (g *group) replaceStaticMember(j *joinRequest, oldID, newID string, w *waiter) {
	currentLeader := g.leader
	old := g.members[oldID]
	if old.join != nil {
		g.send(old.join.respond, joinError(old.join.version, oldID, kerr.FencedInstanceID.Code))
		old.join = nil
	}
	if old.sync != nil {
		g.send(old.sync.respond, syncError(old.sync.version, kerr.FencedInstanceID.Code))
		old.sync = nil
	}
	g.stopHeartbeat(old)
	delete(g.members, oldID)

	m := &member{
		id:               newID,
		instanceID:       j.instanceID,
		clientID:         j.clientID,
		clientHost:       j.clientHost,
		protocolType:     old.protocolType,
		protocols:        old.protocols,
		sessionTimeout:   old.sessionTimeout,
		rebalanceTimeout: old.rebalanceTimeout,
		assignment:       old.assignment,
		seq:              old.seq,
	}
	g.members[newID] = m
	g.static[*j.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	g.updateMember(m, j, w)
	g.scheduleHeartbeat(m, m.sessionTimeout)

	switch g.state {
	case stateStable:
		if g.selectProtocol() != g.protocol {
			g.maybePrepareRebalanceOrCompleteJoin()
			return
		}
		m.join = nil
		var resp *kmsg.JoinGroupResponse
		if isLeader := g.leader == newID; j.version >= 9 {
			resp = g.joinResponse(j.version, newID, isLeader, g.leader, isLeader)
		} else {
			resp = g.joinResponse(j.version, newID, false, currentLeader, false)
		}
		// The new member ID must be durable before the member uses it: a coordinator
		// that took the group over with the old ID would fence the member
		// (FENCED_INSTANCE_ID, fatal in the Java client). As Kafka, answer only then.
		g.storeMeta(g.metaOf(nil, g.c.cfg.Clock.Now()), func(err error) {
			if err == nil {
				g.send(w.respond, resp)
				return
			}
			g.send(w.respond, joinError(j.version, newID, storeErrorCode(err, kerr.UnknownServerError.Code)))
			// The replacement is not durable: drop the new member, so the instance
			// joins again (a rebalance) rather than run on an ID the log does not have.
			if !g.unloaded && g.members[newID] == m {
				g.removeMemberAndUpdate(m)
			}
		})
	case stateCompletingRebalance:
		// The leader may already have computed an assignment naming the
		// old member ID: rebalance so the new ID gets one.
		g.prepareRebalance()
	case statePreparingRebalance:
		g.maybeCompleteJoinPhase()
	}
}
