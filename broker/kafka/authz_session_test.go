package kafka

import (
	"net"
	"testing"

	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

// The authorizer session is made once per connection and made again when the
// connection's principal changes (SASL after an anonymous start), never reused for
// another principal.
func TestSessionCachedPerPrincipal(t *testing.T) {
	s := &Server{cfg: Config{Authorizer: acl.NewAuthorizer(nil, false)}}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{s: s, nc: a}
	anon := security.Anonymous
	c.principal.Store(&anon)
	s1 := s.session(c)
	if s1 == nil || s1.Principal != security.Anonymous || s.session(c) != s1 {
		t.Fatalf("session %+v not made once for the connection", s1)
	}
	c.setPrincipal(security.User("alice"))
	s2 := s.session(c)
	if s2 == s1 || s2.Principal != security.User("alice") {
		t.Fatalf("after authenticating as alice the session is %+v", s2)
	}
	if s.session(c) != s2 {
		t.Fatal("alice's session made again")
	}
}
