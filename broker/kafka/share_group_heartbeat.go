package kafka

// ShareGroupHeartbeat (key 76, v1; v0 was Kafka 4.0's early access): a share group
// member joins (epoch 0, its own member ID), heartbeats, and leaves (epoch -1); the
// coordinator (the leader of the group's __consumer_offsets partition) answers its epoch
// and, when it changed, its assignment (broker/share group.go). Read on the group,
// Describe on each subscribed topic. Not served with --share-groups=false.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.ShareGroupHeartbeat.Int16(), min: 1, max: 1, on: shareOn, blocking: true,
		handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
			host, _, _ := net.SplitHostPort(c.nc.RemoteAddr().String())
			ctx := s.withSession(c.ctx, c)
			sl.respond(s.shareHeartbeat(ctx, sl.clientID, "/"+host, req.(*kmsg.ShareGroupHeartbeatRequest)))
		}})
}

func (s *Server) shareHeartbeat(ctx context.Context, clientID, host string, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = code
		return resp
	}
	if !acl.Allowed(ctx, acl.OpRead, acl.ResourceGroup, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	for _, t := range req.SubscribedTopicNames {
		if !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceTopic, t) {
			return fail(kerr.TopicAuthorizationFailed.Code)
		}
	}
	coord, err := s.shareCoord(ctx, req.GroupID)
	if err != nil {
		return fail(shareCode(err))
	}
	view := s.meta.View()
	res, err := s.share.Groups.Heartbeat(ctx, share.HeartbeatRequest{Group: req.GroupID, Member: req.MemberID, ClientID: clientID, ClientHost: host,
		Epoch: req.MemberEpoch, Rack: req.RackID, Subscribed: req.SubscribedTopicNames, CoordEpoch: coord.Epoch, CoordPartition: coord.Partition}, s.now(), shareTopicInfo(view))
	if err != nil {
		return fail(shareCode(err))
	}
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = res.Epoch
	interval := s.share.Configs.Defaults().HeartbeatInterval
	if set, err := s.share.Configs.Get(ctx, req.GroupID, s.now()); err == nil {
		interval = set.HeartbeatInterval // share.heartbeat.interval.ms
	}
	resp.HeartbeatIntervalMillis = int32(interval.Milliseconds())
	if res.Sent {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for id, ps := range res.Assignment {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, ps
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}
