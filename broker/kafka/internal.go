package kafka

// Internal (key 10000, version 0): Weir's inter-broker requests on the Kafka listener
// (a proxy's links to a partition's leader, queries of log ends, read replicas' follow
// requests; package broker/peer draws their format). The key lies far outside Kafka's
// range and is never advertised in ApiVersions, so clients never send it. The body is
// opaque here: Deps.Internal serves it on the connection's reader goroutine, so requests
// of one connection are handled in arrival order (links of a partition keep their
// order), and it answers later with the response body, from any goroutine. Without
// Deps.Internal the key is refused like any unknown one.
//
// Internal requests are not a client's and no ACL is checked for them (they read and
// link any partition's batches), so only another broker may send them:
//
//   - only on the inter-broker listener (Listener.InterBroker: the main one, which other
//     brokers dial); any other listener closes the connection at the first one;
//   - when links are authenticated (Deps.PeerAuth with cluster tokens), a connection must
//     pass the peer authentication (broker/peer/auth.go: a challenge, then a proof; the
//     broker package gives the front end that handshake as a PeerAuthenticator, which
//     answers its steps, while the front end keeps each connection's state) before any
//     other internal request reaches the handler; an unauthenticated one is refused and
//     the connection closed;
//   - without cluster tokens there is no broker identity to check: internal requests are
//     then served only where nothing else is checked either (no SASL on the listener, no
//     authorizer), so they give nobody more than a plain Fetch or Produce would. With
//     SASL or an authorizer on and no token they are refused (broker.Config refuses to
//     start a cluster broker so configured: peer connections would fail).
//
// These checks are per connection and happen on the reader goroutine, where the
// requests of a connection are dispatched in order.

import (
	"errors"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// InternalKey is the API key of Weir's inter-broker requests.
const InternalKey int16 = 10000

// InternalHandler serves inter-broker requests: it must call respond exactly once.
type InternalHandler interface {
	ServeInternal(body []byte, respond func(resp []byte))
}

// ErrorCode translates an error to the Kafka error code the handlers would answer with
// (for inter-broker answers, which carry codes).
func ErrorCode(err error) int16 { return kafkaCode(err) }

func init() {
	register(api{key: InternalKey, min: 0, max: 0, internal: true, newReq: func() kmsg.Request { return new(internalMsg) },
		handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
			if s.internal == nil {
				sl.closeIt = true
				sl.respond(nil)
				return
			}
			if reason := s.internalRefused(c); reason != "" {
				s.internalRefusals.WithLabelValues(reason).Inc()
				s.lim.badFrameLog.Warn("internal request refused; closing the connection", "remote", c.nc.RemoteAddr().String(),
					"client_id", sl.clientID, "reason", reason)
				sl.closeIt = true
				sl.respond(nil)
				return
			}
			s.peerBroker(c, sl.clientID)
			body := req.(*internalMsg).body
			if !s.authorizeInternal(c, sl, body) {
				return
			}
			s.internal.ServeInternal(body, func(b []byte) { sl.respond(&internalMsg{body: b}) })
		}})
}

// internalMsg is an inter-broker request or response body as kmsg sees it.
type internalMsg struct {
	version int16
	body    []byte
}

var errInternalEmpty = errors.New("kafka: empty internal request")

func (m *internalMsg) Key() int16               { return InternalKey }
func (m *internalMsg) MaxVersion() int16        { return 0 }
func (m *internalMsg) SetVersion(v int16)       { m.version = v }
func (m *internalMsg) GetVersion() int16        { return m.version }
func (m *internalMsg) IsFlexible() bool         { return false }
func (m *internalMsg) AppendTo(b []byte) []byte { return append(b, m.body...) }
func (m *internalMsg) ResponseKind() kmsg.Response {
	return &internalMsg{version: m.version}
}
func (m *internalMsg) RequestKind() kmsg.Request { return &internalMsg{version: m.version} }
func (m *internalMsg) ReadFrom(b []byte) error {
	if len(b) == 0 {
		return errInternalEmpty
	}
	m.body = b // the frame is this request's own buffer
	return nil
}

