package kafka

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// echoInternal answers every internal request with its own body and counts them.
type echoInternal struct {
	tokens [][]byte
	served atomic.Int64
}

func (e *echoInternal) ServeInternal(body []byte, respond func([]byte)) {
	e.served.Add(1)
	respond(body)
}

func (e *echoInternal) PeerTokens() [][]byte { return e.tokens }

var (
	peerTokenA = []byte("peer-token-a-0123456789")
	peerTokenB = []byte("peer-token-b-0123456789")
)

func startInternalServer(t *testing.T, h *echoInternal, lis Listener) string {
	t.Helper()
	return startInternalServerCfg(t, h, lis, Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1})
}

func startInternalServerCfg(t *testing.T, h *echoInternal, lis Listener, cfg Config) string {
	t.Helper()
	s := NewServer(cfg,
		Deps{Internal: h, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ServeListener(ln, lis)
	t.Cleanup(s.Close)
	return ln.Addr().String()
}

func peerClient(t *testing.T, addr string, tok []byte, tlsc *tlsconf.Source) *peer.Client {
	cfg := peer.DefaultConfig()
	cfg.ClientID, cfg.BrokerID, cfg.Timeout = "weir-broker-9", 9, 5*time.Second
	if tok != nil {
		cfg.Token = func() []byte { return tok }
	}
	if tlsc != nil {
		cfg.TLS = tlsc.Client()
	}
	c := peer.NewClient(addr, cfg)
	t.Cleanup(c.Close)
	return c
}

var offsetsBody = peer.AppendOffsetsRequest(nil, []peer.PartitionRef{{Partition: 1}})

// TestInternalAuth: with cluster tokens, internal requests are served only on
// connections that passed the HMAC challenge (either token); a connection that did not
// authenticate, or proved a wrong token, or replayed another connection's proof, is
// refused and closed before the handler sees anything.
func TestInternalAuth(t *testing.T) {
	h := &echoInternal{tokens: [][]byte{peerTokenA, peerTokenB}}
	addr := startInternalServer(t, h, Listener{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tok := range [][]byte{peerTokenA, peerTokenB} {
		got, err := peerClient(t, addr, tok, nil).Call(ctx, offsetsBody)
		if err != nil || string(got) != string(offsetsBody) {
			t.Fatalf("authenticated call with token %q: %x %v", tok[:12], got, err)
		}
	}
	if n := h.served.Load(); n != 2 {
		t.Fatalf("handler served %d requests, want 2", n)
	}

	if _, err := peerClient(t, addr, nil, nil).Call(ctx, offsetsBody); !errors.Is(err, peer.ErrLost) {
		t.Fatalf("unauthenticated call: %v, want the connection closed (ErrLost)", err)
	}
	_, err := peerClient(t, addr, []byte("peer-token-wrong-012345"), nil).Call(ctx, offsetsBody)
	if !errors.Is(err, peer.ErrAuth) || !errors.Is(err, peer.ErrUnavailable) {
		t.Fatalf("call with a wrong token: %v, want ErrAuth (not sent: ErrUnavailable)", err)
	}
	t.Logf("wrong token: %v", err)
	if n := h.served.Load(); n != 2 {
		t.Fatalf("handler served %d requests after the refused ones, want 2", n)
	}

	// By hand: an OpAuth without a challenge, and one replaying a proof made for another
	// connection's nonce, are refused (code 58) and the connection closed.
	r := dialRaw(t, &Server{lns: []net.Listener{fakeAddrListener(addr)}})
	r.sendInternal(1, []byte{peer.OpChallenge})
	_, nonce1, err := r.recv(5 * time.Second)
	if err != nil || len(nonce1) != peer.NonceLen {
		t.Fatalf("challenge: %x %v", nonce1, err)
	}
	req := peer.AuthRequest{Broker: 9, ClientNonce: peer.NewNonce()}
	req.MAC = peer.ClientMAC(peerTokenA, nonce1, req.ClientNonce, 9)
	r2 := dialRaw(t, &Server{lns: []net.Listener{fakeAddrListener(addr)}})
	r2.sendInternal(1, []byte{peer.OpChallenge})
	if _, _, err := r2.recv(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	r2.sendInternal(2, req.AppendTo(nil)) // proof for r's nonce, not r2's
	if _, ans, err := r2.recv(5 * time.Second); err != nil || len(ans) != 2 || ans[1] != byte(peer.AuthFailedCode) {
		t.Fatalf("replayed proof: answer %x %v, want code 58", ans, err)
	}
	r2.sendInternal(3, offsetsBody)
	if _, ans, err := r2.recv(5 * time.Second); err == nil {
		t.Fatalf("the connection of a refused proof answered: %x", ans)
	}
	r3 := dialRaw(t, &Server{lns: []net.Listener{fakeAddrListener(addr)}})
	r3.sendInternal(1, req.AppendTo(nil)) // no challenge on this connection
	if _, ans, err := r3.recv(5 * time.Second); err != nil || len(ans) != 2 || ans[1] != byte(peer.AuthFailedCode) {
		t.Fatalf("proof without a challenge: answer %x %v, want code 58", ans, err)
	}
	// The original connection still authenticates with its own nonce, once.
	r.sendInternal(2, req.AppendTo(nil))
	if _, ans, err := r.recv(5 * time.Second); err != nil || len(ans) != 2+peer.MACLen || ans[0] != 0 || ans[1] != 0 {
		t.Fatalf("proof for its own nonce: answer %x %v", ans, err)
	}
	r.sendInternal(3, offsetsBody)
	if _, ans, err := r.recv(5 * time.Second); err != nil || string(ans) != string(offsetsBody) {
		t.Fatalf("request after authenticating by hand: %x %v", ans, err)
	}
	if n := h.served.Load(); n != 3 {
		t.Fatalf("handler served %d requests, want 3", n)
	}
}

// TestInternalAuthOff: a broker without cluster tokens serves internal requests of any
// connection (authentication off, the default), and a client that expects to
// authenticate refuses to use it rather than send its requests unauthenticated.
func TestInternalAuthOff(t *testing.T) {
	h := &echoInternal{}
	addr := startInternalServer(t, h, Listener{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, nil, nil).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("call without authentication: %x %v", got, err)
	}
	_, err := peerClient(t, addr, peerTokenA, nil).Call(ctx, offsetsBody)
	if !errors.Is(err, peer.ErrAuth) {
		t.Fatalf("client with a token against a broker without: %v, want ErrAuth", err)
	}
	t.Logf("token against a broker without one: %v", err)
}

// TestInternalAuthTLS: connections to a TLS listener: the peer client handshakes TLS
// (verifying the listener against the CA), then authenticates; a plaintext client gets
// nothing from the TLS listener.
func TestInternalAuthTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("broker", "broker")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tlsconf.New(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &echoInternal{tokens: [][]byte{peerTokenA}}
	addr := startInternalServer(t, h, Listener{TLS: srv.Server()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, peerTokenA, cli).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("call over TLS: %x %v", got, err)
	}
	if _, err := peerClient(t, addr, peerTokenA, nil).Call(ctx, offsetsBody); err == nil {
		t.Fatal("a plaintext connection to a TLS listener was answered")
	}
	other, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, _ := tlsconf.New(tlsconf.Files{CAFile: other.CAFile}, nil)
	if _, err := peerClient(t, addr, peerTokenA, wrongCA).Call(ctx, offsetsBody); err == nil {
		t.Fatal("a connection verified against another CA was answered")
	}
	if n := h.served.Load(); n != 1 {
		t.Fatalf("handler served %d requests, want 1", n)
	}
}

// fakeAddrListener lets dialRaw dial addr.
type fakeAddrListener string

func (a fakeAddrListener) Accept() (net.Conn, error) { return nil, errors.New("not a listener") }
func (a fakeAddrListener) Close() error              { return nil }
func (a fakeAddrListener) Addr() net.Addr {
	ap, _ := net.ResolveTCPAddr("tcp", string(a))
	return ap
}

// sendInternal writes one internal request (key 10000) by hand.
func (r *rawConn) sendInternal(corr int32, body []byte) {
	r.t.Helper()
	r.send(corr, &internalMsg{body: body})
}

// BenchmarkPeerConnect: the cost of opening a peer connection and its first request, plain,
// authenticated (two more round trips, three HMACs) and authenticated over TLS.
func BenchmarkPeerConnect(b *testing.B) {
	dir := b.TempDir()
	ca, _ := tlstest.NewCA(dir)
	pair, _ := ca.Issue("broker", "broker")
	srv, _ := tlsconf.New(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, nil)
	cli, _ := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	for _, bc := range []struct {
		name string
		tok  []byte
		tls  bool
	}{{"plain", nil, false}, {"auth", peerTokenA, false}, {"tls+auth", peerTokenA, true}} {
		b.Run(bc.name, func(b *testing.B) {
			h := &echoInternal{}
			if bc.tok != nil {
				h.tokens = [][]byte{bc.tok}
			}
			lis := Listener{}
			if bc.tls {
				lis.TLS = srv.Server()
			}
			s := NewServer(Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1},
				Deps{Internal: h, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s.ServeListener(ln, lis)
			defer s.Close()
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				cfg := peer.DefaultConfig()
				cfg.BrokerID = 9
				if bc.tok != nil {
					cfg.Token = func() []byte { return bc.tok }
				}
				if bc.tls {
					cfg.TLS = cli.Client()
				}
				c := peer.NewClient(ln.Addr().String(), cfg)
				if _, err := c.Call(ctx, offsetsBody); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// rawAt dials addr for hand-made requests.
func rawAt(t *testing.T, addr string) *rawConn {
	return dialRaw(t, &Server{lns: []net.Listener{fakeAddrListener(addr)}})
}

// refusedInternal sends an internal request that, were it served, would tell where a
// partition's batches sit (what a follow or a link needs), and checks the connection is
// closed without an answer.
func refusedInternal(t *testing.T, r *rawConn, corr int32, what string) {
	t.Helper()
	r.sendInternal(corr, offsetsBody)
	if _, ans, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatalf("%s: internal request answered (%x) or left open (%v)", what, ans, err)
	}
}

// TestInternalRefusedWithoutClusterToken (issue 20, item 1): a broker without a cluster
// token and with an authorizer on refuses internal requests from an anonymous client of
// its PLAINTEXT listener (which would read and link partitions past the ACLs), and a
// SASL listener refuses them from a logged-in user; neither reaches the handler.
func TestInternalRefusedWithoutClusterToken(t *testing.T) {
	h := &echoInternal{}
	addr := startInternalServerCfg(t, h, Listener{}, Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1,
		Authorizer: acl.NewAuthorizer(nil, false)})
	refusedInternal(t, rawAt(t, addr), 1, "anonymous client, authorizer on, no token")
	for _, op := range [][]byte{{peer.OpChallenge}, offsetsBody} {
		r := rawAt(t, addr)
		r.sendInternal(1, op)
		if _, ans, err := r.recv(5 * time.Second); err == nil {
			t.Fatalf("op %d answered without a token configured: %x", op[0], ans)
		}
	}

	hs := &echoInternal{}
	sh := startSASLServerWith(t, sasl.DefaultConfig(), nil, hs, nil)
	sh.addUser(t, "mallory", "pw", metadata.ScramSHA256)
	r := dialAddr(t, sh.addr)
	saslLogin(t, r, "mallory", "pw")
	refusedInternal(t, r, 9, "SASL user, no token")
	if n := h.served.Load() + hs.served.Load(); n != 0 {
		t.Fatalf("handlers served %d internal requests, want 0", n)
	}
	if got := testutil.ToFloat64(sh.s.internalRefusals.WithLabelValues("no_cluster_token")); got != 1 {
		t.Fatalf("refusals counted: %v, want 1", got)
	}
}

// TestInternalOnlyOnInterBrokerListener (issue 20, item 1): with cluster tokens, a
// named listener (one for clients) serves no internal request, not even to a connection that
// proves the token; the main listener does.
func TestInternalOnlyOnInterBrokerListener(t *testing.T) {
	h := &echoInternal{tokens: [][]byte{peerTokenA}}
	addr := startInternalServer(t, h, Listener{Name: "EXTERNAL"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, peerTokenA, nil).Call(ctx, offsetsBody); err == nil {
		t.Fatalf("a named listener served an internal request: %x", got)
	}
	refusedInternal(t, rawAt(t, addr), 1, "named listener")
	if n := h.served.Load(); n != 0 {
		t.Fatalf("handler served %d requests, want 0", n)
	}
	main := startInternalServer(t, h, Listener{})
	if got, err := peerClient(t, main, peerTokenA, nil).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("main listener: %x %v", got, err)
	}
}

// saslLogin authenticates r with SCRAM-SHA-256 by hand (franz-go's scram client).
func saslLogin(t *testing.T, r *rawConn, user, pass string) {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA256
	r.send(1, hs)
	if resp := r.expect(t, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %d", resp.ErrorCode)
	}
	sess, first, err := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	msg := first
	for corr := int32(2); ; corr++ {
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, msg
		r.send(corr, au)
		resp := r.expect(t, au).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %d", resp.ErrorCode)
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		msg = next
	}
}
