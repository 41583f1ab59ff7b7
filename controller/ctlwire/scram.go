package ctlwire

import (
	"errors"
	"fmt"

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

// ScramResultToWire is r as a controller answers it.
func ScramResultToWire(r metadata.ScramResult) ScramResultJSON {
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

// ScramResultFromWire turns an answered result back into one whose error matches its
// code's sentinel.
func ScramResultFromWire(r ScramResultJSON) metadata.ScramResult {
	out := metadata.ScramResult{User: r.User}
	if r.Code == "" {
		return out
	}
	out.Err = fmt.Errorf("%w (%s)", ErrInternal, r.Message)
	for _, c := range scramCodes {
		if c.code == r.Code {
			out.Err = &remoteError{msg: r.Message, errs: []error{c.err}}
			break
		}
	}
	return out
}
