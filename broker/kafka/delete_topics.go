package kafka

// DeleteTopics (key 20), versions 0-6.
//
// Deletes topics by name (v0-5) or by name or ID (v6). The partitions' logs are dropped at
// once; their WAL records stay until the WAL is trimmed but are skipped at replay because
// the topic ID is gone (a re-created topic gets a new ID).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 20, min: 0, max: 6, blocking: true, handle: answer((*Server).handleDeleteTopics)})
}

func (s *Server) handleDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   metadata.TopicID
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for i := range req.TopicNames {
			targets = append(targets, target{name: &req.TopicNames[i]})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		name := ""
		switch {
		case tg.name != nil:
			name = *tg.name
		case !tg.id.IsZero():
			if t := s.meta.View().TopicByID(tg.id); t != nil {
				name = t.Name
				st.Topic = &t.Name
			} else {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
		default:
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !allowedTopic(ctx, acl.OpDelete, name) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := refuseInternal("delete", name); err != nil {
			st.ErrorCode, st.ErrorMessage = kafkaCode(err), errMessage(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t, err := s.meta.DeleteTopic(ctx, name)
		if err != nil {
			st.ErrorCode = kafkaCode(err)
			st.ErrorMessage = errMessage(err)
		} else {
			st.TopicID = t.ID
		}
		resp.Topics = append(resp.Topics, st)
	}
	s.be.Refresh()
	return resp
}
