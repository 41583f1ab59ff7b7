package kafka

// DeleteRecords (key 21), versions 0-2.
//
// Moves a partition's log start offset forward (offset -1 means the high watermark).
// Offsets above the high watermark get OFFSET_OUT_OF_RANGE. The new start is stored in
// the metadata so it survives restarts; fetches below it get OFFSET_OUT_OF_RANGE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 21, min: 0, max: 2, blocking: true, handle: answer((*Server).handleDeleteRecords)})
}

func (s *Server) handleDeleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	view := s.meta.View()
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := view.Topics[rt.Topic]
		deletable := allowedTopic(ctx, acl.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !deletable {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if err := refuseInternal("delete records of", rt.Topic); err != nil {
				sp.ErrorCode = kafkaCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			w, err := s.be.Writer(t, rp.Partition, "")
			if err != nil {
				sp.ErrorCode = kafkaCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			logStart, hw := w.Offsets()
			off := rp.Offset
			if off == -1 {
				off = hw
			}
			switch {
			case off < 0 || off > hw:
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			case off <= logStart:
				sp.LowWatermark = logStart
			default:
				if err := w.SetLogStart(ctx, off); err != nil {
					sp.ErrorCode = kafkaCode(err)
				} else {
					sp.LowWatermark = off
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
