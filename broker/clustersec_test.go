package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// TestValidateClusterNeedsToken (issue 20, item 1): a cluster broker with a SASL
// listener or the authorizer on and no cluster token refuses to start, with a message
// that says how to fix it; with a token, or with neither on, it starts.
func TestValidateClusterNeedsToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(c *Config)
		refuse bool
	}{
		{"plaintext", func(c *Config) {}, false},
		{"authorizer", func(c *Config) { c.ACL.Authorizer = "acl" }, true},
		{"sasl main", func(c *Config) { c.ListenProtocol = metadata.ProtocolSASLPlaintext }, true},
		{"sasl named", func(c *Config) {
			c.Listeners = []NamedListener{{Name: "EXT", Protocol: metadata.ProtocolSASLSSL, Listen: "127.0.0.1:0"}}
		}, true},
		{"authorizer with token", func(c *Config) { c.ACL.Authorizer = "acl"; c.ClusterTokenFile = "/etc/weir/token" }, false},
	} {
		c := DefaultConfig()
		tc.set(&c)
		err := c.ValidateCluster()
		if got := err != nil; got != tc.refuse {
			t.Fatalf("%s: err %v, want refusal %v", tc.name, err, tc.refuse)
		}
		if err != nil && (!errors.Is(err, ErrNoClusterToken) || !strings.Contains(err.Error(), "--cluster-token-file") || !strings.Contains(err.Error(), "weir dev --secure")) {
			t.Fatalf("%s: message does not say how to fix it: %v", tc.name, err)
		}
	}
}
