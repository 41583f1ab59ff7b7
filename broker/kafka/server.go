package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/slowtrace"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
)

// Config is the front end's part of the broker's configuration.
type Config struct {
	NodeID int32
	// MaxRequestBytes bounds one request frame; larger frames close the connection
	// before anything is allocated for them (Kafka: socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxInFlight bounds requests of a connection read and not yet answered (blocking
	// handlers' included) before the broker stops reading it
	// (max.in.flight.requests.per.connection on the client's side).
	MaxInFlight int
	// IdleTimeout closes connections that send nothing (connections.max.idle.ms).
	IdleTimeout time.Duration
	// AutoCreateTopics creates unknown topics on Metadata/Produce
	// (auto.create.topics.enable); DefaultPartitions is their partition count.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// BrokerConfigs are the static settings DescribeConfigs shows for this broker.
	BrokerConfigs map[string]string

	// ZoneRouting names brokers of a client's own zone as the leaders of partitions led
	// in other zones (zones.go); Zone is this broker's zone and Routing decides a
	// client's. Traffic, when set, counts every connection's bytes by the client's zone.
	ZoneRouting bool
	Zone        string
	Routing     routing.Config
	Traffic     *routing.Traffic

	// SASL configures the mechanisms of SASL listeners (Listener.SASL) and KIP-368
	// session lifetimes (sasl_authenticate.go).
	SASL sasl.Config
	// Authorizer checks every request against the ACLs (authz.go); nil: off.
	Authorizer *acl.Authorizer
	// PrincipalRules map a TLS client certificate's subject DN to its principal name
	// (Kafka's ssl.principal.mapping.rules); the zero value is DEFAULT, the full DN.
	PrincipalRules tlsconf.PrincipalRules
	// SlowRequests writes an execution trace when a request takes longer than its
	// threshold (internal/slowtrace); nil: off.
	SlowRequests *slowtrace.Recorder
	// Limits bound what clients can make the broker hold (limits.go).
	Limits Limits
	// FetchSessions bounds the incremental fetch sessions kept (fetch_session.go); the
	// zero value keeps none.
	FetchSessions FetchSessionConfig
	// Transactions accepts transactional batches in Produce (the broker runs the
	// transaction coordinator); off, they are refused (recbatch.ErrTransactional:
	// INVALID_TXN_STATE).
	Transactions bool
	// VerifyTxnPartitions checks, before a producer's first transactional batch in a
	// partition, that its coordinator has the partition in the producer's transaction
	// (KIP-890 part 1, Kafka's transaction.partition.verification.enable; txnverify.go);
	// it needs a Deps.Txn that is a TxnVerifier. VerifyTxnTimeout bounds one check
	// (0: DefaultVerifyTxnTimeout).
	VerifyTxnPartitions bool
	VerifyTxnTimeout    time.Duration
}

// Deps is what the front end serves from.
type Deps struct {
	Meta    metadata.Store
	Backend Backend
	// Groups answers the classic group API keys.
	Groups *group.Coordinator

	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Internal serves inter-broker requests (internal.go); nil refuses them.
	Internal InternalHandler
	// PeerAuth authenticates the connections internal requests come on (internal.go);
	// nil: they are not authenticated.
	PeerAuth PeerAuthenticator
	// Now is the clock for LogAppendTime and fetch sessions' use times; nil: time.Now.
	Now func() time.Time
	// Txn is the transaction coordinator (txn.go); nil: transactions are refused and
	// their API keys not advertised.
	Txn TxnCoordinator
	// Share is the share group service (share.go); nil: the share group keys are
	// refused and not advertised.
	Share *Share
}

// Server serves the Kafka protocol on a listener.
type Server struct {
	cfg      Config
	meta     metadata.Store
	be       Backend
	groups   *group.Coordinator
	txn      TxnCoordinator
	share    *Share
	gate     *txnGate // KIP-890's check on the produce path; nil: off
	internal InternalHandler
	peerAuth PeerAuthenticator
	zones    zoneViews
	log      *slog.Logger
	metrics  *metrics
	lim      *limiter
	sessions *fetchSessions
	now      func() time.Time
	sasl     *saslServer
	// internalRefusals counts connections closed for an internal request they may not
	// send (internal.go), by reason.
	internalRefusals *prometheus.CounterVec

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop, connections, blocking handlers

	lns     []net.Listener
	connsMu sync.Mutex
	conns   map[*conn]struct{}
	closed  sync.Once
}

