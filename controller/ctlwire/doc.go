// Package ctlwire is the controller API's wire format, shared by the controller (the
// server, package controller) and its client (package ctlclient), which import it and
// never each other: the paths (paths.go, with the route table), the JSON bodies
// (wire.go, acls.go, scram.go, balancer.go), the metadata watch's full Views and deltas
// and how a client applies them (view.go), the error codes and their sentinels in both
// directions (errors.go) and the limits both sides keep (limits.go).
package ctlwire
