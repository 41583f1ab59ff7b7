// Package security holds what every part of Weir shares about who a caller is: the
// principal of a Kafka connection (after TLS client authentication or SASL) and of a
// caller of the controller API or of an inter-broker connection.
//
// Sub-packages: tlsconf (TLS configurations from certificate files, reloaded when the
// files change), tlstest (certificates for tests). SASL mechanisms and the ACL authorizer
// live in their own sub-packages; nothing here imports the broker or the controller.
package security

import "strings"

// Principal is a Kafka principal, "User:<name>" (Kafka's KafkaPrincipal as text).
type Principal string

// Anonymous is the principal of an unauthenticated connection (a plaintext or TLS
// listener without client certificates), as in Kafka.
const Anonymous Principal = "User:ANONYMOUS"

// User returns the principal of a user name.
func User(name string) Principal { return Principal("User:" + name) }

// Name is the principal's name without its type ("alice" of "User:alice").
func (p Principal) Name() string {
	if _, n, ok := strings.Cut(string(p), ":"); ok {
		return n
	}
	return string(p)
}

func (p Principal) String() string { return string(p) }
