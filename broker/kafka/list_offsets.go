package kafka

// ListOffsets (key 2), versions 1-8.
//
// Timestamps: -1 latest (the high watermark; for isolation_level 1, read_committed, the
// last stable offset: the first offset of the oldest open transaction), -2 earliest (log start), -3 the batch with the largest timestamp
// (v7+), -4 earliest local (v8+, same as earliest: all data is local to the shared WAL), and
// t >= 0 the first batch whose max timestamp is >= t. Timestamps are indexed per batch, so
// a time lookup returns the batch's first offset: possibly a few records early, never late.
// current_leader_epoch (v4+) is checked like Fetch's.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 2, min: 1, max: 8, blocking: true, handle: answer((*Server).handleListOffsets)})
}

func (s *Server) handleListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	view := s.meta.View()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := view.Topics[rt.Topic]
		describable := allowedTopic(ctx, acl.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !describable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			r, err := s.be.Reader(t, rp.Partition, rp.CurrentLeaderEpoch, zoneFrom(ctx))
			if err != nil {
				sp.ErrorCode = kafkaCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			logStart, hw, epoch := r.LogInfo()
			sp.LeaderEpoch = epoch
			switch ts := rp.Timestamp; {
			case ts == -1 && req.IsolationLevel == 1:
				sp.Offset = min(r.LastStable(), hw)
			case ts == -1:
				sp.Offset = hw
			case ts == -2 || ts == -4:
				sp.Offset = logStart
			case ts == -3:
				sp.Offset, sp.Timestamp = r.MaxTimestamp()
			case ts >= 0:
				if off, bts, ok := r.OffsetForTime(ctx, ts); ok {
					sp.Offset, sp.Timestamp = off, bts
				}
			default:
				sp.ErrorCode = kerr.InvalidRequest.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
