package kafka

// CreatePartitions (key 37), versions 0-3.
//
// Grows a topic to count partitions (INVALID_PARTITIONS if not larger). Assignments are
// accepted and ignored: the new partitions are led according to placement. validate_only
// checks without changing anything.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 37, min: 0, max: 3, blocking: true, handle: answer((*Server).handleCreatePartitions)})
}

func (s *Server) handleCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if !allowedTopic(ctx, acl.OpAlter, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		// A group's coordinator partition is its hash modulo the partition count: more
		// partitions in __consumer_offsets would move groups away from their offsets.
		if err := refuseInternal("add partitions to", rt.Topic); err != nil {
			st.ErrorCode, st.ErrorMessage = kafkaCode(err), errMessage(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := s.meta.CreatePartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly); err != nil {
			st.ErrorCode = kafkaCode(err)
			st.ErrorMessage = errMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	s.be.Refresh()
	return resp
}
