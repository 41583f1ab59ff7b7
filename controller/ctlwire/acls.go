package ctlwire

import "github.com/weir-io/weir/security/acl"

// CreateACLsRequest is the body of POST /v1/acls.
type CreateACLsRequest struct {
	Bindings []acl.Binding `json:"bindings"`
}

// DeleteACLsRequest is the body of POST /v1/acls/delete.
type DeleteACLsRequest struct {
	Filters []acl.Filter `json:"filters"`
}

// DeleteACLsResponse lists, per filter, the bindings it matched (and deleted).
type DeleteACLsResponse struct {
	Matched [][]acl.Binding `json:"matched"`
	Version uint64          `json:"version"`
}

// ACLsResponse answers GET /v1/acls: every binding, at a version of this controller's
// state.
type ACLsResponse struct {
	Bindings []acl.Binding `json:"bindings"`
	Version  uint64        `json:"version"`
}
