package group

// consumer_describe.go: ConsumerGroupDescribe (key 69, v0-v1) and the consumer group's
// rules for offset commits (OffsetCommit v9+ carries the member epoch in its generation
// field).

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupType is what ListGroups v5+ reports for a consumer group.
const consumerGroupType = "consumer"

// consumerGroupState is Kafka's ConsumerGroupState name: empty, assigning (the target is
// behind the group epoch), reconciling (a member is not at the target yet), stable.
func (g *group) consumerGroupState() string {
	cg := g.cg
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignEpoch || m.state != cStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (c *Coordinator) handleConsumerDescribe(r *kmsg.ConsumerGroupDescribeRequest, respond func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	ids := map[string][16]byte{}
	for _, ti := range c.topicInfos() {
		ids[ti.Name] = ti.ID
	}
	assignment := func(ps parts) kmsg.Assignment {
		var a kmsg.Assignment
		for _, t := range sortedKeys(ps) {
			if len(ps[t]) == 0 {
				continue
			}
			tp := kmsg.AssignmentTopicPartition{TopicID: ids[t], Topic: t, Partitions: append([]int32(nil), ps[t]...)}
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		return a
	}
	for _, name := range r.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		g := c.lockedGroup(name, false)
		if g == nil {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if g.cg == nil || g.state == stateDead {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + name + " is not a consumer group"
			dg.ErrorMessage = &msg
		} else {
			cg := g.cg
			dg.State = g.consumerGroupState()
			dg.Epoch, dg.AssignmentEpoch = cg.epoch, cg.assignEpoch
			dg.AssignorName = Assignors[0]
			mids := make([]string, 0, len(cg.members))
			for id := range cg.members {
				mids = append(mids, id)
			}
			sort.Strings(mids)
			for _, id := range mids {
				m := cg.members[id]
				if m.assignor != "" {
					dg.AssignorName = m.assignor
				}
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rack, m.epoch
				dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
				dm.SubscribedTopics = append([]string{}, m.topics...)
				if m.regex != "" {
					dm.SubscribedTopicRegex = &m.regex
				}
				dm.Assignment, dm.TargetAssignment = assignment(m.assigned), assignment(cg.target[id])
				dm.MemberType = 1 // consumer
				if m.classic != nil {
					dm.MemberType = 0 // classic (consumer_classic.go)
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		g.unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	respond(resp)
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit: a commit without
// a member (an admin, a consumer not in the group) only to an empty group; a member's
// commit with its epoch, or the one before it (an answer bumping it may still be on its
// way), else STALE_MEMBER_EPOCH; a classic member's with its epoch as the generation,
// else ILLEGAL_GENERATION.
func (g *group) validateConsumerCommit(epoch int32, memberID string) int16 {
	if memberID == "" && epoch < 0 {
		if len(g.cg.members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	m := g.cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.classic != nil {
		// A classic member's generation is its member epoch, exactly (Kafka's
		// validateMemberEpoch for the classic protocol).
		if epoch != m.epoch {
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	if epoch != m.epoch && epoch != m.prevEpoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateConsumerFetch is Kafka's ConsumerGroup.validateOffsetFetch: no member and a
// negative epoch (an admin client) may read; a named member must exist and give its
// current epoch exactly (not the previous one, which a commit may still use).
func (g *group) validateConsumerFetch(m fetchMember) int16 {
	if m.id == nil && m.epoch < 0 {
		return 0
	}
	id := ""
	if m.id != nil {
		id = *m.id
	}
	cm := g.cg.members[id]
	if cm == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.epoch != cm.epoch && cm.classic != nil {
		return kerr.IllegalGeneration.Code
	}
	if m.epoch != cm.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
