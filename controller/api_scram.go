package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

func (c *Controller) handleAlterScram(r *http.Request, body []byte) (any, error) {
	var req ctlwire.ScramRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Alterations) == 0 || len(req.Alterations) > metadata.MaxScramAlterations {
		return nil, fmt.Errorf("%w: %d alterations (must be 1..%d)", ctlwire.ErrBadRequest, len(req.Alterations), metadata.MaxScramAlterations)
	}
	res, err := c.propose(&alterScramCmd{Alterations: req.Alterations})
	if err != nil {
		return nil, err
	}
	results, ok := res.Value.([]metadata.ScramResult)
	if !ok {
		return nil, fmt.Errorf("%w: alter scram answered %T", ctlwire.ErrInternal, res.Value)
	}
	out := ctlwire.ScramResponse{Version: res.Version, Results: make([]ctlwire.ScramResultJSON, len(results))}
	for i, r := range results {
		out.Results[i] = ctlwire.ScramResultToWire(r)
	}
	return out, nil
}
