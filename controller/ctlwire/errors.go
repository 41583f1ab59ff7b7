package ctlwire

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/weir-io/weir/metadata"
)

// The API's errors of its own; the metadata sentinels cover the rest. A controller
// answers them as codes (NewAPIError) and a client turns the codes back into them
// (APIError.ToError), so both sides match the same values with errors.Is.
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
	// ErrUnauthenticated: the caller presented no valid cluster token and no verified
	// client certificate. Not retried: the credentials are wrong everywhere.
	ErrUnauthenticated = errors.New("controller: unauthenticated")
	// ErrNotFound: no such endpoint.
	ErrNotFound = errors.New("controller: no such endpoint")
	// ErrInternal: a controller's own fault (a handler panicked, an unexpected value),
	// and what an unknown code turns into.
	ErrInternal = errors.New("controller: internal error")
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
	{"unknown_broker", metadata.ErrUnknownBroker, http.StatusNotFound},
	{"broker_state", metadata.ErrBrokerState, http.StatusConflict},
	{CodeNotLeader, ErrNotLeader, http.StatusServiceUnavailable},
	{CodeUnavailable, ErrUnavailable, http.StatusServiceUnavailable},
	{"bad_request", ErrBadRequest, http.StatusBadRequest},
	{"not_found", ErrNotFound, http.StatusNotFound},
	{CodeUnauthenticated, ErrUnauthenticated, http.StatusUnauthorized},
	{CodeInternal, ErrInternal, http.StatusInternalServerError},
}

// The codes a client looks at itself (retries, start-up).
const (
	CodeNotLeader       = "not_leader"
	CodeUnavailable     = "unavailable"
	CodeUnauthenticated = "unauthenticated"
	CodeInternal        = "internal"
)

// APIError is the body of every non-2xx answer. Also lists the codes of further
// sentinels the error matches (e.g. "fenced" beside "object_rejected").
type APIError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Also    []string `json:"also,omitempty"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// NewAPIError is err's answer and HTTP status: its first matching code ("internal" if
// none), the others in Also.
func NewAPIError(err error) (*APIError, int) {
	code, status := CodeInternal, http.StatusInternalServerError
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			code, status = c.code, c.status
			break
		}
	}
	ae := &APIError{Code: code, Message: err.Error()}
	for _, c := range errorCodes {
		if c.code != code && errors.Is(err, c.err) {
			ae.Also = append(ae.Also, c.code)
		}
	}
	return ae, status
}

// APIErrors turns per-item errors of a batch into their answers (nil for nil), n of
// them.
func APIErrors(errs []error, n int) []*APIError {
	out := make([]*APIError, n)
	for i, err := range errs[:min(len(errs), n)] {
		if err != nil {
			out[i], _ = NewAPIError(err)
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
	return ErrInternal
}

// AsError is ToError for a per-item answer of a batch, where nil means success.
func (e *APIError) AsError() error {
	if e == nil {
		return nil
	}
	return e.ToError()
}

// ToError turns an error answer back into an error matching its code's sentinel and
// those of Also.
func (e *APIError) ToError() error {
	errs := []error{codeError(e.Code)}
	for _, code := range e.Also {
		if err := codeError(code); err != ErrInternal {
			errs = append(errs, err)
		}
	}
	// The message is usually the server's wrapped error, which starts with the sentinel's
	// own text: said once ("metadata: partition move refused: ..."), not twice.
	msg := e.Message
	if head := errs[0].Error(); !strings.HasPrefix(msg, head) {
		msg = fmt.Sprintf("%s (%s)", head, e.Message)
	}
	return &remoteError{msg: msg, errs: errs}
}

// Retriable reports whether a client should try again (another controller, later).
func (e *APIError) Retriable() bool { return e.Code == CodeNotLeader || e.Code == CodeUnavailable }

// remoteError is an error answer turned back into an error: it matches every sentinel
// it was answered with.
type remoteError struct {
	msg  string
	errs []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.errs }

// IsDialError reports whether err is a failure to connect: the request never reached
// the controller, so trying another one cannot apply it twice.
func IsDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
