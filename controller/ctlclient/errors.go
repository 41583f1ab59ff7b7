package ctlclient

import "errors"

// Errors of the client itself; the controller's answers come back as ctlwire's
// sentinels and the metadata ones (ctlwire.APIError.ToError).
var (
	// ErrClosed is returned by a closed Client.
	ErrClosed = errors.New("controller client: closed")
	// ErrBadConfig: the client's configuration cannot work (a token without TLS; a lease
	// granted too short for the heartbeat interval; too few controller addresses).
	ErrBadConfig = errors.New("controller client: bad configuration")
)

// What went wrong with one controller (the Kind of a ControllerError, reach.go). A 401
// is ctlwire.ErrUnauthenticated.
var (
	// ErrRefused: nothing listens at the address (connection refused).
	ErrRefused = errors.New("controller client: connection refused")
	// ErrUnresolved: the address's host name does not resolve.
	ErrUnresolved = errors.New("controller client: host not found")
	// ErrTimeout: no answer in time (a dial or a request timed out).
	ErrTimeout = errors.New("controller client: timed out")
	// ErrSpeaksTLS: a plain-HTTP client met a TLS server (pass --controller-tls-ca).
	ErrSpeaksTLS = errors.New("controller client: the controller speaks TLS")
	// ErrNotTLS: a TLS client met a plain-HTTP server.
	ErrNotTLS = errors.New("controller client: the controller does not speak TLS")
	// ErrUnknownAuthority: the controller's certificate is not signed by a CA the client
	// trusts (--controller-tls-ca).
	ErrUnknownAuthority = errors.New("controller client: certificate signed by unknown authority")
	// ErrBadCertificate: the TLS handshake failed over a certificate (the server's name,
	// validity, or the client certificate the controller wants or refuses).
	ErrBadCertificate = errors.New("controller client: certificate refused")
	// ErrForbidden: the controller answered 403.
	ErrForbidden = errors.New("controller client: forbidden")
	// ErrNotAPI: something answered HTTP at the address, but not as a controller does.
	ErrNotAPI = errors.New("controller client: not a controller API")
	// ErrNoController: NewClient found no controller to take its first View from (a
	// StartError, which also matches each controller's failure).
	ErrNoController = errors.New("controller client: no controller answered")
)
