package controller

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	"github.com/weir-io/weir/security/token"
)

// TestAPIConfigRefusesOpenSetups: the settings that left the controller API open or sent
// the cluster token in the clear are refused at start.
func TestAPIConfigRefusesOpenSetups(t *testing.T) {
	tlsFiles := tlsconf.Files{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem"}
	for name, mod := range map[string]func(*Config){
		"authorizer acl, API open":                func(c *Config) { c.Authorizer = "acl" },
		"token over plain HTTP":                   func(c *Config) { c.TokenFile = "t" },
		"authorizer acl, token over plain HTTP":   func(c *Config) { c.Authorizer, c.TokenFile = "acl", "t" },
		"client certificates without principals":  func(c *Config) { c.TLS = tlsFiles; c.TLS.ClientAuth = "require" },
		"unknown authorizer":                      func(c *Config) { c.Authorizer = "allow-all" },
		"principal mapping rule without its ends": func(c *Config) { c.TLS = tlsFiles; c.PrincipalRules = "RULE:^CN=(.*)$" },
	} {
		cfg := DefaultConfig()
		cfg.Peers = Peers{{ID: 1, RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}
		mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: Validate: %v, want ErrBadConfig", name, err)
		}
	}
	for name, mod := range map[string]func(*Config){
		"authorizer acl, token over TLS": func(c *Config) { c.Authorizer, c.TokenFile, c.TLS = "acl", "t", tlsFiles },
		"authorizer acl, client certificates": func(c *Config) {
			c.Authorizer, c.TLS, c.CertPrincipals = "acl", tlsFiles, []string{"CN=a"}
			c.TLS.ClientAuth = "require"
		},
		"token over plain HTTP, explicitly wanted": func(c *Config) { c.TokenFile, c.InsecurePlaintextToken = "t", true },
	} {
		cfg := DefaultConfig()
		cfg.Peers = Peers{{ID: 1, RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}
		mod(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
	}
}

// TestAPISecureAttacks mounts issue 20's attacks on a controller quorum set up as the
// brokers' ACLs need (--authorizer acl, token, TLS, client certificates of listed
// principals), over real TCP: an unauthenticated caller granting itself ALL on the
// cluster or reading /v1/metadata (SCRAM keys) is refused; so is one sending the raw
// cluster token or the peer key as its bearer (the keys are separate
// derivations), and one presenting a certificate of the controllers' CA whose principal
// is not listed. The holder of the controller-API key, and of a listed certificate, is
// served.
func TestAPISecureAttacks(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("controller", "controller")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.Issue("admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := ca.Issue("mallory", "mallory") // the same CA: e.g. a broker's Kafka client certificate
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "cluster.token")
	writeTokenFile(t, tokFile, tokenA)
	tc := newTestCluster(t, 3, func(c *Config) {
		c.Authorizer, c.TokenFile = "acl", tokFile
		c.TLS = tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: "request"}
		c.CertPrincipals = []string{"CN=admin"}
	})
	leader := tc.waitLeader()
	https := func(p *tlstest.Pair) *http.Client {
		f := tlsconf.Files{CAFile: ca.CAFile}
		if p != nil {
			f.CertFile, f.KeyFile = p.CertFile, p.KeyFile
		}
		src, err := tlsconf.New(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: src.Client()}}
	}
	grantAll := ctlwire.CreateACLsRequest{Bindings: []acl.Binding{{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral,
		Principal: security.User("mallory"), Host: "*", Operation: acl.OpAll, Permission: acl.Allow}}}
	call := func(hc *http.Client, method, path, rawBearer string, body any) int {
		t.Helper()
		req, err := http.NewRequest(method, "https://"+tc.peers[leader].APIAddr+path, strings.NewReader(jsonOf(t, body)))
		if err != nil {
			t.Fatal(err)
		}
		if rawBearer != "" {
			req.Header.Set("Authorization", "Bearer "+rawBearer)
		}
		status, _, err := doCall(hc, req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return status
	}
	f, _ := token.Static(tokenA)
	for name, hc := range map[string]struct {
		hc     *http.Client
		bearer string
	}{
		"no credentials":                  {https(nil), ""},
		"the raw cluster token":           {https(nil), tokenA},
		"the peer key, base64url":         {https(nil), bearerOfKey(f.Key(token.PurposePeer))},
		"a certificate of an unlisted CN": {https(&mallory), ""},
	} {
		if s := call(hc.hc, "POST", "/v1/acls", hc.bearer, grantAll); s != http.StatusUnauthorized {
			t.Errorf("%s: POST /v1/acls granting ALL: HTTP %d, want 401", name, s)
		}
		if s := call(hc.hc, "GET", "/v1/metadata?consistent=1", hc.bearer, nil); s != http.StatusUnauthorized {
			t.Errorf("%s: GET /v1/metadata: HTTP %d, want 401", name, s)
		}
	}
	if n := tc.ctrls[leader].View().ACLs.Len(); n != 0 {
		t.Fatalf("%d ACLs after the refused grants", n)
	}
	// Plain HTTP is not served at all.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + tc.peers[leader].APIAddr + "/v1/metadata"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered")
		}
	}
	if s := call(https(nil), "GET", "/v1/metadata?consistent=1", f.Bearer(), nil); s != http.StatusOK {
		t.Errorf("the controller-API key: HTTP %d, want 200", s)
	}
	if s := call(https(&admin), "GET", "/v1/metadata?consistent=1", "", nil); s != http.StatusOK {
		t.Errorf("the listed admin certificate: HTTP %d, want 200", s)
	}
}

func jsonOf(t *testing.T, v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bearerOfKey(k []byte) string { return base64.RawURLEncoding.EncodeToString(k) }