// PeerAuthenticator is the inter-broker authentication of internal requests
// (Deps.PeerAuth). The broker package implements it with broker/peer's handshake: the
// exchange's format and its cryptography are the authenticator's, while the front end
// keeps each connection's state (the challenge it was given, whether it passed) and
// decides what is served. So the front end does not import the inter-broker channel.
type PeerAuthenticator interface {
	// PeerAuthRequired reports whether links must authenticate (cluster tokens
	// configured); false: nothing is checked (see internalRefused).
	PeerAuthRequired() bool
	// PeerHandshake reads an internal request body: a step of the handshake is answered
	// (Kind PeerChallenge or PeerProof), anything else is left to the handler
	// (PeerRequest). nonce is the challenge this connection was given and has not used
	// yet (nil: none).
	PeerHandshake(body, nonce []byte) PeerStep
}

// PeerStepKind says what an internal request body was to a PeerAuthenticator.
type PeerStepKind uint8

const (
	// PeerRequest: not a handshake step; served when the connection has authenticated.
	PeerRequest PeerStepKind = iota
	// PeerChallenge: a request for a challenge; Nonce is the one given.
	PeerChallenge
	// PeerProof: a proof of the token for the connection's challenge, which it uses up.
	PeerProof
)

// PeerStep is a PeerAuthenticator's reading of one internal request body.
type PeerStep struct {
	Kind PeerStepKind
	// Answer is the body answered to a challenge or a proof.
	Answer []byte
	// Nonce is the challenge given (PeerChallenge), kept for the connection's next proof.
	Nonce []byte
	// OK: the proof was accepted, for broker Broker (PeerProof). Malformed: the proof
	// could not be read (it is refused).
	OK        bool
	Broker    int32
	Malformed bool
}

// peerAuthRequired reports whether internal requests need an authenticated connection.
func (s *Server) peerAuthRequired() bool {
	return s.peerAuth != nil && s.peerAuth.PeerAuthRequired()
}

// internalRefused says why a connection may not send internal requests at all ("": it
// may, subject to authorizeInternal).
func (s *Server) internalRefused(c *conn) string {
	switch {
	case c.lis == nil || !c.lis.InterBroker():
		return "not_inter_broker_listener"
	case s.peerAuthRequired():
		return ""
	case c.lis.SASL || s.cfg.Authorizer != nil:
		// Without a broker identity to check, anyone could read and write past the
		// ACLs, or around SASL.
		return "no_cluster_token"
	}
	return ""
}

// brokerAuth is a connection's inter-broker authentication state, used on its reader
// goroutine only (atomics for the tests and metrics that may look).
type brokerAuth struct {
	nonce  atomic.Pointer[[]byte] // the challenge given, until an OpAuth uses it
	ok     atomic.Bool
	broker atomic.Int32 // the authenticated broker's ID
}

// authorizeInternal answers the authentication steps and reports whether an internal
// request may be served; when not, it has answered (and the connection is closing).
func (s *Server) authorizeInternal(c *conn, sl *slot, body []byte) bool {
	if !s.peerAuthRequired() {
		return true // internalRefused allowed it: nothing is checked on this broker
	}
	respond := func(b []byte) { sl.respond(&internalMsg{body: b}) }
	var nonce []byte
	if p := c.brokerAuth.nonce.Load(); p != nil {
		nonce = *p
	}
	step := s.peerAuth.PeerHandshake(body, nonce)
	switch step.Kind {
	case PeerChallenge:
		c.brokerAuth.nonce.Store(&step.Nonce)
		respond(step.Answer)
		return false
	case PeerProof:
		c.brokerAuth.nonce.Store(nil) // a challenge answers one proof only
		if step.OK {
			c.brokerAuth.broker.Store(step.Broker)
			c.brokerAuth.ok.Store(true)
			respond(step.Answer)
			return false
		}
		s.log.Warn("inter-broker authentication failed; closing the connection (do all brokers share the --cluster-token-file?)",
			"remote", c.nc.RemoteAddr().String(), "client_id", sl.clientID, "malformed", step.Malformed, "challenged", nonce != nil)
		sl.closeIt = true
		respond(step.Answer)
		return false
	}
	if c.brokerAuth.ok.Load() {
		return true
	}
	s.log.Warn("inter-broker request on an unauthenticated connection refused; closing it (does the other broker have the --cluster-token-file?)",
		"remote", c.nc.RemoteAddr().String(), "client_id", sl.clientID, "op", body[0])
	sl.closeIt = true
	sl.respond(nil)
	return false
}
