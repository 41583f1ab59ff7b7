package kafka

// DescribeAcls (key 29), versions 0-3: the bindings a filter selects, from this broker's
// View, grouped by resource pattern. Needs Describe on the cluster.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 29, min: 0, max: 3, handle: answer((*Server).handleDescribeACLs)})
}

// filterFrom converts a request's filter fields.
func filterFrom(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	f := acl.Filter{ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt), Host: host,
		Operation: acl.Operation(op), Permission: acl.Permission(perm)}
	if principal != nil {
		p := security.Principal(*principal)
		f.Principal = &p
	}
	if version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	return f
}

func (s *Server) handleDescribeACLs(ctx context.Context, req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	_, code, msg := s.aclStore(ctx, "DescribeAcls", acl.OpDescribe)
	f := filterFrom(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if code == 0 {
		if err := f.Validate(); err != nil {
			code, msg = kerr.InvalidRequest.Code, errMessage(err)
		}
	}
	if code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	// Bindings are sorted by resource type, name, pattern: one resource per run.
	for _, b := range s.meta.View().ACLSet().Select(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) ||
			resp.Resources[n-1].ResourceName != b.ResourceName || resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = string(b.Principal), b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp
}
