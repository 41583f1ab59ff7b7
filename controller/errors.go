package controller

import "errors"

// Errors of the controller itself that never cross the API; those that do, and their
// codes, are ctlwire's (ctlwire/errors.go), the metadata sentinels cover the rest.
var (
	// ErrClosed is returned by a closed Controller.
	ErrClosed = errors.New("controller: closed")
	// ErrBadConfig: Config.Validate refused an injected Raft transport that cannot work
	// (the checks older than injection return plain "controller: ..." errors).
	ErrBadConfig = errors.New("controller: bad configuration")
)
