package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/security/acl"
)

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

// maxACLsPerRequest bounds one change (the body limit bounds it too).
const maxACLsPerRequest = 1000

func (c *Controller) aclRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/acls", writeAs[CreateACLsRequest](c, c.handleCreateACLs))
	mux.HandleFunc("POST /v1/acls/delete", writeAs[DeleteACLsRequest](c, c.handleDeleteACLs))
	mux.HandleFunc("GET /v1/acls", func(w http.ResponseWriter, r *http.Request) {
		v := c.fsm.View()
		writeJSON(w, http.StatusOK, ACLsResponse{Bindings: v.ACLSet().Bindings(), Version: v.Version})
	})
}

func (c *Controller) handleCreateACLs(r *http.Request, body []byte) (any, error) {
	var req CreateACLsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Bindings) == 0 || len(req.Bindings) > maxACLsPerRequest {
		return nil, fmt.Errorf("%w: %d bindings (must be 1..%d)", ErrBadRequest, len(req.Bindings), maxACLsPerRequest)
	}
	res, err := c.propose(&createACLsCmd{Bindings: req.Bindings})
	if err != nil {
		return nil, err
	}
	return VersionResponse{Version: res.Version}, nil
}

func (c *Controller) handleDeleteACLs(r *http.Request, body []byte) (any, error) {
	var req DeleteACLsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Filters) == 0 || len(req.Filters) > maxACLsPerRequest {
		return nil, fmt.Errorf("%w: %d filters (must be 1..%d)", ErrBadRequest, len(req.Filters), maxACLsPerRequest)
	}
	res, err := c.propose(&deleteACLsCmd{Filters: req.Filters})
	if err != nil {
		return nil, err
	}
	matched, _ := res.Value.([][]acl.Binding)
	return DeleteACLsResponse{Matched: matched, Version: res.Version}, nil
}
