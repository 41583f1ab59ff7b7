package kafka

// ShareAcknowledge (key 79, v1; v2's renew acknowledgements are not served):
// acknowledgements of a share group member without a fetch, applied to the partitions'
// share partitions on their leader and answered once durable (the share-partition state
// in __share_group_state). Per offset: 0 gap, 1 accept, 2 release, 3 reject; a batch
// naming offsets the member does not hold is INVALID_RECORD_STATE and changes nothing.
// Epoch -1 closes the share session and releases what the member still holds here.
// Read on the group and each topic.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.ShareAcknowledge.Int16(), min: 1, max: 1, on: shareOn, blocking: true,
		handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
			sl.respond(s.shareAcknowledge(s.withSession(c.ctx, c), req.(*kmsg.ShareAcknowledgeRequest)))
		}})
}

type shareAckBatch struct {
	first, last int64
	types       []int8
}

func (s *Server) shareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member, code := shareMember(ctx, req.GroupID, req.MemberID)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	parts, err := s.share.Sessions.Ack(group, member, req.ShareSessionEpoch)
	if err != nil {
		resp.ErrorCode = shareCode(err)
		return resp
	}
	set, err := s.share.Configs.Get(ctx, group, s.now())
	if err != nil {
		resp.ErrorCode = shareCode(err)
		return resp
	}
	view := s.meta.View()
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			batches := make([]shareAckBatch, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = shareAckBatch{first: b.FirstOffset, last: b.LastOffset, types: b.AcknowledgeTypes}
			}
			var l kmsg.ShareFetchResponseTopicPartitionCurrentLeader
			rp.ErrorCode = s.shareAck(ctx, view, set, group, member, share.TP{Topic: t.TopicID, Partition: p.Partition}, batches, &l)
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = l.LeaderID, l.LeaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == share.FinalEpoch {
		s.shareRelease(ctx, group, member, parts)
	}
	return resp
}

// shareAck applies one partition's acknowledgement batches of member and makes them
// durable; the answer is the partition's code (the first batch refused, else a failed
// write).
func (s *Server) shareAck(ctx context.Context, view *metadata.View, set share.Settings, group, member string, tp share.TP, batches []shareAckBatch,
	l *kmsg.ShareFetchResponseTopicPartitionCurrentLeader) int16 {
	l.LeaderID, l.LeaderEpoch = -1, -1
	if t := view.TopicByID(tp.Topic); t == nil {
		return kerr.UnknownTopicID.Code
	} else if !allowedTopic(ctx, acl.OpRead, t.Name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	_, e, k, err := s.shareEntry(ctx, view, set, group, tp)
	if err != nil {
		s.shareLeader(view, tp, l)
		return shareCode(err)
	}
	var first error
	e.With(s.now(), func(p *share.Partition) {
		for _, b := range batches {
			types := make([]share.AckType, len(b.types))
			for i, t := range b.types {
				types[i] = share.AckType(t)
			}
			if err := p.Ack(member, b.first, b.last, types); err != nil && first == nil {
				first = err
			}
		}
	})
	if err := s.share.Parts.Flush(ctx, k, e); err != nil {
		return shareCode(err)
	}
	return shareCode(first)
}
