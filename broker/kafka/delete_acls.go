package kafka

// DeleteAcls (key 31), versions 0-3: removes the bindings each filter matches and lists
// them per filter. Needs Alter on the cluster; an invalid filter gets INVALID_REQUEST
// and the valid ones are applied together.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 31, min: 0, max: 3, blocking: true, handle: answer((*Server).handleDeleteACLs)})
}

func (s *Server) handleDeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	fail := func(i int, code int16, msg *string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
	}
	store, code, msg := s.aclStore(ctx, "DeleteAcls", acl.OpAlter)
	if code != 0 {
		for i := range resp.Results {
			fail(i, code, msg)
		}
		return resp
	}
	var filters []acl.Filter
	var which []int
	for i, rf := range req.Filters {
		f := filterFrom(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, errMessage(err))
			continue
		}
		filters = append(filters, f)
		which = append(which, i)
	}
	if len(filters) == 0 {
		return resp
	}
	matched, err := store.DeleteACLs(ctx, filters)
	if err != nil {
		for _, i := range which {
			fail(i, kafkaCode(err), errMessage(err))
		}
		return resp
	}
	n := 0
	for j, i := range which {
		if j >= len(matched) {
			break
		}
		for _, b := range matched[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host, m.Operation, m.PermissionType = string(b.Principal), b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			n++
		}
	}
	s.log.Info("ACLs deleted", "principal", acl.FromContext(ctx).Principal, "count", n)
	return resp
}
