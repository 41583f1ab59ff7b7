package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), versions 0-1. Names the mechanism the SaslAuthenticate
// exchanges that follow use (after v0 too: v0's raw-token flow is not served, see
// sasl_gate.go; v0 is advertised because librdkafka requires it in the range); on
// an authenticated connection it begins a re-authentication (KIP-368). Every answer
// lists the enabled mechanisms. Non-blocking: it runs on the reader goroutine, which
// owns conn.sasl.
func init() {
	register(api{key: 17, min: 0, max: 1, handle: handleSaslHandshake})
}

func handleSaslHandshake(s *Server, c *conn, sl *slot, req kmsg.Request) {
	r := req.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = s.sasl.auth.Mechanisms()
	st := &c.sasl
	switch {
	case c.lis == nil || !c.lis.SASL:
		// Kafka answers so on a listener without SASL, and carries on.
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case st.session != nil:
		// A second handshake before the first one's exchange ended.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		sl.closeIt = true
	default:
		sess, err := s.sasl.auth.Start(r.Mechanism)
		if err != nil {
			// Kafka closes the connection after this answer; the client may retry with
			// one of SupportedMechanisms on a new connection.
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			s.sasl.attempts.WithLabelValues(s.sasl.mechanismLabel(r.Mechanism), "unsupported_mechanism").Inc()
			s.log.Info("SASL handshake with an unsupported mechanism; closing", "remote", c.nc.RemoteAddr().String(), "mechanism", s.sasl.mechanismLabel(r.Mechanism))
			sl.closeIt = true
			break
		}
		st.session, st.mechanism = sess, r.Mechanism
	}
	sl.respond(resp)
}
