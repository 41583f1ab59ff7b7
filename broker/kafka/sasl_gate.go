package kafka

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/metricset"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// SASL on a listener with Listener.SASL (SASL_PLAINTEXT, SASL_SSL): until the client has
// authenticated (SaslHandshake v1 naming a mechanism, then SaslAuthenticate exchanges,
// sasl_handshake.go and sasl_authenticate.go) the only requests served are ApiVersions,
// SaslHandshake and SaslAuthenticate; any other closes the connection unanswered, as
// Kafka does ("Unexpected Kafka request ... during SASL handshake"). A failed
// authentication is answered, then the connection is closed.
//
// A failed authentication (unknown user, wrong password, malformed exchange) is
// answered only after sasl.Config.FailedDelay (Kafka's
// connection.failed.authentication.delay.ms, 100 ms), then the connection is closed;
// nothing else is served on it meanwhile (saslConn.failed), so a guesser gets one guess
// per connection and delay, and the failures are counted
// (weir_broker_sasl_failed_authentications_total).
//
// KIP-368: with a session lifetime, SaslAuthenticate v1+ tells the client how long its
// authentication lasts; the client re-authenticates on the same connection (a new
// SaslHandshake and SaslAuthenticate, as the same user) before then, and a connection
// whose session ran out is closed at its next other request.
//
// The state lives in conn.sasl and is touched by the reader goroutine only: the gate
// runs there before a request is queued, and SaslHandshake and SaslAuthenticate are
// registered non-blocking, so they run there too, in request order. That is what makes
// "authenticated" true exactly from the request after a successful SaslAuthenticate.
//
// The legacy flow of SaslHandshake v0 (raw SASL tokens without SaslAuthenticate
// framing, Kafka before 1.0) is not served: a raw token does not parse as an allowed
// request, so such a client is closed before anything is served. Clients that see
// SaslAuthenticate in ApiVersions (Kafka 1.0+ clients, librdkafka, franz-go, sarama's
// default SASLHandshakeV1) use it. SaslHandshake v0 is still in the advertised range:
// librdkafka refuses SASL with a broker whose range does not include it.

var (
	errSASLRequired = errors.New("kafka: request before SASL authentication")
	errSASLExpired  = errors.New("kafka: SASL session expired (KIP-368) without re-authentication")
	errSASLFailed   = errors.New("kafka: request after a failed SASL authentication")
)

// saslConn is one connection's SASL state.
type saslConn struct {
	// failed: an authentication failed; its answer is held back (FailedDelay) and the
	// connection closes after it, serving nothing more.
	failed    bool
	session   sasl.Session // between SaslHandshake and the end of its exchange
	mechanism string       // of session
	// user is who the connection authenticated as ("" before); a re-authentication must
	// name the same user.
	user    string
	expires time.Time // zero: the session never expires
}

// saslServer is the server-wide part: the mechanisms, the credential lookup, metrics.
type saslServer struct {
	cfg  sasl.Config
	auth *sasl.Authenticator

	attempts *prometheus.CounterVec // mechanism, result
	refused  *prometheus.CounterVec // reason
	delayed  prometheus.Counter     // failed authentications answered after FailedDelay

	// typical caches what real credentials look like, per metadata view.
	typicalMu   sync.Mutex
	typicalView *metadata.View
	typicalOf   map[string]typicalCred
}

type typicalCred struct {
	iterations int
	salt       []byte
	ok         bool
}

