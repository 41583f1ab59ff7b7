package group

// LeaveGroup (API key 13), versions 0-5.
//
// Behaviour (Kafka's classic protocol):
//   - v0-v2 remove the single MemberID; v3+ remove a batch of members, each
//     identified by member ID and/or group.instance.id, with a per-member
//     error. For v0-v2 the per-member error becomes the top-level error.
//   - INVALID_GROUP_ID for an empty group; UNKNOWN_MEMBER_ID if the group
//     does not exist; COORDINATOR_NOT_AVAILABLE while it is being deleted.
//   - Per member: an empty member ID with an instance ID removes that static
//     member (administrative removal), else UNKNOWN_MEMBER_ID; a pending
//     member (MEMBER_ID_REQUIRED issued, not joined yet) is forgotten;
//     otherwise UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as for Heartbeat.
//   - A removed member's parked JoinGroup/SyncGroup gets UNKNOWN_MEMBER_ID;
//     a Stable or CompletingRebalance group rebalances, a rebalancing group
//     completes its join phase if everybody else has rejoined, and the group
//     becomes Empty (next generation) when its last member leaves.
// The Reason field (v5+) is ignored.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleLeaveGroup(r *kmsg.LeaveGroupRequest, respond func(kmsg.Response)) {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = r.Version
	leaving := r.Members
	if r.Version < 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = r.MemberID
		leaving = []kmsg.LeaveGroupRequestMember{m}
	}
	finish := func() {
		if r.Version < 3 {
			if resp.ErrorCode == 0 && len(resp.Members) > 0 {
				resp.ErrorCode = resp.Members[0].ErrorCode
			}
			resp.Members = nil
		}
	}
	addMember := func(l kmsg.LeaveGroupRequestMember, code int16) {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
		resp.Members = append(resp.Members, rm)
	}

	if r.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		finish()
		respond(resp)
		return
	}
	g := c.lockedGroup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		for _, l := range leaving {
			addMember(l, kerr.UnknownMemberID.Code)
		}
		finish()
		respond(resp)
		return
	}
	defer g.unlock()
	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		finish()
		g.send(respond, resp)
		return
	}

	if g.cg != nil {
		// Classic members of a consumer group (consumer_classic.go): answered once
		// their removal is durable.
		removed := false
		for _, l := range leaving {
			code := g.classicLeaveFromConsumer(l)
			removed = removed || code == 0
			addMember(l, code)
		}
		finish()
		if !removed {
			g.send(respond, resp)
			return
		}
		g.persistGroup(func(err error) {
			if err != nil {
				resp.ErrorCode = storeErrorCode(err, kerr.UnknownServerError.Code)
			}
			g.send(respond, resp)
		})
		return
	}
	for _, l := range leaving {
		switch {
		case l.MemberID == "":
			id, ok := "", false
			if l.InstanceID != nil {
				id, ok = g.static[*l.InstanceID]
			}
			if !ok {
				addMember(l, kerr.UnknownMemberID.Code)
				continue
			}
			g.removeMemberAndUpdate(g.members[id])
			addMember(l, 0)
		case g.pending[l.MemberID] != nil:
			g.removePending(l.MemberID)
			if g.state == statePreparingRebalance && g.hasAllMembersJoined() {
				g.completeJoin()
			}
			addMember(l, 0)
		default:
			if code := g.validateMember(l.MemberID, l.InstanceID); code != 0 {
				addMember(l, code)
				continue
			}
			g.removeMemberAndUpdate(g.members[l.MemberID])
			addMember(l, 0)
		}
	}
	finish()
	g.send(respond, resp)
}
