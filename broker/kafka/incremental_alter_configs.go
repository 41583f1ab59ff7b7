package kafka

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// Topic configs are changed through the metadata store with Kafka's op semantics (set,
// delete, append and subtract on list values), validated as a whole: one bad key fails
// the resource and changes nothing. Broker configs are static flags in Weir and are
// refused with INVALID_REQUEST saying so. Group configs (type 32) are the share groups'
// (share_config.go). validate_only checks without changing.

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 44, min: 0, max: 1, blocking: true, handle: answer((*Server).handleIncrementalAlterConfigs)})
}

func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case resourceTopic:
			if !allowedTopic(ctx, acl.OpAlterConfigs, rr.ResourceName) {
				sr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			if err := refuseInternal("change the configs of", rr.ResourceName); err != nil {
				sr.ErrorCode, sr.ErrorMessage = kafkaCode(err), errMessage(err)
				break
			}
			ops := make([]metadata.ConfigOp, 0, len(rr.Configs))
			for _, c := range rr.Configs {
				op := metadata.ConfigOp{Key: c.Name, Op: metadata.ConfigOpType(c.Op)}
				if c.Value != nil {
					op.Value = *c.Value
				}
				ops = append(ops, op)
			}
			if err := s.meta.AlterTopicConfigs(ctx, rr.ResourceName, ops, req.ValidateOnly); err != nil {
				sr.ErrorCode = kafkaCode(err)
				sr.ErrorMessage = errMessage(err)
			}
		case resourceBroker:
			if !allowedCluster(ctx, acl.OpAlterConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "broker configs are static in Weir: set them with weir broker flags"
			sr.ErrorMessage = &msg
		case resourceGroup: // share groups' configs (share_config.go)
			s.alterGroupConfigs(ctx, rr, req.ValidateOnly, &sr)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}
