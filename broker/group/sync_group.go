package group

// SyncGroup (API key 14), versions 0-5.
//
// Behaviour (Kafka's classic protocol):
//   - INVALID_GROUP_ID for an empty group; UNKNOWN_MEMBER_ID if the group
//     does not exist; COORDINATOR_NOT_AVAILABLE while it is being deleted.
//   - Member check: UNKNOWN_MEMBER_ID for an unknown member ID (or unknown
//     instance ID), FENCED_INSTANCE_ID when the instance ID (v3+) belongs to
//     another member ID; then ILLEGAL_GENERATION on a generation mismatch;
//     then (v5+) INCONSISTENT_GROUP_PROTOCOL when the given protocol type or
//     name differs from the group's.
//   - Empty: UNKNOWN_MEMBER_ID. PreparingRebalance: REBALANCE_IN_PROGRESS.
//   - CompletingRebalance: the request is parked. When the leader's request
//     arrives its assignments are stored (members it left out get an empty
//     assignment, unknown member IDs are ignored), every parked SyncGroup is
//     answered with its member's assignment and the group becomes Stable.
//     If a rebalance starts first, parked requests get REBALANCE_IN_PROGRESS.
//   - Stable: the member's current assignment is returned.
//   - Members that do not send SyncGroup within the rebalance timeout after
//     the join phase are removed and a new rebalance starts.
//   - v5+ responses carry the group's protocol type and name.
// The generation's membership and assignment are made durable (a Meta record) before
// any member gets its assignment, as Kafka does: a coordinator that takes the group over
// resumes it in Stable without a rebalance. If the write fails, the parked SyncGroups get
// its error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) and a rebalance starts.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleSyncGroup(r *kmsg.SyncGroupRequest, respond func(kmsg.Response)) {
	v := r.Version
	if r.Group == "" {
		respond(syncError(v, kerr.InvalidGroupID.Code))
		return
	}
	g := c.lockedGroup(r.Group, false)
	if g == nil {
		respond(syncError(v, kerr.UnknownMemberID.Code))
		return
	}
	defer g.unlock()
	fail := func(code int16) { g.send(respond, syncError(v, code)) }

	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	var instanceID *string
	if v >= 3 {
		instanceID = r.InstanceID
	}
	if g.cg != nil {
		g.send(respond, g.classicSyncToConsumer(r, instanceID)) // consumer_classic.go
		return
	}
	if code := g.validateMember(r.MemberID, instanceID); code != 0 {
		fail(code)
		return
	}
	if r.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if v >= 5 && (inconsistent(r.ProtocolType, g.protocolType) || inconsistent(r.Protocol, g.protocol)) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}

	m := g.members[r.MemberID]
	switch g.state {
	case stateEmpty:
		fail(kerr.UnknownMemberID.Code)
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		if m.sync != nil {
			g.send(m.sync.respond, syncError(m.sync.version, kerr.RebalanceInProgress.Code))
		}
		m.sync = &waiter{version: v, respond: respond}
		g.removePendingSync(m.id)
		if m.id != g.leader {
			return
		}
		assignments := make(map[string][]byte, len(r.GroupAssignment))
		for _, a := range r.GroupAssignment {
			if _, ok := g.members[a.MemberID]; ok {
				assignments[a.MemberID] = a.MemberAssignment
			}
		}
		g.storeAssignment(assignments)
	case stateStable:
		g.removePendingSync(m.id)
		resp := syncError(v, 0)
		resp.MemberAssignment = m.assignment
		if v >= 5 {
			resp.ProtocolType = strp(g.protocolType)
			resp.Protocol = strp(g.protocol)
		}
		g.send(respond, resp)
	}
}

// inconsistent reports whether a protocol type/name sent by a client
// contradicts the group's (an absent value never does).
func inconsistent(sent *string, have string) bool {
	return sent != nil && have != "" && *sent != have
}

// storeAssignment writes the generation's membership with the leader's assignments and,
// once that is durable, hands every parked SyncGroup its assignment and makes the group
// Stable. Called with g locked in CompletingRebalance.
func (g *group) storeAssignment(assignments map[string][]byte) {
	gen := g.generation
	meta := g.metaOf(assignments, g.c.cfg.Clock.Now())
	g.storeMeta(meta, func(err error) {
		if g.state != stateCompletingRebalance || g.generation != gen {
			return // a rebalance began meanwhile and answered the parked requests
		}
		if err != nil {
			g.resetAndPropagateAssignmentWithError(storeErrorCode(err, kerr.UnknownServerError.Code))
			if !g.unloaded {
				g.prepareRebalance()
			}
			return
		}
		for id, mm := range g.members {
			mm.assignment = assignments[id]
		}
		g.propagateAssignment(0)
		g.transition(stateStable)
	})
}
