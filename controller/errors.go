package controller

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-io/weir/metadata"
)

// Errors of the controller itself; the metadata sentinels cover the rest.
var (
	// ErrNotLeader: this controller is not the Raft leader and could not forward the
	// request (or it was already forwarded once). Retry, possibly on another controller.
	ErrNotLeader = errors.New("controller: not the leader")
	// ErrUnavailable: the outcome is unknown (leadership lost while applying, shutdown,
	// the leader unreachable mid-request). Retry; writes are safe to retry.
	ErrUnavailable = errors.New("controller: unavailable")
	// ErrBadRequest: malformed JSON, oversized body, or an invalid argument that has
	// no metadata sentinel.
	ErrBadRequest = errors.New("controller: bad request")
	// ErrClosed is returned by a closed Controller or Client.
	ErrClosed = errors.New("controller: closed")
	// ErrBadConfig: Config.Validate refused an injected Raft transport that cannot work
	// (the checks older than injection return plain "controller: ..." errors).
	ErrBadConfig = errors.New("controller: bad configuration")
	// ErrUnauthenticated: the caller presented no valid cluster token and no verified
	// client certificate (auth.go). Not retried: the credentials are wrong everywhere.
	ErrUnauthenticated = errors.New("controller: unauthenticated")

	errInvalidRequest = ErrBadRequest
	errNotFound       = errors.New("controller: no such endpoint")
	errInternal       = errors.New("controller: internal error")
)

// errorCodes maps errors to the API's error codes and HTTP statuses, 1:1 in both
// directions. The client turns a code back into the same sentinel. The first match is
// the error's code; later matches go into APIError.Also.
var errorCodes = []struct {
	code   string
	err    error
	status int
}{
	{"object_rejected", metadata.ErrObjectRejected, http.StatusConflict},
	{"topic_exists", metadata.ErrTopicExists, http.StatusConflict},
	{"unknown_topic", metadata.ErrUnknownTopic, http.StatusNotFound},
	{"invalid_topic", metadata.ErrInvalidTopic, http.StatusBadRequest},
	{"invalid_partitions", metadata.ErrInvalidPartitions, http.StatusBadRequest},
	{"invalid_replication", metadata.ErrInvalidReplication, http.StatusBadRequest},
	{"invalid_config", metadata.ErrInvalidConfig, http.StatusBadRequest},
	{"invalid_offset", metadata.ErrInvalidOffset, http.StatusBadRequest},
	{"not_available", metadata.ErrNotController, http.StatusServiceUnavailable},
	{"fenced", metadata.ErrFenced, http.StatusConflict},
	{"move_refused", metadata.ErrMoveRefused, http.StatusConflict},
	{"recovery_refused", metadata.ErrRecoveryRefused, http.StatusConflict},
	{"duplicate_broker", metadata.ErrDuplicateBroker, http.StatusConflict},
	{"acl_rejected", metadata.ErrACLRejected, http.StatusBadRequest},
	{"not_leader", ErrNotLeader, http.StatusServiceUnavailable},
	{"unavailable", ErrUnavailable, http.StatusServiceUnavailable},
	{"bad_request", ErrBadRequest, http.StatusBadRequest},
	{"not_found", errNotFound, http.StatusNotFound},
	{"unauthenticated", ErrUnauthenticated, http.StatusUnauthorized},
	{"internal", errInternal, http.StatusInternalServerError},
}

// APIError is the body of every non-2xx answer. Also lists the codes of further
// sentinels the error matches (e.g. "fenced" beside "object_rejected").
type APIError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Also    []string `json:"also,omitempty"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

func errorCode(err error) (string, int) {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	return "internal", http.StatusInternalServerError
}

// alsoCodes lists the codes other than primary that err matches.
func alsoCodes(err error, primary string) []string {
	var out []string
	for _, c := range errorCodes {
		if c.code != primary && errors.Is(err, c.err) {
			out = append(out, c.code)
		}
	}
	return out
}

// codeError turns an API error code back into its sentinel (wrapping the message).
func codeError(code string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return c.err
		}
	}
	return errInternal
}

// asError is toError for a per-item answer of a batch, where nil means success.
func (e *APIError) asError() error {
	if e == nil {
		return nil
	}
	return e.toError()
}

// toError turns an error answer back into an error matching its code's sentinel and
// those of Also.
func (e *APIError) toError() error {
	errs := []error{codeError(e.Code)}
	for _, code := range e.Also {
		if err := codeError(code); err != errInternal {
			errs = append(errs, err)
		}
	}
	return &remoteError{msg: fmt.Sprintf("%v (%s)", errs[0], e.Message), errs: errs}
}

// remoteError is an error answer: it matches every sentinel in errs.
type remoteError struct {
	msg  string
	errs []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.errs }

// retriable reports whether a client should try again (another controller, later).
func retriable(code string) bool { return code == "not_leader" || code == "unavailable" }
