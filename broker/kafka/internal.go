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
//   - when the handler has cluster tokens (PeerAuthenticator), a connection must pass the
//     peer authentication (broker/peer/auth.go: OpChallenge, then OpAuth, answered here)
//     before any other internal request reaches the handler; an unauthenticated one is
//     refused and the connection closed;
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
	"github.com/weir-io/weir/broker/peer"
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

// PeerAuthenticator is implemented by an InternalHandler whose broker has cluster
// tokens: PeerTokens returns every accepted token (nil: peer connections are not authenticated).
type PeerAuthenticator interface {
	PeerTokens() [][]byte
}

// peerTokens returns the cluster tokens peer connections must prove (nil: none configured).
func (s *Server) peerTokens() [][]byte {
	if pa, ok := s.internal.(PeerAuthenticator); ok {
		return pa.PeerTokens()
	}
	return nil
}

// internalRefused says why a connection may not send internal requests at all ("": it
// may, subject to authorizeInternal).
func (s *Server) internalRefused(c *conn) string {
	switch {
	case c.lis == nil || !c.lis.InterBroker():
		return "not_inter_broker_listener"
	case len(s.peerTokens()) > 0:
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

// authorizeInternal answers the authentication ops and reports whether an internal
// request may be served; when not, it has answered (and the connection is closing).
func (s *Server) authorizeInternal(c *conn, sl *slot, body []byte) bool {
	tokens := s.peerTokens()
	if len(tokens) == 0 {
		return true // internalRefused allowed it: nothing is checked on this broker
	}
	respond := func(b []byte) { sl.respond(&internalMsg{body: b}) }
	switch body[0] {
	case peer.OpChallenge:
		n := peer.NewNonce()
		c.brokerAuth.nonce.Store(&n)
		respond(n)
		return false
	case peer.OpAuth:
		var nonce []byte
		if p := c.brokerAuth.nonce.Swap(nil); p != nil {
			nonce = *p
		}
		req, err := peer.DecodeAuthRequest(body)
		var ans []byte
		var good bool
		if err == nil {
			ans, good = peer.VerifyAuth(tokens, nonce, req)
		} else {
			ans, _ = peer.VerifyAuth(nil, nil, req)
		}
		if good {
			c.brokerAuth.broker.Store(req.Broker)
			c.brokerAuth.ok.Store(true)
			respond(ans)
			return false
		}
		s.log.Warn("inter-broker authentication failed; closing the connection (do all brokers share the --cluster-token-file?)",
			"remote", c.nc.RemoteAddr().String(), "client_id", sl.clientID, "malformed", err != nil, "challenged", nonce != nil)
		sl.closeIt = true
		respond(ans)
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
