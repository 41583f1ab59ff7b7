package group

// consumer_classic.go serves the classic group APIs to the classic members of a consumer
// group (a mixed group, Kafka 4's classicGroup*ToConsumerGroup): members that came with
// an upgraded classic group (consumer_migrate.go) or joined it with JoinGroup. They take
// part in the consumer group's epochs and assignment like KIP-848 members, but learn of
// them through the classic protocol:
//
//	JoinGroup  updates the member (subscription and owned partitions from its
//	           ConsumerProtocol metadata, session and rebalance timeouts, protocols),
//	           bumps the group epoch when it is new or its subscription changed, and
//	           reconciles it one step; answered once that is durable, with the member
//	           epoch as the generation, the member's first protocol, and no leader (the
//	           coordinator assigns).
//	SyncGroup  answers the member's assigned partitions (its current assignment: those
//	           it must revoke are already left out) in the ConsumerProtocol assignment
//	           format of its subscription's version; REBALANCE_IN_PROGRESS when the group
//	           epoch moved past the member's and it is not revoking.
//	Heartbeat  restarts its session; REBALANCE_IN_PROGRESS when it must rejoin: the group
//	           epoch moved past its epoch, it has partitions to revoke, or partitions it
//	           waited for are free now. A member told to rejoin that does not within its
//	           rebalance timeout is fenced.
//	LeaveGroup removes it (the group epoch moves).
//
// The generation a classic member sends is its member epoch: ILLEGAL_GENERATION
// otherwise (Heartbeat, SyncGroup, OffsetCommit, OffsetFetch). A revocation completes
// when its next JoinGroup's owned partitions no longer hold the revoked ones (a
// cooperative client revokes and rejoins at once; an eager one rejoins owning nothing).

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// supportsClassicJoin is Kafka's ConsumerGroup.supportsClassicProtocols: protocol type
// consumer, and a protocol every classic member supports.
func (g *group) supportsClassicJoin(protocolType string, protos []protocol, self *cMember) bool {
	if protocolType != "consumer" || len(protos) == 0 {
		return false
	}
	for _, p := range protos {
		all := true
		for _, m := range g.cg.members {
			if m.classic != nil && m != self && !(&member{protocols: m.classic.protocols}).supports(p.name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// classicJoinToConsumer is a JoinGroup to a consumer group with members (Kafka's
// classicGroupJoinToConsumerGroup). Called with g locked.
func (g *group) classicJoinToConsumer(j *joinRequest, w *waiter) {
	cg := g.cg
	fail := func(id string, code int16) { g.send(w.respond, joinError(j.version, id, code)) }
	var sub kmsg.ConsumerMemberMetadata
	if len(j.protocols) == 0 || sub.ReadFrom(j.protocols[0].metadata) != nil {
		fail(j.memberID, kerr.InconsistentGroupProtocol.Code)
		return
	}
	var m *cMember
	if j.instanceID != nil {
		m = cg.members[cg.static[*j.instanceID]]
	} else {
		m = cg.members[j.memberID]
	}
	if !g.supportsClassicJoin(j.protocolType, j.protocols, m) {
		fail(j.memberID, kerr.InconsistentGroupProtocol.Code)
		return
	}
	id := j.memberID
	switch {
	case j.instanceID == nil && id == "" && j.version >= 4:
		// As a classic group: the member rejoins with the ID it is given.
		fail(newMemberID(j.clientID), kerr.MemberIDRequired.Code)
		return
	case j.instanceID != nil && m != nil && id != "" && id != m.id:
		fail(id, kerr.FencedInstanceID.Code)
		return
	case j.instanceID != nil && id == "" && m != nil:
		// A static member restarted: the new ID takes the instance's place, epoch
		// and assignment (no rebalance), as joinConsumer does for KIP-848 members.
		id = newMemberID(*j.instanceID)
		g.stopConsumerTimers(m)
		delete(cg.members, m.id)
		cg.target[id] = cg.target[m.id]
		delete(cg.target, m.id)
		nm := *m
		nm.id, nm.sessTimer, nm.rebTimer, nm.joinTimer = id, nil, nil, nil
		if nm.epoch == -2 {
			nm.epoch = m.prevEpoch
		}
		m = &nm
		cg.members[id] = m
		cg.static[*j.instanceID] = id
	case j.instanceID != nil && m == nil && id != "":
		fail(id, kerr.UnknownMemberID.Code)
		return
	case m != nil && m.classic == nil:
		fail(id, kerr.UnknownMemberID.Code) // a KIP-848 member's ID
		return
	case id == "":
		prefix := j.clientID
		if j.instanceID != nil {
			prefix = *j.instanceID
		}
		id = newMemberID(prefix)
	}
	bump := false
	if m == nil {
		m = &cMember{id: id, instanceID: j.instanceID, assigned: parts{}, revoking: parts{}}
		cg.members[id] = m
		if j.instanceID != nil {
			cg.static[*j.instanceID] = id
		}
		bump = true
	}
	m.classic = &classicInfo{sessionTimeout: j.sessionTimeout, protocols: j.protocols}
	m.clientID, m.clientHost, m.rebalanceTimeout = j.clientID, j.clientHost, j.rebalanceTimeout
	topics := append([]string(nil), sub.Topics...)
	sort.Strings(topics)
	if !slices.Equal(topics, m.topics) || m.regex != "" {
		m.topics, m.regex, bump = topics, "", true
	}
	if sub.Rack != nil && (m.rack == nil || *m.rack != *sub.Rack) {
		m.rack, bump = sub.Rack, true
	}
	g.refreshTarget(bump)
	owned := parts{}
	for _, op := range sub.OwnedPartitions {
		ps := append([]int32(nil), op.Partitions...)
		sort.Slice(ps, func(i, k int) bool { return ps[i] < ps[k] })
		owned[op.Topic] = append(owned[op.Topic], ps...)
	}
	g.reconcile(m, owned)
	g.stopJoinTimer(m)
	g.scheduleConsumerSession(m)
	g.scheduleConsumerRebalance(m)
	resp := joinError(j.version, m.id, 0)
	resp.Generation = m.epoch
	resp.ProtocolType = strp("consumer")
	resp.Protocol = strp(j.protocols[0].name)
	g.persistGroup(func(err error) {
		if err != nil {
			fail(m.id, storeErrorCode(err, kerr.UnknownServerError.Code))
			return
		}
		g.send(w.respond, resp)
	})
}

// classicMember is the classic member of the consumer group a classic request names
// (Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol).
func (g *group) classicMember(memberID string, instanceID *string) (*cMember, int16) {
	cg := g.cg
	var m *cMember
	if instanceID != nil {
		m = cg.members[cg.static[*instanceID]]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code
		}
		if m.id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	} else if m = cg.members[memberID]; m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// classicHeartbeatToConsumer is a Heartbeat to a consumer group (Kafka's
// classicGroupHeartbeatToConsumerGroup). Called with g locked.
func (g *group) classicHeartbeatToConsumer(memberID string, instanceID *string, generation int32) int16 {
	m, code := g.classicMember(memberID, instanceID)
	if code != 0 {
		return code
	}
	if generation != m.epoch {
		return kerr.IllegalGeneration.Code
	}
	g.scheduleConsumerSession(m)
	if m.epoch < g.cg.epoch || m.state == cUnrevoked || (m.state == cUnreleased && !g.waitingOnUnreleased(m)) {
		g.scheduleJoinTimeout(m)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// waitingOnUnreleased reports whether a partition of m's target it does not have yet is
// still held by another member.
func (g *group) waitingOnUnreleased(m *cMember) bool {
	held := g.heldByOthers(m)
	for _, k := range flatten(minus(g.cg.target[m.id], m.assigned)) {
		if held[k] {
			return true
		}
	}
	return false
}

// classicSyncToConsumer is a SyncGroup to a consumer group (Kafka's
// classicGroupSyncToConsumerGroup). Called with g locked.
func (g *group) classicSyncToConsumer(r *kmsg.SyncGroupRequest, instanceID *string) *kmsg.SyncGroupResponse {
	resp := syncError(r.Version, 0)
	m, code := g.classicMember(r.MemberID, instanceID)
	switch {
	case code != 0:
		resp.ErrorCode = code
		return resp
	case r.Generation != m.epoch:
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp
	case r.Version >= 5 && (inconsistent(r.ProtocolType, "consumer") ||
		(r.Protocol != nil && !(&member{protocols: m.classic.protocols}).supports(*r.Protocol))):
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp
	case g.cg.epoch > m.epoch && m.state != cUnrevoked:
		g.scheduleJoinTimeout(m)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	}
	g.scheduleConsumerSession(m)
	proto := m.classic.protocols[0]
	if r.Protocol != nil {
		proto.name = *r.Protocol
		proto.metadata = (&member{protocols: m.classic.protocols}).metadataFor(*r.Protocol)
	}
	resp.MemberAssignment = encodeAssignment(m.assigned, proto.metadata)
	if r.Version >= 5 {
		resp.ProtocolType, resp.Protocol = strp("consumer"), strp(proto.name)
	}
	return resp
}

// classicLeaveFromConsumer removes the classic members a LeaveGroup names from the
// consumer group (Kafka's classicGroupLeaveToConsumerGroup; KIP-848 members named are
// UNKNOWN_MEMBER_ID, they leave by heartbeat). It returns each member's code. Called
// with g locked; the caller persists the group.
func (g *group) classicLeaveFromConsumer(l kmsg.LeaveGroupRequestMember) int16 {
	cg := g.cg
	var m *cMember
	if l.InstanceID != nil {
		m = cg.members[cg.static[*l.InstanceID]]
		switch {
		case m == nil:
			return kerr.UnknownMemberID.Code
		case l.MemberID != "" && l.MemberID != m.id:
			return kerr.FencedInstanceID.Code
		}
	} else if m = cg.members[l.MemberID]; m == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.classic == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeConsumerMember(m)
	return 0
}

// scheduleJoinTimeout starts, unless running, the timer that fences a classic member
// told to rejoin that does not within its rebalance timeout (Kafka's
// scheduleConsumerGroupJoinTimeoutIfAbsent).
func (g *group) scheduleJoinTimeout(m *cMember) {
	if m.joinTimer != nil {
		return
	}
	m.joinTok++
	tok := m.joinTok
	cg := g.cg
	d := m.rebalanceTimeout
	if d <= 0 {
		d = m.sessionTimeout(g.c.cfg.ConsumerSessionTimeout)
	}
	m.joinTimer = g.after(d, func() {
		if g.cg != cg || cg.members[m.id] != m || m.joinTok != tok {
			return
		}
		g.fenceConsumerMember(m)
		g.persistGroup(nil)
	})
}

func (g *group) stopJoinTimer(m *cMember) {
	if m.joinTimer != nil {
		m.joinTimer.Stop()
		m.joinTimer = nil
	}
	m.joinTok++
}

// encodeAssignment is ps in the ConsumerProtocol assignment format, in the version of
// the subscription metadata given (assignment versions stop at 3).
func encodeAssignment(ps parts, subscription []byte) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if len(subscription) >= 2 {
		a.Version = min(max(int16(subscription[0])<<8|int16(subscription[1]), 0), 3)
	}
	for _, t := range sortedKeys(ps) {
		if len(ps[t]) == 0 {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t, append([]int32(nil), ps[t]...)
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// decodeAssignment reads a classic member's assignment (ConsumerProtocol); no bytes is
// no partition.
func decodeAssignment(b []byte) (parts, error) {
	out := parts{}
	if len(b) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	for t := range out {
		sort.Slice(out[t], func(i, k int) bool { return out[t][i] < out[t][k] })
	}
	return out, nil
}