// NewServer returns a front end; Serve starts it.
func NewServer(cfg Config, d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.MaxInFlight < 1 {
		cfg.MaxInFlight = 1
	}
	if b := cfg.Limits.QueuedMaxRequestBytes; b > 0 && int64(cfg.MaxRequestBytes) > b {
		cfg.MaxRequestBytes = int32(b) // a larger frame could never get its budget
	}
	s := &Server{cfg: cfg, meta: d.Meta, be: d.Backend, groups: d.Groups, txn: d.Txn, share: d.Share, internal: d.Internal, peerAuth: d.PeerAuth, log: d.Logger, now: d.Now,
		metrics: newMetrics(d.Registerer), conns: map[*conn]struct{}{}}
	s.lim = newLimiter(cfg.Limits, s.metrics.set, d.Logger)
	s.gate = newTxnGate(cfg, d.Txn)
	s.sessions = newFetchSessions(cfg.FetchSessions, d.Now, s.metrics.set)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sasl = newSASLServer(cfg.SASL, d.Meta, s.metrics.set)
	s.internalRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_internal_requests_refused_total",
		Help: "Connections closed at an inter-broker request they may not send: not_inter_broker_listener (not the main listener), no_cluster_token (SASL or an authorizer on and no --cluster-token-file)."},
		[]string{"reason"})
	s.metrics.set.MustRegister(s.internalRefusals)
	return s
}

// Listener is what the server knows of one of its Kafka listeners.
type Listener struct {
	// Name keys the listener among a broker's listeners: a client connected to a named
	// listener is given every broker's listener of the same name ("" the main one, which
	// is also the inter-broker listener: InterBroker).
	Name string
	// Zone: clients connecting here are clients of this zone (zone routing).
	Zone string
	// TLS, when set, makes this a TLS listener (SSL or SASL_SSL).
	TLS *tls.Config
	// SASL requires clients to authenticate (SASL_PLAINTEXT or SASL_SSL) before any
	// request but ApiVersions, SaslHandshake and SaslAuthenticate.
	SASL bool
}

// InterBroker reports whether other brokers' connections come in here: the main listener
// (Name ""), the address brokers register and dial. Internal requests (internal.go) are
// refused on every other listener.
func (l *Listener) InterBroker() bool { return l.Name == "" }

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) { s.ServeListener(ln, Listener{}) }

// ServeZone accepts connections on ln, a listener of one zone's clients (zone routing
// takes the listener's zone as theirs), until Close.
func (s *Server) ServeZone(ln net.Listener, zone string) {
	s.ServeListener(ln, Listener{Name: zone, Zone: zone})
}

// ServeListener accepts connections on ln, described by l, until Close.
func (s *Server) ServeListener(ln net.Listener, l Listener) {
	s.connsMu.Lock()
	s.lns = append(s.lns, ln)
	s.connsMu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop(ln, &l)
}

// Close stops accepting, closes every connection and waits for their goroutines.
func (s *Server) Close() {
	s.closed.Do(func() {
		s.cancel()
		s.connsMu.Lock()
		for _, ln := range s.lns {
			ln.Close()
		}
		for c := range s.conns {
			if !c.answered.Load() {
				resetOnClose(c.nc) // a connection ending by itself meanwhile does too (serve)
			}
			c.nc.Close()
		}
		s.connsMu.Unlock()
		s.wg.Wait()
		s.metrics.close()
	})
}

func (s *Server) acceptLoop(ln net.Listener, lis *Listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off instead of spinning.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.log.Warn("accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		// Over a connection limit: closed before anything is allocated for it. A flood
		// of them is counted in full but logged at a bounded rate.
		ip := remoteIP(nc)
		if reason := s.lim.conns.admit(ip); reason != "" {
			nc.Close()
			s.lim.refused.WithLabelValues(reason).Inc()
			s.lim.refusedLog.Warn("connection refused: over a connection limit", "reason", reason, "remote", ip,
				"max_connections", s.lim.cfg.MaxConnections, "max_connections_per_ip", s.lim.cfg.MaxConnectionsPerIP)
			continue
		}
		c := newConn(s, nc, lis)
		s.connsMu.Lock()
		if s.ctx.Err() != nil {
			s.connsMu.Unlock()
			resetOnClose(nc) // the server is closing: see resetOnClose
			nc.Close()
			s.lim.conns.leave(ip)
			return
		}
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.connsMu.Lock()
			delete(s.conns, c)
			s.connsMu.Unlock()
			s.lim.conns.leave(ip)
		}()
	}
}

// resetOnClose makes Close send a TCP reset instead of a FIN. The closing server gives it
// to every connection with no answer beyond its set-up (conn.answered): Server.Close, the
// accept loop, and conn.serve's end once the server's context is done. The client then
// reads "connection reset", which every client retries, rather than an end of stream
// before its first answer, which franz-go takes for a missing SASL login and does not
// retry (ErrFirstReadEOF): seen as failed produces when a broker woke from a pause fenced
// and closed to start again under a new registration. A connection refused for what the
// client sent (a TLS principal no rule maps, a failed login) still ends with a FIN, where
// not retrying is right; one that had an answer too, so nothing written is thrown away.
func resetOnClose(nc net.Conn) {
	for {
		switch c := nc.(type) {
		case *net.TCPConn:
			c.SetLinger(0)
			return
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return
		}
	}
}
