package ctlclient

import (
	"errors"

	"github.com/weir-io/weir/controller/ctlwire"
)

// Errors of the client itself; the controller's answers come back as ctlwire's
// sentinels and the metadata ones (ctlwire.APIError.ToError).
var (
	// ErrClosed is returned by a closed Client.
	ErrClosed = errors.New("controller client: closed")
	// ErrBadConfig: the client's configuration cannot work (a token without TLS; a lease
	// granted too short for the heartbeat interval; too few controller addresses).
	ErrBadConfig = errors.New("controller client: bad configuration")
)

// isUnauthenticated reports whether err is a controller's 401.
func isUnauthenticated(err error) bool {
	var ae *ctlwire.APIError
	return errors.Is(err, ctlwire.ErrUnauthenticated) || (errors.As(err, &ae) && ae.Code == ctlwire.CodeUnauthenticated)
}

// asSentinel turns an APIError into the error matching its code's sentinel.
func asSentinel(err error) error {
	var ae *ctlwire.APIError
	if errors.As(err, &ae) {
		return ae.ToError()
	}
	return err
}
