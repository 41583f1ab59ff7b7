package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// The inter-broker authentication end to end: a Kafka front end given broker/peer's
// handshake as the broker gives it (peerHandshake), and peer clients (or hand-made frames)
// connecting to it.

// echoInternal answers every internal request with its own body and counts them.
type echoInternal struct {
	tokens [][]byte
	served atomic.Int64
}

func (e *echoInternal) ServeInternal(body []byte, respond func([]byte)) {
	e.served.Add(1)
	respond(body)
}

// auth is the authenticator the broker would give the front end with e's tokens.
func (e *echoInternal) auth() kafka.PeerAuthenticator {
	return peerHandshake{tokens: func() [][]byte { return e.tokens }}
}

var (
	linkTokenA = []byte("link-token-a-0123456789")
	linkTokenB = []byte("link-token-b-0123456789")
)

func startInternalServer(t *testing.T, h *echoInternal, lis kafka.Listener) string {
	t.Helper()
	s := kafka.NewServer(kafka.Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1},
		kafka.Deps{Internal: h, PeerAuth: h.auth(), Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	h := &echoInternal{tokens: [][]byte{linkTokenA, linkTokenB}}
	addr := startInternalServer(t, h, kafka.Listener{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tok := range [][]byte{linkTokenA, linkTokenB} {
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
	_, err := peerClient(t, addr, []byte("link-token-wrong-012345"), nil).Call(ctx, offsetsBody)
	if !errors.Is(err, peer.ErrAuth) || !errors.Is(err, peer.ErrUnavailable) {
		t.Fatalf("call with a wrong token: %v, want ErrAuth (not sent: ErrUnavailable)", err)
	}
	t.Logf("wrong token: %v", err)
	if n := h.served.Load(); n != 2 {
		t.Fatalf("handler served %d requests after the refused ones, want 2", n)
	}

	// By hand: an OpAuth without a challenge, and one replaying a proof made for another
	// connection's nonce, are refused (code 58) and the connection closed.
	r := dialLink(t, addr)
	r.sendInternal(1, []byte{peer.OpChallenge})
	_, nonce1, err := r.recv(5 * time.Second)
	if err != nil || len(nonce1) != peer.NonceLen {
		t.Fatalf("challenge: %x %v", nonce1, err)
	}
	req := peer.AuthRequest{Broker: 9, ClientNonce: peer.NewNonce()}
	req.MAC = peer.ClientMAC(linkTokenA, nonce1, req.ClientNonce, 9)
	r2 := dialLink(t, addr)
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
	r3 := dialLink(t, addr)
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
	addr := startInternalServer(t, h, kafka.Listener{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, nil, nil).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("call without authentication: %x %v", got, err)
	}
	_, err := peerClient(t, addr, linkTokenA, nil).Call(ctx, offsetsBody)
	if !errors.Is(err, peer.ErrAuth) {
		t.Fatalf("client with a token against a broker without: %v, want ErrAuth", err)
	}
	t.Logf("token against a broker without one: %v", err)
}

// TestInternalAuthTLS: links to a TLS listener: the peer client handshakes TLS
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
	h := &echoInternal{tokens: [][]byte{linkTokenA}}
	addr := startInternalServer(t, h, kafka.Listener{TLS: srv.Server()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, linkTokenA, cli).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("call over TLS: %x %v", got, err)
	}
	if _, err := peerClient(t, addr, linkTokenA, nil).Call(ctx, offsetsBody); err == nil {
		t.Fatal("a plaintext link to a TLS listener was answered")
	}
	other, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, _ := tlsconf.New(tlsconf.Files{CAFile: other.CAFile}, nil)
	if _, err := peerClient(t, addr, linkTokenA, wrongCA).Call(ctx, offsetsBody); err == nil {
		t.Fatal("a link verified against another CA was answered")
	}
	if n := h.served.Load(); n != 1 {
		t.Fatalf("handler served %d requests, want 1", n)
	}
}

// TestInternalOnlyOnInterBrokerListener (issue 20, item 1): with cluster tokens, a
// named listener (one for clients) serves no internal request, not even to a link that
// proves the token; the main listener does.
func TestInternalOnlyOnInterBrokerListener(t *testing.T) {
	h := &echoInternal{tokens: [][]byte{linkTokenA}}
	addr := startInternalServer(t, h, kafka.Listener{Name: "EXTERNAL"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := peerClient(t, addr, linkTokenA, nil).Call(ctx, offsetsBody); err == nil {
		t.Fatalf("a named listener served an internal request: %x", got)
	}
	refusedInternal(t, dialLink(t, addr), 1, "named listener")
	if n := h.served.Load(); n != 0 {
		t.Fatalf("handler served %d requests, want 0", n)
	}
	main := startInternalServer(t, h, kafka.Listener{})
	if got, err := peerClient(t, main, linkTokenA, nil).Call(ctx, offsetsBody); err != nil || string(got) != string(offsetsBody) {
		t.Fatalf("main listener: %x %v", got, err)
	}
}

// rawLink sends internal requests (key 10000, v0) by hand on one connection.
type rawLink struct {
	t  *testing.T
	nc net.Conn
}

func dialLink(t *testing.T, addr string) *rawLink {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawLink{t: t, nc: nc}
}

// sendInternal writes one internal request: size, key, version, correlation ID, a null
// client ID, the body.
func (r *rawLink) sendInternal(corr int32, body []byte) {
	r.t.Helper()
	b := make([]byte, 4, 16+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(kafka.InternalKey))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one answer within d: its correlation ID and body, or an error (a timeout,
// a closed connection).
func (r *rawLink) recv(d time.Duration) (int32, []byte, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	return kafkatest.ReadResponse(r.nc)
}

// refusedInternal sends an internal request that, were it served, would tell where a
// partition's batches sit (what a follow or a link needs), and checks the connection is
// closed without an answer.
func refusedInternal(t *testing.T, r *rawLink, corr int32, what string) {
	t.Helper()
	r.sendInternal(corr, offsetsBody)
	_, ans, err := r.recv(5 * time.Second)
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: internal request answered (%x) or left open (%v)", what, ans, err)
	}
}

// BenchmarkPeerConnect: the cost of opening a peer link and its first request, plain,
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
	}{{"plain", nil, false}, {"auth", linkTokenA, false}, {"tls+auth", linkTokenA, true}} {
		b.Run(bc.name, func(b *testing.B) {
			h := &echoInternal{}
			if bc.tok != nil {
				h.tokens = [][]byte{bc.tok}
			}
			lis := kafka.Listener{}
			if bc.tls {
				lis.TLS = srv.Server()
			}
			s := kafka.NewServer(kafka.Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1},
				kafka.Deps{Internal: h, PeerAuth: h.auth(), Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
