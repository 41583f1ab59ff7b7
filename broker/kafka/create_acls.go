package kafka

// CreateAcls (key 30), versions 0-3.
//
// Adds ACL bindings to the cluster's metadata (metadata.ACLStore: the controller, or a
// standalone broker's LocalStore); every broker authorizes from its own View, so a
// binding is enforced everywhere once the brokers' Views have it. Needs Alter on the
// cluster. Each creation is answered on its own: an invalid one gets INVALID_REQUEST
// with the reason, the valid ones are stored together. With the authorizer off the
// ACL APIs answer SECURITY_DISABLED, as Kafka does without an authorizer.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 30, min: 0, max: 3, blocking: true, handle: answer((*Server).handleCreateACLs)})
}

// aclStore is the store's ACLStore for an ACL API (name) that needs op on the cluster, or
// the code and message refusing the request.
func (s *Server) aclStore(ctx context.Context, name string, op acl.Operation) (metadata.ACLStore, int16, *string) {
	if s.cfg.Authorizer == nil {
		return nil, kerr.SecurityDisabled.Code, aclStr("no authorizer is configured on this broker (--authorizer acl)")
	}
	st, ok := s.meta.(metadata.ACLStore)
	if !ok {
		return nil, kerr.SecurityDisabled.Code, aclStr("this broker's metadata store keeps no ACLs")
	}
	if !allowedCluster(ctx, op) {
		return nil, kerr.ClusterAuthorizationFailed.Code, aclStr(fmt.Sprintf("%s needs %s on the cluster", name, op))
	}
	return st, 0, nil
}

func aclStr(s string) *string { return &s }

func (s *Server) handleCreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	fail := func(i int, code int16, msg *string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
	}
	store, code, msg := s.aclStore(ctx, "CreateAcls", acl.OpAlter)
	if code != 0 {
		for i := range resp.Results {
			fail(i, code, msg)
		}
		return resp
	}
	var bindings []acl.Binding
	var which []int
	for i, c := range req.Creations {
		b := acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName, PatternType: acl.PatternType(c.ResourcePatternType),
			Principal: security.Principal(c.Principal), Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType),
		}
		if req.Version == 0 {
			b.PatternType = acl.PatternLiteral
		}
		if err := b.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, errMessage(err))
			continue
		}
		bindings = append(bindings, b)
		which = append(which, i)
	}
	if len(bindings) == 0 {
		return resp
	}
	if err := store.CreateACLs(ctx, bindings); err != nil {
		for _, i := range which {
			fail(i, kafkaCode(err), errMessage(err))
		}
		return resp
	}
	s.log.Info("ACLs created", "principal", acl.FromContext(ctx).Principal, "count", len(bindings))
	return resp
}
