package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security/acl"
)

func (c *Controller) aclRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+ctlwire.PathACLs, writeAs[ctlwire.CreateACLsRequest](c, c.handleCreateACLs))
	mux.HandleFunc("POST "+ctlwire.PathDeleteACLs, writeAs[ctlwire.DeleteACLsRequest](c, c.handleDeleteACLs))
	mux.HandleFunc("GET "+ctlwire.PathACLs, func(w http.ResponseWriter, r *http.Request) {
		v := c.fsm.View()
		writeJSON(w, http.StatusOK, ctlwire.ACLsResponse{Bindings: v.ACLSet().Bindings(), Version: v.Version})
	})
}

func (c *Controller) handleCreateACLs(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CreateACLsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Bindings) == 0 || len(req.Bindings) > ctlwire.MaxACLsPerRequest {
		return nil, fmt.Errorf("%w: %d bindings (must be 1..%d)", ctlwire.ErrBadRequest, len(req.Bindings), ctlwire.MaxACLsPerRequest)
	}
	res, err := c.propose(&createACLsCmd{Bindings: req.Bindings})
	if err != nil {
		return nil, err
	}
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

func (c *Controller) handleDeleteACLs(r *http.Request, body []byte) (any, error) {
	var req ctlwire.DeleteACLsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Filters) == 0 || len(req.Filters) > ctlwire.MaxACLsPerRequest {
		return nil, fmt.Errorf("%w: %d filters (must be 1..%d)", ctlwire.ErrBadRequest, len(req.Filters), ctlwire.MaxACLsPerRequest)
	}
	res, err := c.propose(&deleteACLsCmd{Filters: req.Filters})
	if err != nil {
		return nil, err
	}
	matched, _ := res.Value.([][]acl.Binding)
	return ctlwire.DeleteACLsResponse{Matched: matched, Version: res.Version}, nil
}
