package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	fsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// saslServer is a front end whose only listener is SASL_PLAINTEXT, with a LocalStore
// (topic "t") that advertises that listener.
type saslHarness struct {
	s    *Server
	meta *metadata.LocalStore
	reg  *prometheus.Registry
	addr string
}

func startSASLServer(t *testing.T, cfg sasl.Config) *saslHarness {
	t.Helper()
	return startSASLServerTLS(t, cfg, nil)
}

// startSASLServerTLS is startSASLServer with a SASL_SSL listener when tc is set.
func startSASLServerTLS(t *testing.T, cfg sasl.Config, tc *tls.Config) *saslHarness {
	t.Helper()
	return startSASLServerWith(t, cfg, tc, nil, nil)
}

// startSASLServerWith is startSASLServerTLS with an internal handler (nil: none) and
// the front end's configuration changed by mod (nil: none).
func startSASLServerWith(t *testing.T, cfg sasl.Config, tc *tls.Config, internal InternalHandler, mod func(*Config)) *saslHarness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(t.TempDir(), "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: int32(port)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	gcfg := group.DefaultConfig()
	groups := group.New(gcfg, nopOffsets{}, allTopics{})
	t.Cleanup(groups.Close)
	reg := prometheus.NewRegistry()
	scfg := Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1, SASL: cfg}
	if mod != nil {
		mod(&scfg)
	}
	s := NewServer(scfg,
		Deps{Meta: meta, Backend: &fakeBackend{meta: meta}, Groups: groups, Registerer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Internal: internal})
	s.ServeListener(ln, Listener{SASL: true, TLS: tc})
	t.Cleanup(s.Close)
	return &saslHarness{s: s, meta: meta, reg: reg, addr: ln.Addr().String()}
}

// addUser stores password's credentials of mechanisms for user, as an admin would.
func (h *saslHarness) addUser(t *testing.T, user, password string, mechs ...metadata.ScramMechanism) {
	t.Helper()
	var alts []metadata.ScramAlteration
	for _, m := range mechs {
		c, err := sasl.NewCredential(m.String(), password, 4096)
		if err != nil {
			t.Fatal(err)
		}
		alts = append(alts, metadata.ScramAlteration{User: user, Mechanism: m,
			Credential: metadata.ScramCredential{Mechanism: m, Iterations: 4096, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}})
	}
	for _, a := range alts { // one alteration per user and request
		res, err := h.meta.AlterScram(context.Background(), []metadata.ScramAlteration{a})
		if err != nil || res[0].Err != nil {
			t.Fatalf("%v %v", res, err)
		}
	}
}

