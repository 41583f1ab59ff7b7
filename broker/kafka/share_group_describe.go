package kafka

// ShareGroupDescribe (key 77, v1): a share group's epochs and members with their
// assignments, from its coordinator (Describe on the group). A group unknown here is
// GROUP_ID_NOT_FOUND (also a classic or consumer group of that name).

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.ShareGroupDescribe.Int16(), min: 1, max: 1, on: shareOn, blocking: true,
		handle: answer(func(s *Server, ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
			return s.shareDescribe(ctx, req)
		})})
}

func (s *Server) shareDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	view := s.meta.View()
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		g.AuthorizedOperations = -2147483648
		switch {
		case !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceGroup, id):
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		default:
			coordEpoch, err := s.shareCoordinator(ctx, id)
			if err != nil {
				g.ErrorCode = shareCode(err)
				break
			}
			d, err := s.share.Groups.Describe(ctx, id, coordEpoch, s.now())
			switch {
			case err != nil:
				g.ErrorCode = shareCode(err)
			case d == nil:
				g.ErrorCode = kerr.GroupIDNotFound.Code
			}
			if g.ErrorCode != 0 {
				break
			}
			g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = "Stable", d.Epoch, d.AssignEpoch, "simple"
			if len(d.Members) == 0 {
				g.GroupState = "Empty"
			}
			ids := make([]string, 0, len(d.Members))
			for mid := range d.Members {
				ids = append(ids, mid)
			}
			sort.Strings(ids)
			for _, mid := range ids {
				m := d.Members[mid]
				km := kmsg.NewShareGroupDescribeResponseGroupMember()
				km.MemberID, km.MemberEpoch, km.ClientID, km.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
				km.SubscribedTopicNames = m.Subscribed
				if m.Rack != "" {
					r := m.Rack
					km.RackID = &r
				}
				for tid, ps := range m.Assignment {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.TopicID, tp.Partitions = tid, ps
					if t := view.TopicByID(tid); t != nil {
						tp.Topic = t.Name
					}
					km.Assignment.TopicPartitions = append(km.Assignment.TopicPartitions, tp)
				}
				g.Members = append(g.Members, km)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
