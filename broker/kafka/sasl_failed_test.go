package kafka

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// saslStep sends a handshake for mech (when corr is 1) and one SaslAuthenticate.
func saslStep(t *testing.T, r *rawConn, corr int32, mech string, msg []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech
	r.send(corr, hs)
	if resp := r.expect(t, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %d", resp.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, msg
	r.send(corr+1, au)
	return r.expect(t, au).(*kmsg.SASLAuthenticateResponse)
}

// TestSASLLoginOracle (issue 20, item 7): SCRAM's first answer for an unknown user shows
// the same iteration count and salt length as a real user's (4096 here, as Kafka's tools
// make them), the same salt at every attempt; over real TCP.
func TestSASLLoginOracle(t *testing.T) {
	h := startSASLServer(t, sasl.DefaultConfig())
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)
	first := func(user string) (salt []byte, iterations string) {
		r := dialAddr(t, h.addr)
		resp := saslStep(t, r, 1, sasl.ScramSHA256, []byte("n,,n="+user+",r=abcdef"))
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: client-first refused: %d", user, resp.ErrorCode)
		}
		_, rest, _ := strings.Cut(string(resp.SASLAuthBytes), ",s=")
		s64, it, _ := strings.Cut(rest, ",i=")
		salt, err := base64.StdEncoding.DecodeString(s64)
		if err != nil {
			t.Fatal(err)
		}
		return salt, it
	}
	ks, ki := first("alice")
	gs, gi := first("ghost")
	gs2, _ := first("ghost")
	if ki != "4096" || gi != ki || len(gs) != len(ks) || string(gs) != string(gs2) {
		t.Fatalf("known: %d-byte salt, %s iterations; unknown: %d-byte salt, %s iterations (again: same salt %v)", len(ks), ki, len(gs), gi, string(gs) == string(gs2))
	}
}

// TestSASLFailedLoginDelayed (issue 20, item 7): a wrong PLAIN password and an unknown
// user are answered SASL_AUTHENTICATION_FAILED no sooner than the failed-authentication
// delay (a lower bound, 100 ms by default), counted, and the connection closes; a
// second guess pipelined behind the failed one on the same connection is never
// answered.
func TestSASLFailedLoginDelayed(t *testing.T) {
	h := startSASLServer(t, sasl.DefaultConfig())
	h.addUser(t, "alice", "right", metadata.ScramSHA256)
	for _, msg := range []string{"\x00alice\x00wrong", "\x00ghost\x00wrong"} {
		r := dialAddr(t, h.addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, sasl.Plain
		r.send(1, hs)
		r.expect(t, hs)
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, []byte(msg)
		start := time.Now()
		r.send(2, au)
		// The next guess, pipelined: a new handshake and the right password.
		r.send(3, hs)
		au2 := kmsg.NewPtrSASLAuthenticateRequest()
		au2.Version, au2.SASLAuthBytes = 1, []byte("\x00alice\x00right")
		r.send(4, au2)
		resp := r.expect(t, au).(*kmsg.SASLAuthenticateResponse)
		took := time.Since(start)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%q: code %d", msg, resp.ErrorCode)
		}
		if took < 90*time.Millisecond {
			t.Fatalf("%q: failure answered after %v, want at least the 100 ms delay", msg, took)
		}
		if _, ans, err := r.recv(5 * time.Second); err == nil || errors.Is(err, errTimeout(err)) {
			t.Fatalf("%q: the pipelined guess was answered (%x) or the connection left open (%v)", msg, ans, err)
		}
		t.Logf("%q: failure answered after %v", msg, took)
	}
	if got := testutil.ToFloat64(h.s.sasl.delayed); got != 2 {
		t.Fatalf("failed authentications counted: %v, want 2", got)
	}
	for _, p := range h.principals() {
		if p != "User:ANONYMOUS" {
			t.Fatalf("a connection authenticated as %s", p)
		}
	}
}