func newSASLServer(cfg sasl.Config, meta metadata.Store, set *metricset.Set) *saslServer {
	if len(cfg.Mechanisms) == 0 {
		cfg.Mechanisms = sasl.DefaultConfig().Mechanisms
	}
	if cfg.FailedDelay <= 0 {
		cfg.FailedDelay = sasl.DefaultFailedDelay
	}
	ss := &saslServer{cfg: cfg,
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_sasl_authentications_total",
			Help: "SASL authentications by mechanism and result: ok, reauthenticated (KIP-368), failed (unknown user or wrong password: not told apart), malformed, unsupported_mechanism (mechanism \"other\"), principal_change (a re-authentication as another user).",
		}, []string{"mechanism", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_broker_sasl_closed_connections_total",
			Help: "Connections of SASL listeners closed for a request other than ApiVersions/SaslHandshake/SaslAuthenticate before authentication (unauthenticated), after the session expired (expired), or for any request after a failed authentication (failed).",
		}, []string{"reason"}),
	}
	ss.delayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_broker_sasl_failed_authentications_total",
		Help: "Failed SASL authentications (unknown user, wrong password, malformed exchange, principal change), each answered after --sasl-failed-authentication-delay and its connection closed: a rising rate is password guessing.",
	})
	set.MustRegister(ss.attempts, ss.refused, ss.delayed)
	ss.auth = sasl.NewAuthenticator(cfg.Mechanisms, func(user, mechanism string) (sasl.Credential, bool) {
		m, ok := metadata.ParseScramMechanism(mechanism)
		if !ok || meta == nil {
			return sasl.Credential{}, false
		}
		v := meta.View()
		if v == nil {
			return sasl.Credential{}, false
		}
		c, ok := v.Scram.Credential(user, m)
		if !ok {
			return sasl.Credential{}, false
		}
		return sasl.Credential{Iterations: int(c.Iterations), Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, true
	})
	ss.auth.SetTypical(func(mechanism string) (int, []byte, bool) {
		if meta == nil {
			return 0, nil, false
		}
		t := ss.typical(meta.View(), mechanism)
		return t.iterations, t.salt, t.ok
	})
	return ss
}

// typical is what most users' credentials of mechanism look like in view (the
// iteration count and salt length most have, a salt of that length), so that an unknown
// user's made-up credential looks the same (security/sasl). Computed once per view.
func (ss *saslServer) typical(v *metadata.View, mechanism string) typicalCred {
	if v == nil {
		return typicalCred{}
	}
	ss.typicalMu.Lock()
	defer ss.typicalMu.Unlock()
	if ss.typicalView != v {
		ss.typicalView, ss.typicalOf = v, map[string]typicalCred{}
	}
	if t, ok := ss.typicalOf[mechanism]; ok {
		return t
	}
	var t typicalCred
	if m, ok := metadata.ParseScramMechanism(mechanism); ok {
		type shape struct{ iterations, saltLen int }
		counts := map[shape]int{}
		samples := map[shape][]byte{}
		best, bestN := shape{}, 0
		for _, creds := range v.Scram {
			for _, c := range creds {
				if c.Mechanism != m {
					continue
				}
				k := shape{int(c.Iterations), len(c.Salt)}
				counts[k]++
				if samples[k] == nil {
					samples[k] = c.Salt
				}
				// The most common shape; ties to the smaller, so the choice is stable.
				if n := counts[k]; n > bestN || n == bestN && (k.iterations < best.iterations || k.iterations == best.iterations && k.saltLen < best.saltLen) {
					best, bestN = k, n
				}
			}
		}
		if bestN > 0 {
			t = typicalCred{iterations: best.iterations, salt: samples[best], ok: true}
		}
	}
	ss.typicalOf[mechanism] = t
	return t
}

// mechanismLabel bounds the label's values to the known mechanisms.
func (ss *saslServer) mechanismLabel(m string) string {
	for _, k := range sasl.Mechanisms {
		if m == k {
			return m
		}
	}
	return "other"
}

// saslGate decides whether a request with API key key may be served on this connection
// now; an error closes the connection without an answer.
func (c *conn) saslGate(key int16) error {
	if c.lis == nil || !c.lis.SASL {
		return nil
	}
	if c.sasl.failed {
		c.s.sasl.refused.WithLabelValues("failed").Inc()
		return fmt.Errorf("%w: %s", errSASLFailed, kmsg.NameForKey(key))
	}
	switch key {
	case 18, 17, 36: // ApiVersions, SaslHandshake, SaslAuthenticate
		return nil
	case InternalKey:
		// Other brokers' connections prove the cluster token instead (internal.go), on the
		// inter-broker listener only; without tokens there is no proof, and a SASL
		// listener serves them nothing.
		if c.lis.InterBroker() && c.s.peerAuthRequired() {
			return nil
		}
	}
	st := &c.sasl
	reason, err := "", error(nil)
	switch {
	case st.user == "":
		reason, err = "unauthenticated", errSASLRequired
	case !st.expires.IsZero() && !time.Now().Before(st.expires):
		reason, err = "expired", errSASLExpired
	default:
		return nil
	}
	c.s.sasl.refused.WithLabelValues(reason).Inc()
	c.s.log.Info("closing SASL connection", "remote", c.nc.RemoteAddr().String(), "request", kmsg.NameForKey(key), "reason", reason)
	return fmt.Errorf("%w: %s", err, kmsg.NameForKey(key))
}