func (h *saslHarness) client(t *testing.T, m fsasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	o := []kgo.Opt{kgo.SeedBrokers(h.addr), kgo.RequestRetries(0), kgo.RetryTimeout(5 * time.Second), kgo.DefaultProduceTopic("t")}
	if m != nil {
		o = append(o, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(append(o, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// principals lists the principals of the server's open connections.
func (h *saslHarness) principals() []security.Principal {
	h.s.connsMu.Lock()
	defer h.s.connsMu.Unlock()
	var out []security.Principal
	for c := range h.s.conns {
		out = append(out, c.Principal())
	}
	return out
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSASLFranzMechanisms: franz-go logs in with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN
// over a SASL_PLAINTEXT listener and produces; the connection's principal is the user.
func TestSASLFranzMechanisms(t *testing.T) {
	h := startSASLServer(t, sasl.DefaultConfig())
	h.addUser(t, "alice", "wonder land", metadata.ScramSHA256, metadata.ScramSHA512)
	for name, m := range map[string]fsasl.Mechanism{
		"SCRAM-SHA-256": scram.Auth{User: "alice", Pass: "wonder land"}.AsSha256Mechanism(),
		"SCRAM-SHA-512": scram.Auth{User: "alice", Pass: "wonder land"}.AsSha512Mechanism(),
		"PLAIN":         plain.Auth{User: "alice", Pass: "wonder land"}.AsMechanism(),
	} {
		t.Run(name, func(t *testing.T) {
			cl := h.client(t, m)
			if err := cl.ProduceSync(ctx10(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			found := false
			for _, p := range h.principals() {
				found = found || p == security.User("alice")
			}
			if !found {
				t.Fatalf("no connection of User:alice among %v", h.principals())
			}
			cl.Close()
		})
	}
	if got := testutil.ToFloat64(h.s.sasl.attempts.WithLabelValues("SCRAM-SHA-512", "ok")); got < 1 {
		t.Fatalf("SCRAM-SHA-512 successes counted: %v", got)
	}
}

// TestSASLRefusals: a wrong password and an unknown user get SASL_AUTHENTICATION_FAILED
// with the same message, then the connection closes; a client without SASL, or with a
// mechanism that is not enabled, gets nothing served; failures are counted without user
// names.
func TestSASLRefusals(t *testing.T) {
	h := startSASLServer(t, sasl.Config{Mechanisms: []string{sasl.ScramSHA256, sasl.Plain}})
	h.addUser(t, "alice", "right", metadata.ScramSHA256)
	for name, m := range map[string]fsasl.Mechanism{
		"wrong password":     scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		"unknown user":       scram.Auth{User: "mallory", Pass: "right"}.AsSha256Mechanism(),
		"plain wrong":        plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		"plain unknown user": plain.Auth{User: "mallory", Pass: "right"}.AsMechanism(),
	} {
		t.Run(name, func(t *testing.T) {
			err := h.client(t, m).Ping(ctx10(t))
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
	t.Run("disabled mechanism", func(t *testing.T) {
		err := h.client(t, scram.Auth{User: "alice", Pass: "right"}.AsSha512Mechanism()).Ping(ctx10(t))
		if !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("ping: %v, want UNSUPPORTED_SASL_MECHANISM", err)
		}
	})
	t.Run("no SASL", func(t *testing.T) {
		cl := h.client(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err == nil {
			t.Fatal("a produce without authentication succeeded")
		}
	})

	// The same answer for both kinds of failure, then the connection closes.
	msgs := map[string]string{}
	for _, user := range []string{"alice", "mallory"} {
		r := dialAddr(t, h.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, sasl.Plain
		r.send(1, hs)
		resp := r.expect(t, hs).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("handshake: %d", resp.ErrorCode)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("\x00"+user+"\x00wrong")
		r.send(2, au)
		ar := r.expect(t, au).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil {
			t.Fatalf("%s: code %d", user, ar.ErrorCode)
		}
		msgs[user] = *ar.ErrorMessage
		if _, _, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
			t.Fatalf("%s: the connection stayed open after a failed authentication (%v)", user, err)
		}
	}
	if msgs["alice"] != msgs["mallory"] || strings.Contains(msgs["alice"], "alice") {
		t.Fatalf("messages tell the failures apart: %q vs %q", msgs["alice"], msgs["mallory"])
	}

	// A handshake with an unknown mechanism lists the enabled ones.
	r := dialAddr(t, h.addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	r.send(1, hs)
	resp := r.expect(t, hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "SCRAM-SHA-256,PLAIN" {
		t.Fatalf("handshake GSSAPI: %d %v", resp.ErrorCode, resp.SupportedMechanisms)
	}

	out, err := testutil.CollectAndFormat(h.reg, expfmt.TypeTextPlain, "weir_broker_sasl_authentications_total")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `result="failed"`) || strings.Contains(string(out), "alice") || strings.Contains(string(out), "mallory") || strings.Contains(string(out), "GSSAPI") {
		t.Fatalf("metrics:\n%s", out)
	}
	if got := testutil.ToFloat64(h.s.sasl.attempts.WithLabelValues("PLAIN", "failed")); got < 4 {
		t.Fatalf("PLAIN failures counted: %v", got)
	}
}

// TestSASLRequestsBeforeAuthentication: before authenticating, ApiVersions is answered
// but any other request closes the connection without an answer; a SaslAuthenticate
// without a handshake is refused.
func TestSASLRequestsBeforeAuthentication(t *testing.T) {
	h := startSASLServer(t, sasl.DefaultConfig())
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), kmsg.NewPtrCreateTopicsRequest()} {
		r := dialAddr(t, h.addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
		r.send(1, av)
		if resp := r.expect(t, av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %d", resp.ErrorCode)
		}
		req.SetVersion(0)
		if req.Key() == 50 || req.Key() == 19 {
			req.SetVersion(req.MaxVersion())
		}
		r.send(2, req)
		if _, _, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
			t.Fatalf("%s before authentication: answered or left open (%v)", kmsg.NameForKey(req.Key()), err)
		}
	}
	r := dialAddr(t, h.addr)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 1
	r.send(1, au)
	if resp := r.expect(t, au).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate without handshake: %d", resp.ErrorCode)
	}
	if got := testutil.ToFloat64(h.s.sasl.refused.WithLabelValues("unauthenticated")); got != 4 {
		t.Fatalf("closed unauthenticated connections counted: %v, want 4", got)
	}
}

// TestSASLReauthentication (KIP-368): with a session lifetime, franz-go re-authenticates
// on its connections and keeps working across several lifetimes; a client that does not
// re-authenticate is closed at its first request after the lifetime; a re-authentication
// as another user is refused.
func TestSASLReauthentication(t *testing.T) {
	const life = 2 * time.Second
	h := startSASLServer(t, sasl.Config{Mechanisms: sasl.Mechanisms, SessionLifetime: life})
	h.addUser(t, "alice", "pw", metadata.ScramSHA512)
	h.addUser(t, "bob", "pw", metadata.ScramSHA512)

	cl := h.client(t, scram.Auth{User: "alice", Pass: "pw"}.AsSha512Mechanism())
	deadline := time.Now().Add(2 * life)
	n := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctx10(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		n++
		time.Sleep(100 * time.Millisecond) // on purpose: produces paced over two session lifetimes
	}
	if got := testutil.ToFloat64(h.s.sasl.attempts.WithLabelValues("SCRAM-SHA-512", "reauthenticated")); got < 1 {
		t.Fatalf("no re-authentication in %v of %v sessions (%d produces)", 2*life, life, n)
	}
	if got := testutil.ToFloat64(h.s.sasl.refused.WithLabelValues("expired")); got != 0 {
		t.Fatalf("franz-go's connections were closed as expired %v times", got)
	}

	// A raw client authenticates with PLAIN (v1: told the lifetime), then re-authenticates
	// as bob: refused and closed.
	login := func(r *rawConn, user string, corr int32) *kmsg.SASLAuthenticateResponse {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, sasl.Plain
		r.send(corr, hs)
		if resp := r.expect(t, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("handshake: %d", resp.ErrorCode)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, []byte("\x00"+user+"\x00pw")
		r.send(corr+1, au)
		return r.expect(t, au).(*kmsg.SASLAuthenticateResponse)
	}
	r := dialAddr(t, h.addr)
	if resp := login(r, "alice", 1); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != life.Milliseconds() {
		t.Fatalf("login: code %d, session lifetime %d", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	r.send(3, md)
	r.expect(t, md)
	if resp := login(r, "alice", 4); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication as the same user: %d", resp.ErrorCode)
	}
	if resp := login(r, "bob", 6); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as bob: %d", resp.ErrorCode)
	}
	if _, _, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatal("still open after a refused re-authentication")
	}

	// No re-authentication: closed at the first request after the lifetime.
	r = dialAddr(t, h.addr)
	login(r, "alice", 1)
	r.send(3, md)
	r.expect(t, md)
	time.Sleep(life + 200*time.Millisecond) // on purpose: past the session's lifetime
	r.send(4, md)
	if _, _, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatalf("a request after the session expired was answered or left open (%v)", err)
	}
	if got := testutil.ToFloat64(h.s.sasl.refused.WithLabelValues("expired")); got != 1 {
		t.Fatalf("expired sessions closed: %v, want 1", got)
	}
}

func dialAddr(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// expect reads the next response and decodes it for req.
func (r *rawConn) expect(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	_, body, err := r.recv(10 * time.Second)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp, err := decode(req, body)
	if err != nil {
		t.Fatalf("decode %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// errTimeout returns a sentinel that err matches only when it is a timeout (so a test
// can tell "closed" from "nothing came").
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errNeverMatches
}

var errNeverMatches = errors.New("never matches")

// TestSASLScramAdminLocal: an authenticated kadm creates bob with
// AlterUserScramCredentials on a standalone broker (LocalStore), bob logs in; Describe
// and Alter answer Kafka's per-user codes.
func TestSASLScramAdminLocal(t *testing.T) {
	h := startSASLServer(t, sasl.DefaultConfig())
	h.addUser(t, "admin", "pw", metadata.ScramSHA256)
	adminCl := h.client(t, scram.Auth{User: "admin", Pass: "pw"}.AsSha256Mechanism())
	adm := kadm.NewClient(adminCl)
	ctx := ctx10(t)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}})
	if err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %+v %v", res, err)
	}
	if err := h.client(t, scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism()).Ping(ctx); err != nil {
		t.Fatalf("bob's login: %v", err)
	}
	if err := h.client(t, plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism()).Ping(ctx); err != nil {
		t.Fatalf("bob's PLAIN login: %v", err)
	}
	if c, _ := h.meta.View().Scram.Credential("bob", metadata.ScramSHA512); len(c.StoredKey) != 64 || c.Iterations != 4096 {
		t.Fatalf("stored %v", c)
	}

	d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"bob", "nobody", "admin", "admin"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		d.Users = append(d.Users, u)
	}
	dr, err := d.RequestWith(ctx, adminCl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, r := range dr.Results {
		codes[r.User] = r.ErrorCode
		if r.User == "bob" && (len(r.CredentialInfos) != 1 || r.CredentialInfos[0].Mechanism != 2 || r.CredentialInfos[0].Iterations != 4096) {
			t.Fatalf("bob: %+v", r.CredentialInfos)
		}
	}
	if len(dr.Results) != 3 || codes["bob"] != 0 || codes["nobody"] != kerr.ResourceNotFound.Code || codes["admin"] != kerr.DuplicateResource.Code {
		t.Fatalf("describe: %v", codes)
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("describe all: %+v %v", all, err)
	}

	a := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iter int32, salted int) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iter, []byte("salt"), make([]byte, salted)
		return u
	}
	a.Upsertions = append(a.Upsertions, up("few", 1, 4095, 32), up("many", 2, 16385, 64), up("mech", 0, 4096, 32), up("", 1, 4096, 32),
		up("short", 1, 4096, 31), up("twice", 1, 4096, 32), up("twice", 2, 4096, 64))
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "bob", 1 // bob has SHA-512 only
	a.Deletions = append(a.Deletions, del)
	ar, err := a.RequestWith(ctx, adminCl)
	if err != nil {
		t.Fatal(err)
	}
	codes = map[string]int16{}
	for _, r := range ar.Results {
		codes[r.User] = r.ErrorCode
	}
	want := map[string]int16{"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code,
		"": kerr.UnacceptableCredential.Code, "short": kerr.UnacceptableCredential.Code, "twice": kerr.DuplicateResource.Code, "bob": kerr.ResourceNotFound.Code}
	if len(codes) != len(want) {
		t.Fatalf("alter: %v", codes)
	}
	for u, c := range want {
		if codes[u] != c {
			t.Errorf("alter %q: %d, want %d", u, codes[u], c)
		}
	}
	if len(h.meta.View().Scram) != 2 {
		t.Fatalf("refused alterations changed the store: %v", h.meta.View().Scram.Names())
	}
}

// TestSASLOverTLS (SASL_SSL): SCRAM over a TLS listener; the principal is the SASL user.
func TestSASLOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("broker", "broker", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := startSASLServerTLS(t, sasl.DefaultConfig(), src.Server())
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)
	roots, err := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := h.client(t, scram.Auth{User: "alice", Pass: "pw"}.AsSha256Mechanism(), kgo.DialTLSConfig(roots.Client()))
	if err := cl.ProduceSync(ctx10(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	found := false
	for _, p := range h.principals() {
		found = found || p == security.User("alice")
	}
	if !found {
		t.Fatalf("principals %v", h.principals())
	}
	bad := h.client(t, scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(), kgo.DialTLSConfig(roots.Client()))
	if err := bad.Ping(ctx10(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password over TLS: %v", err)
	}
}
