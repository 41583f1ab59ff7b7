package ctlclient

import (
	"context"
	"errors"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

var _ metadata.ScramStore = (*Client)(nil)

// AlterScram implements metadata.ScramStore through POST /v1/scram, then waits until
// this client's View has the change (so a login on this broker right after succeeds).
// A deletion refused as not found after an ambiguous attempt (one that may have been
// applied) counts as done: the earlier attempt deleted it.
func (c *Client) AlterScram(ctx context.Context, alterations []metadata.ScramAlteration) ([]metadata.ScramResult, error) {
	var resp ctlwire.ScramResponse
	info, err := c.call(ctx, http.MethodPost, ctlwire.PathScram, ctlwire.ScramRequest{Alterations: alterations}, &resp)
	if err != nil {
		return nil, err
	}
	deletes := map[string]bool{}
	for _, a := range alterations {
		deletes[a.User] = a.Delete
	}
	out := make([]metadata.ScramResult, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = ctlwire.ScramResultFromWire(r)
		if info.ambiguous && deletes[r.User] && errors.Is(out[i].Err, metadata.ErrScramNotFound) {
			out[i].Err = nil
		}
	}
	c.waitVersion(ctx, resp.Version)
	return out, nil
}
