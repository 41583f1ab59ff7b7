package kafka

// DescribeShareGroupOffsets (key 90, v0-v1): each named partition's share-partition
// start offset (the SPSO: every record below it is acknowledged or archived) from the
// persisted share-partition state (__share_group_state), answered by the group's
// coordinator. A partition the group never fetched has start offset -1. Lag (v1) is -1
// (unknown). Topics null (v1) is every partition of every topic the group ever
// subscribed. Describe on the group, Describe on each topic. A group that is not a share
// group known to its coordinator is GROUP_ID_NOT_FOUND.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.DescribeShareGroupOffsets.Int16(), min: 0, max: 1, on: shareOn, blocking: true,
		handle: answer(func(s *Server, ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
			return s.describeShareOffsets(ctx, req)
		})})
}

func (s *Server) describeShareOffsets(ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	view := s.meta.View()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceGroup, g.GroupID) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		sg, _, err := s.shareGroupHere(ctx, g.GroupID)
		switch {
		case err != nil:
			rg.ErrorCode = shareCode(err)
		case sg == nil:
			rg.ErrorCode = kerr.GroupIDNotFound.Code
		}
		if rg.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		topics := g.Topics
		if topics == nil { // null: every partition of every topic the group subscribed
			for _, name := range sg.Topics {
				if mt := view.Topics[name]; mt != nil {
					rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
					rt.Topic = name
					for p := range mt.Partitions {
						rt.Partitions = append(rt.Partitions, int32(p))
					}
					topics = append(topics, rt)
				}
			}
		}
		for _, t := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			mt := view.Topics[t.Topic]
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case mt == nil || p < 0 || int(p) >= len(mt.Partitions):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case !allowedTopic(ctx, acl.OpDescribe, t.Topic):
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				default:
					rt.TopicID = mt.ID
					snap, ok, err := s.share.ReadState(ctx, share.Key{Group: g.GroupID, Topic: mt.ID, Partition: p})
					switch {
					case err != nil:
						rp.ErrorCode = shareCode(err)
					case ok:
						rp.StartOffset, rp.LeaderEpoch = snap.Start, snap.LeaderEpoch
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
