package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/metadata"
)

// Config is the front end's part of the broker's configuration.
type Config struct {
	NodeID int32
	// MaxRequestBytes bounds one request frame; larger frames close the connection
	// before anything is allocated for them (Kafka: socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxInFlight bounds pipelined requests per connection before the broker stops
	// reading it.
	MaxInFlight int
	// IdleTimeout closes connections that send nothing (connections.max.idle.ms).
	IdleTimeout time.Duration
	// AutoCreateTopics creates unknown topics on Metadata/Produce
	// (auto.create.topics.enable); DefaultPartitions is their partition count.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// BrokerConfigs are the static settings DescribeConfigs shows for this broker.
	BrokerConfigs map[string]string
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
	// Now is the clock for LogAppendTime; nil: time.Now.
	Now func() time.Time
}

// Server serves the Kafka protocol on a listener.
type Server struct {
	cfg      Config
	meta     metadata.Store
	be       Backend
	groups   *group.Coordinator
	internal InternalHandler
	log      *slog.Logger
	metrics  *metrics
	now      func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop, connections, blocking handlers

	ln      net.Listener
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
	s := &Server{cfg: cfg, meta: d.Meta, be: d.Backend, groups: d.Groups, internal: d.Internal, log: d.Logger, now: d.Now,
		metrics: newMetrics(d.Registerer), conns: map[*conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop()
}

// Close stops accepting, closes every connection and waits for their goroutines.
func (s *Server) Close() {
	s.closed.Do(func() {
		s.cancel()
		if s.ln != nil {
			s.ln.Close()
		}
		s.connsMu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.connsMu.Unlock()
		s.wg.Wait()
		s.metrics.close()
	})
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
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
		c := newConn(s, nc)
		s.connsMu.Lock()
		if s.ctx.Err() != nil {
			s.connsMu.Unlock()
			nc.Close()
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
		}()
	}
}
