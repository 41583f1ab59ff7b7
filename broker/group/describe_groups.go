package group

// DescribeGroups (API key 15), versions 0-6.
//
// Behaviour (Kafka's classic protocol): for every requested group, its state,
// protocol type, and members (member ID, instance ID v4+, client ID, client
// host). Only a Stable group reports its protocol name and each member's
// metadata (for that protocol) and assignment; other states report them
// empty. Unknown groups (and groups being deleted) are reported in state
// "Dead" with no error before v6 and GROUP_ID_NOT_FOUND from v6 (KIP-1043).
// AuthorizedOperations is left at its "not provided" default (no ACLs here).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleDescribeGroups(r *kmsg.DescribeGroupsRequest, respond func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range r.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(r.Version, name))
	}
	respond(resp)
}

func (c *Coordinator) describeGroup(version int16, name string) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = name
	dg.State = stateDead.String()
	notFound := func() kmsg.DescribeGroupsResponseGroup {
		if version >= 6 {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			dg.ErrorMessage = strp("Group " + name + " not found.")
		}
		return dg
	}
	g := c.lockedGroup(name, false)
	if g == nil {
		return notFound()
	}
	defer g.unlock()
	if g.state == stateDead {
		return notFound()
	}
	if g.cg != nil {
		// Kafka: a consumer group is described by ConsumerGroupDescribe.
		dg = notFound()
		dg.ErrorCode = kerr.GroupIDNotFound.Code
		return dg
	}
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}
