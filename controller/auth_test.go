package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	"github.com/weir-io/weir/security/token"
)

const (
	tokenA = "token-a-0123456789abcdef"
	tokenB = "token-b-0123456789abcdef"
	tokenX = "token-x-wrong-0123456789"
)

func writeTokenFile(t testing.TB, path string, tokens ...string) {
	t.Helper()
	var b []byte
	for _, tok := range tokens {
		b = append(b, tok+"\n"...)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// bearer is what a client holding tok sends: the controller-API key derived from it.
func bearer(t testing.TB, tok string) string {
	t.Helper()
	f, err := token.Static(tok)
	if err != nil {
		t.Fatal(err)
	}
	return f.Bearer()
}

// rawCall sends one API request, authenticated as a holder of tok (when not ""), and
// returns the status and the APIError code.
func rawCall(t testing.TB, hc *http.Client, method, url, tok string, body any) (int, string, error) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+bearer(t, tok))
	}
	return doCall(hc, req)
}

func doCall(hc *http.Client, req *http.Request) (int, string, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var ae ctlwire.APIError
	json.NewDecoder(resp.Body).Decode(&ae)
	return resp.StatusCode, ae.Code, nil
}

// TestAPITokenAuth: with a cluster token file, every route but /v1/status refuses a
// caller without a valid bearer token, on the leader and on followers; a follower
// forwards an authenticated write to the leader (which checks it again); a broker
// client with the token registers and heartbeats, one without fails at once; a token
// added to the controllers' file while they run is accepted (rotation).
func TestAPITokenAuth(t *testing.T) {
	dir := t.TempDir()
	ctrlTokens := filepath.Join(dir, "controllers.token")
	writeTokenFile(t, ctrlTokens, tokenA, tokenB)
	tc := newTestCluster(t, 3, func(c *Config) {
		c.TokenFile, c.InsecurePlaintextToken = ctrlTokens, true
		c.LeaseTimeout, c.LeaseGrace = 500*time.Millisecond, 250*time.Millisecond
	})
	leader := tc.waitLeader()
	follower := tc.follower(leader)
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, i := range []int{leader, follower} {
		base := "http://" + tc.peers[i].APIAddr
		for _, tok := range []string{"", tokenX, tokenA[:len(tokenA)-1]} {
			for _, rt := range []struct{ method, path string }{
				{"GET", "/v1/metadata?consistent=1"},
				{"POST", "/v1/topics"},
				{"POST", "/v1/brokers/register"},
				{"DELETE", "/v1/topics/x"},
				{"GET", "/v1/balancer"},
				{"GET", "/v1/nothing-here"},
			} {
				status, code, err := rawCall(t, hc, rt.method, base+rt.path, tok, ctlwire.CreateTopicRequest{Name: "refused", Partitions: 1})
				if err != nil || status != http.StatusUnauthorized || code != "unauthenticated" {
					t.Errorf("controller %d: %s %s with token %q: status %d code %q err %v, want 401 unauthenticated", i+1, rt.method, rt.path, tok, status, code, err)
				}
			}
		}
		if status, _, err := rawCall(t, hc, "GET", base+"/v1/status", "", nil); err != nil || status != http.StatusOK {
			t.Errorf("controller %d: /v1/status without a token: %d %v, want 200 (left open for probes)", i+1, status, err)
		}
		if status, _, err := rawCall(t, hc, "GET", base+"/v1/metadata?consistent=1", tokenB, nil); err != nil || status != http.StatusOK {
			t.Errorf("controller %d: metadata with the second token: %d %v, want 200", i+1, status, err)
		}
	}
	if tc.ctrls[leader].View().Topics["refused"] != nil {
		t.Fatal("a refused create made a topic")
	}
	// A broker with the token registers and keeps its lease (heartbeats accepted) for
	// several lease periods.
	clientTokens := filepath.Join(dir, "client.token")
	writeTokenFile(t, clientTokens, tokenA)
	br := tc.client(7, func(c *ctlclient.ClientConfig) {
		c.TokenFile, c.InsecurePlaintextToken = clientTokens, true
		c.Rack = "a"
	})
	ctx := ctxT(t)
	if err := br.RegisterBroker(ctx, brokerFor(7, "a")); err != nil {
		t.Fatalf("register with the token: %v", err)
	}
	time.Sleep(2 * time.Second) // > 2 fencing timeouts (750 ms): only heartbeats keep it
	if b, ok := tc.ctrls[leader].View().Broker(7); !ok || !b.Active() || !br.LeaseValid(time.Now()) {
		t.Fatalf("broker 7 after 2 s of heartbeats with the token: %+v active=%v lease=%v", b, b.Active(), br.LeaseValid(time.Now()))
	}
	if _, err := br.CreateTopic(ctx, metadata.TopicSpec{Name: "by-client", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic with the token: %v", err)
	}

	// A write sent to a follower is forwarded; the leader authenticates it again.
	status, code, err := rawCall(t, hc, "POST", "http://"+tc.peers[follower].APIAddr+"/v1/topics", tokenA,
		ctlwire.CreateTopicRequest{Name: "via-follower", Partitions: 2, ReplicationFactor: 1, ID: metadata.NewTopicID()})
	if err != nil || status != http.StatusOK {
		t.Fatalf("create through follower %d: status %d code %q err %v", follower+1, status, code, err)
	}
	if tc.ctrls[leader].View().Topics["via-follower"] == nil {
		t.Fatal("the forwarded create did not reach the leader")
	}

	// Without a token, or with a wrong one, the client fails at once (no 30 s wait).
	wrong := filepath.Join(dir, "wrong.token")
	writeTokenFile(t, wrong, tokenX)
	for name, file := range map[string]string{"no token": "", "wrong token": wrong} {
		cfg := ctlclient.DefaultClientConfig()
		cfg.Controllers, cfg.TokenFile, cfg.StartTimeout, cfg.InsecurePlaintextToken = tc.apiAddrs(), file, 20*time.Second, true
		start := time.Now()
		cl, err := ctlclient.NewClient(cfg)
		if err == nil {
			cl.Close()
			t.Fatalf("%s: ctlclient.NewClient succeeded", name)
		}
		if !errors.Is(err, ctlwire.ErrUnauthenticated) {
			t.Fatalf("%s: ctlclient.NewClient: %v, want ErrUnauthenticated", name, err)
		}
		t.Logf("%s: refused after %v: %v", name, time.Since(start).Round(time.Millisecond), err)
	}

	// Rotation: the controllers' file gains the wrong token; within a reload period it
	// is accepted, without a restart.
	writeTokenFile(t, ctrlTokens, tokenA, tokenB, tokenX)
	testutil.EventuallyNoError(t, 10*time.Second, "the added token accepted", func() error {
		status, code, err := rawCall(t, hc, "GET", "http://"+tc.peers[leader].APIAddr+"/v1/metadata?consistent=1", tokenX, nil)
		if err == nil && status != http.StatusOK {
			err = errors.New(code)
		}
		return err
	})
}

// TestAPIMutualTLS: a controller API served over TLS with client certificates
// requested: a verified client certificate authenticates (also through a follower,
// which forwards over TLS with its own certificate), a bearer token does for a caller
// without one, and a caller with neither is refused; plain HTTP gets nowhere. With
// client certificates required, a caller without one fails the TLS handshake.
func TestAPIMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("controller", "controller")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue("admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "cluster.token")
	writeTokenFile(t, tokFile, tokenA)
	tc := newTestCluster(t, 3, func(c *Config) {
		c.TokenFile = tokFile
		c.TLS = tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: "request"}
		c.CertPrincipals = []string{"CN=admin"}
	})
	leader := tc.waitLeader()
	follower := tc.follower(leader)

	httpsClient := func(withCert bool) *http.Client {
		f := tlsconf.Files{CAFile: ca.CAFile}
		if withCert {
			f.CertFile, f.KeyFile = cli.CertFile, cli.KeyFile
		}
		src, err := tlsconf.New(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: src.Client()}}
	}
	withCert, noCert := httpsClient(true), httpsClient(false)
	for _, i := range []int{leader, follower} {
		base := "https://" + tc.peers[i].APIAddr
		if status, code, err := rawCall(t, noCert, "GET", base+"/v1/metadata?consistent=1", "", nil); err != nil || status != http.StatusUnauthorized || code != "unauthenticated" {
			t.Errorf("controller %d over TLS without certificate or token: %d %q %v, want 401", i+1, status, code, err)
		}
		if status, _, err := rawCall(t, noCert, "GET", base+"/v1/metadata?consistent=1", tokenA, nil); err != nil || status != http.StatusOK {
			t.Errorf("controller %d over TLS with the token: %d %v, want 200", i+1, status, err)
		}
		if status, _, err := rawCall(t, withCert, "GET", base+"/v1/metadata?consistent=1", "", nil); err != nil || status != http.StatusOK {
			t.Errorf("controller %d over TLS with a client certificate: %d %v, want 200", i+1, status, err)
		}
		if status, _, err := rawCall(t, &http.Client{Timeout: 5 * time.Second}, "GET", "http://"+tc.peers[i].APIAddr+"/v1/metadata?consistent=1", tokenA, nil); err == nil && status == http.StatusOK {
			t.Errorf("controller %d answered plain HTTP", i+1)
		}
	}
	// The controller client over TLS with a certificate and no token: a broker
	// registers, heartbeats and administers.
	br := tc.client(3, func(c *ctlclient.ClientConfig) {
		c.TLS = tlsconf.Files{CAFile: ca.CAFile, CertFile: cli.CertFile, KeyFile: cli.KeyFile}
	})
	ctx := ctxT(t)
	if err := br.RegisterBroker(ctx, brokerFor(3, "a")); err != nil {
		t.Fatalf("register over mutual TLS: %v", err)
	}
	if _, err := br.CreateTopic(ctx, metadata.TopicSpec{Name: "tls-client", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic over mutual TLS: %v", err)
	}

	// A certificate-authenticated write through a follower: forwarded over TLS.
	status, code, err := rawCall(t, withCert, "POST", "https://"+tc.peers[follower].APIAddr+"/v1/topics", "",
		ctlwire.CreateTopicRequest{Name: "tls-via-follower", Partitions: 1, ReplicationFactor: 1, ID: metadata.NewTopicID()})
	if err != nil || status != http.StatusOK {
		t.Fatalf("create through follower %d with a certificate: %d %q %v", follower+1, status, code, err)
	}

	// Required client certificates: the handshake itself refuses a caller without one.
	req := newTestCluster(t, 3, func(c *Config) {
		c.TLS = tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: "require"}
		// The controllers' own certificate too: with no token, a follower forwards with it.
		c.CertPrincipals = []string{"CN=admin", "CN=controller"}
	})
	rl := req.waitLeader()
	base := "https://" + req.peers[rl].APIAddr
	if status, _, err := rawCall(t, noCert, "GET", base+"/v1/metadata?consistent=1", tokenA, nil); err == nil {
		t.Errorf("required client certificates: a caller without one got HTTP %d", status)
	} else {
		t.Logf("without a client certificate: %v", err)
	}
	if status, _, err := rawCall(t, withCert, "GET", base+"/v1/metadata?consistent=1", "", nil); err != nil || status != http.StatusOK {
		t.Errorf("required client certificates: with one: %d %v, want 200", status, err)
	}
	// The balancer's state lives on the leader: a follower forwards the request,
	// authenticated by its own certificate alone (no token here).
	if status, code, err := rawCall(t, withCert, "GET", "https://"+req.peers[req.follower(rl)].APIAddr+"/v1/balancer", "", nil); err != nil || status != http.StatusOK {
		t.Errorf("required client certificates: forwarded by a follower: %d %q %v, want 200", status, code, err)
	}
}
