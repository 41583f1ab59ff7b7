package controller

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-io/weir/metadata"
)

// ScramRequest is the body of POST /v1/scram: SCRAM credential alterations (at most
// metadata.MaxScramAlterations), as AlterUserScramCredentials carries them once the
// broker (or weir admin user set) derived the keys.
type ScramRequest struct {
	Alterations []metadata.ScramAlteration `json:"alterations"`
}

// ScramResponse: one result per user, in order of first mention. Code is "" for
// success, else one of scram_not_found, scram_mechanism, scram_unacceptable,
// scram_duplicate (metadata.ErrScram*).
type ScramResponse struct {
	Results []ScramResultJSON `json:"results"`
	Version uint64            `json:"version"`
}

// ScramResultJSON is one user's result.
type ScramResultJSON struct {
	User    string `json:"user"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// scramCodes maps the per-user refusals to codes and back.
var scramCodes = []struct {
	code string
	err  error
}{
	{"scram_not_found", metadata.ErrScramNotFound},
	{"scram_mechanism", metadata.ErrScramMechanism},
	{"scram_unacceptable", metadata.ErrScramCredential},
	{"scram_duplicate", metadata.ErrScramDuplicate},
}

func scramResultToWire(r metadata.ScramResult) ScramResultJSON {
	out := ScramResultJSON{User: r.User}
	if r.Err == nil {
		return out
	}
	out.Code, out.Message = "internal", r.Err.Error()
	for _, c := range scramCodes {
		if errors.Is(r.Err, c.err) {
			out.Code = c.code
			break
		}
	}
	return out
}

func scramResultFromWire(r ScramResultJSON) metadata.ScramResult {
	out := metadata.ScramResult{User: r.User}
	if r.Code == "" {
		return out
	}
	out.Err = fmt.Errorf("%w (%s)", errInternal, r.Message)
	for _, c := range scramCodes {
		if c.code == r.Code {
			out.Err = &remoteError{msg: r.Message, errs: []error{c.err}}
			break
		}
	}
	return out
}

func (c *Controller) handleAlterScram(r *http.Request, body []byte) (any, error) {
	var req ScramRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Alterations) == 0 || len(req.Alterations) > metadata.MaxScramAlterations {
		return nil, fmt.Errorf("%w: %d alterations (must be 1..%d)", ErrBadRequest, len(req.Alterations), metadata.MaxScramAlterations)
	}
	res, err := c.propose(&alterScramCmd{Alterations: req.Alterations})
	if err != nil {
		return nil, err
	}
	results, ok := res.Value.([]metadata.ScramResult)
	if !ok {
		return nil, fmt.Errorf("%w: alter scram answered %T", errInternal, res.Value)
	}
	out := ScramResponse{Version: res.Version, Results: make([]ScramResultJSON, len(results))}
	for i, r := range results {
		out.Results[i] = scramResultToWire(r)
	}
	return out, nil
}
