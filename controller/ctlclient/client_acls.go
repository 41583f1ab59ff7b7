package ctlclient

import (
	"context"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

var _ metadata.ACLStore = (*Client)(nil)

// CreateACLs implements metadata.ACLStore. Adding a binding that exists changes
// nothing, so a retry after an ambiguous failure is harmless.
func (c *Client) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	for len(bindings) > 0 {
		n := min(len(bindings), ctlwire.MaxACLsPerRequest)
		var resp ctlwire.VersionResponse
		if _, err := c.call(ctx, http.MethodPost, ctlwire.PathACLs, ctlwire.CreateACLsRequest{Bindings: bindings[:n]}, &resp); err != nil {
			return err
		}
		c.waitVersion(ctx, resp.Version)
		bindings = bindings[n:]
	}
	return nil
}

// DeleteACLs implements metadata.ACLStore. A retry of a delete whose answer was lost
// matches nothing the second time: the bindings reported are then those of the retry.
func (c *Client) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	var out [][]acl.Binding
	for len(filters) > 0 {
		n := min(len(filters), ctlwire.MaxACLsPerRequest)
		var resp ctlwire.DeleteACLsResponse
		if _, err := c.call(ctx, http.MethodPost, ctlwire.PathDeleteACLs, ctlwire.DeleteACLsRequest{Filters: filters[:n]}, &resp); err != nil {
			return out, err
		}
		c.waitVersion(ctx, resp.Version)
		matched := resp.Matched
		for len(matched) < n {
			matched = append(matched, nil)
		}
		out = append(out, matched[:n]...)
		filters = filters[n:]
	}
	return out, nil
}

// ACLs lists every binding, as the controller that answers has them (weir admin acl
// list).
func (c *Client) ACLs(ctx context.Context) ([]acl.Binding, error) {
	var resp ctlwire.ACLsResponse
	if _, err := c.call(ctx, http.MethodGet, ctlwire.PathACLs, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Bindings, nil
}
