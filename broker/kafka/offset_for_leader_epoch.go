package kafka

// OffsetForLeaderEpoch (key 23), versions 0-4.
//
// Consumers use it after a leader change to detect log truncation: for the requested
// epoch it returns the largest epoch <= it that the log has and the offset where the next
// epoch starts (or the log end for the current epoch). Weir never truncates acked data,
// so a consumer's position is always valid, but the answer follows Kafka's rules so
// clients' validation logic is satisfied.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 23, min: 0, max: 4, blocking: true, handle: answer((*Server).handleOffsetForLeaderEpoch)})
}

func (s *Server) handleOffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	view := s.meta.View()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := view.Topics[rt.Topic]
		describable := allowedTopic(ctx, acl.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			r, err := s.be.Reader(t, rp.Partition, rp.CurrentLeaderEpoch, zoneFrom(ctx))
			if !describable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if err != nil {
				sp.ErrorCode = kafkaCode(err)
			} else {
				sp.LeaderEpoch, sp.EndOffset = r.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
