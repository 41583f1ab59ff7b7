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
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/sasl"
)

// The front end's refusals of internal requests that come before any authentication
// (no cluster token, a SASL listener). The handshake itself, with broker/peer's format,
// is tested end to end in package broker (peerauth_test.go), which gives it to the front
// end.

// echoInternal answers every internal request with its own body and counts them.
type echoInternal struct {
	served atomic.Int64
}

func (e *echoInternal) ServeInternal(body []byte, respond func([]byte)) {
	e.served.Add(1)
	respond(body)
}

// Internal request bodies; without cluster tokens the front end does not read them.
var (
	challengeBody = []byte{5}                      // broker/peer's OpChallenge
	offsetsBody   = []byte{3, 0, 0, 0, 1, 0, 0, 0} // an opaque request the handler would answer
)

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
	for _, op := range [][]byte{challengeBody, offsetsBody} {
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
