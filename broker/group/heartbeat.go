package group

// Heartbeat (API key 12), versions 0-4.
//
// Behaviour (Kafka's classic protocol):
//   - INVALID_GROUP_ID for an empty group; UNKNOWN_MEMBER_ID if the group
//     does not exist; COORDINATOR_NOT_AVAILABLE while it is being deleted.
//   - UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (instance ID, v3+) for a member
//     that is not current, then ILLEGAL_GENERATION on a generation mismatch.
//   - Empty: UNKNOWN_MEMBER_ID. PreparingRebalance: REBALANCE_IN_PROGRESS
//     (the member must rejoin). CompletingRebalance and Stable: no error.
//   - Every accepted heartbeat (including REBALANCE_IN_PROGRESS ones) restarts
//     the member's session timer; a member whose timer lapses is removed and
//     the group rebalances.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleHeartbeat(r *kmsg.HeartbeatRequest, respond func(kmsg.Response)) {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = r.Version
	if r.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		respond(resp)
		return
	}
	g := c.lockedGroup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		respond(resp)
		return
	}
	defer g.unlock()
	defer g.send(respond, resp)

	if g.state == stateDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	var instanceID *string
	if r.Version >= 3 {
		instanceID = r.InstanceID
	}
	if g.cg != nil {
		resp.ErrorCode = g.classicHeartbeatToConsumer(r.MemberID, instanceID, r.Generation) // consumer_classic.go
		return
	}
	if code := g.validateMember(r.MemberID, instanceID); code != 0 {
		resp.ErrorCode = code
		return
	}
	if r.Generation != g.generation {
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return
	}
	m := g.members[r.MemberID]
	switch g.state {
	case stateEmpty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case statePreparingRebalance:
		g.scheduleHeartbeat(m, m.sessionTimeout)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
}
