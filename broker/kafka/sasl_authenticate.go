package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/sasl"
)

// SaslAuthenticate (key 36), versions 0-2: one step of the exchange SaslHandshake began.
// When the exchange completes the connection's principal becomes User:<name> and, with a
// session lifetime, v1+ answers carry session_lifetime_ms (KIP-368). A failure is
// answered with SASL_AUTHENTICATION_FAILED and a message that does not say whether the
// user or the password was wrong, then the connection is closed. Non-blocking: it runs
// on the reader goroutine (PLAIN's password derivation, a few milliseconds, holds up
// this connection only).
func init() {
	register(api{key: 36, min: 0, max: 2, handle: handleSaslAuthenticate})
}

const (
	msgAuthFailed = "Authentication failed: invalid username or password"
	msgMalformed  = "Authentication failed: malformed SASL message"
)

func handleSaslAuthenticate(s *Server, c *conn, sl *slot, req kmsg.Request) {
	r := req.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st := &c.sasl
	fail := func(code int16, msg, result string) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		if result != "" {
			s.sasl.attempts.WithLabelValues(s.sasl.mechanismLabel(st.mechanism), result).Inc()
			s.log.Info("SASL authentication failed; closing", "remote", c.nc.RemoteAddr().String(), "mechanism", s.sasl.mechanismLabel(st.mechanism), "result", result)
		}
		// The answer goes out, then the connection closes; until then nothing else is
		// served on it (a failed re-authentication loses the earlier one).
		st.session, st.mechanism, st.user = nil, "", ""
		sl.closeIt = true
		if code != kerr.SaslAuthenticationFailed.Code {
			sl.respond(resp)
			return
		}
		// A failed authentication is answered late (sasl_gate.go); the reader goes on
		// and refuses whatever comes next (saslConn.failed), the writer waits for it.
		st.failed = true
		s.sasl.delayed.Inc()
		time.AfterFunc(s.sasl.cfg.FailedDelay, func() { sl.respond(resp) })
	}
	if c.lis == nil || !c.lis.SASL {
		msg := "SaslAuthenticate on a listener without SASL"
		resp.ErrorCode, resp.ErrorMessage = kerr.IllegalSaslState.Code, &msg
		sl.respond(resp)
		return
	}
	if st.session == nil {
		fail(kerr.IllegalSaslState.Code, "SaslAuthenticate without a SaslHandshake naming the mechanism first", "")
		return
	}
	out, done, err := st.session.Step(r.SASLAuthBytes)
	if err != nil {
		msg, result := msgAuthFailed, "failed"
		if errors.Is(err, sasl.ErrMalformed) {
			msg, result = msgMalformed, "malformed"
		}
		fail(saslStepCode(err), msg, result)
		return
	}
	resp.SASLAuthBytes = out
	if !done {
		sl.respond(resp)
		return
	}
	user := st.session.User()
	reauth := st.user != ""
	if reauth && user != st.user {
		fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed: cannot change principals during re-authentication", "principal_change")
		return
	}
	result := "ok"
	if reauth {
		result = "reauthenticated"
	}
	s.sasl.attempts.WithLabelValues(st.mechanism, result).Inc()
	st.session, st.mechanism, st.user = nil, "", user
	c.setPrincipal(security.User(user))
	st.expires = time.Time{}
	if life := s.sasl.cfg.SessionLifetime; life > 0 {
		// A v0 client cannot be told: it is closed at its first request after the
		// lifetime, as in Kafka.
		st.expires = time.Now().Add(life)
		if r.Version >= 1 {
			resp.SessionLifetimeMillis = life.Milliseconds()
		}
	}
	sl.respond(resp)
}
