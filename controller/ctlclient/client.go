package ctlclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Controllers are the controllers' API addresses (host:port); any of them will do.
	Controllers []string
	// BrokerID, Rack, Host, Port and Listeners (its per-zone Kafka listeners) are the
	// broker's identity; RegisterBroker's argument replaces them. BrokerID < 0 means the client is not a broker (admin tools): it
	// never registers or heartbeats. A broker client's Views carry its own ID as
	// ControllerID: every broker accepts admin requests and forwards them here.
	BrokerID int32
	Rack     string
	Host     string
	Port     int32
	// Listeners are the broker's per-zone Kafka listeners (metadata.Broker.Listeners).
	Listeners []metadata.Listener
	// HeartbeatInterval is how often a registered broker heartbeats (at least
	// ctlwire.MinHeartbeatInterval). RegisterBroker fails if the controllers grant a
	// lease shorter than twice this.
	HeartbeatInterval time.Duration
	// LeaseTimeout is the lease assumed if a controller's answer carries none (an older
	// controller); the controllers' own (their Config.GrantedLease) is used otherwise.
	LeaseTimeout time.Duration
	// RequestTimeout bounds one HTTP attempt; RetryTimeout bounds a write's retries
	// across controllers (after it the write fails with metadata.ErrNotController).
	RequestTimeout time.Duration
	RetryTimeout   time.Duration
	// WatchWait is the long-poll wait of the metadata watch.
	WatchWait time.Duration
	// StartTimeout bounds NewClient's wait for a first, consistent View (taken from the
	// leader after a Raft barrier). Negative: start with an empty View and do not wait.
	StartTimeout time.Duration
	// ProducerIDBlock is how many producer IDs one Raft round trip reserves.
	ProducerIDBlock int64
	// DefaultPartitions replaces -1 partitions in CreateTopic (0: the controller's).
	DefaultPartitions int32
	// Logger receives the client's logs (nil: discarded).
	Logger *slog.Logger
	// OnEpochChange, if set, is called after RegisterBroker registered the broker again
	// (a new epoch replacing oldEpoch). The client never registers again by itself: a
	// fenced registration closes Fenced() instead.
	OnEpochChange func(oldEpoch, newEpoch int64)
	// LoadReport, if set, tells the recent traffic of the partitions this broker leads:
	// every LoadReportInterval a heartbeat carries it to the controller leader, whose
	// balancer weighs a partition by its bytes. Only partitions with traffic need be
	// listed (the client drops zero rates and keeps the 4096 hottest). It runs on the
	// heartbeat goroutine: it must be quick and must not block.
	LoadReport func() []metadata.PartitionLoad
	// LoadReportInterval is how often a heartbeat carries the load report.
	LoadReportInterval time.Duration
	// WrapConn, if set, wraps every TCP connection the client dials to a controller
	// (requests, heartbeats, the metadata watch): addr is the address dialed (an entry
	// of Controllers, host:port) and nc the new connection; the client uses what it
	// returns instead (e.g. to count its bytes). It runs once per connection, on the
	// dialing goroutine; it must not block. Nil: connections are used as dialed.
	WrapConn func(addr string, nc net.Conn) net.Conn
	// TokenFile names the cluster token file (security/token): the controller-API key
	// derived from its first token is sent as `Authorization: Bearer` on every request. TLS, when its CAFile or CertFile is
	// set, makes the client speak HTTPS: the controllers are verified against CAFile
	// (the system roots if empty) and CertFile/KeyFile is presented when they ask for a
	// client certificate. Flags: BindSecurityFlags (clientauth.go).
	TokenFile string
	TLS       tlsconf.Files
	// InsecurePlaintextToken allows TokenFile without TLS (the controllers' key then
	// crosses the network in the clear); without it NewClient refuses.
	InsecurePlaintextToken bool
	// DownGrace is how long NewClient waits for controllers with nothing listening
	// (connection refused) or whose names do not resolve before it counts those as
	// failures waiting cannot fix; it gives up before StartTimeout once every controller
	// failed so (a TLS mismatch, an unknown CA, a 401 count at once: startwait.go). 0:
	// never (a broker waits its StartTimeout for controllers that start after it);
	// `weir admin` gives them a few seconds, as a controller restarting is common.
	DownGrace time.Duration
	// OnWaiting, if set, is called every WaitingInterval (default 3 s) while NewClient
	// waits for its first View, with how long it has waited and each failed controller's
	// last failure ("connection refused at 127.0.0.1:9401: ...; ..."); `weir admin`
	// prints it to stderr. Each new failure of a controller is also logged, once.
	OnWaiting       func(waited time.Duration, status string)
	WaitingInterval time.Duration
}

// DefaultClientConfig returns the defaults (BrokerID -1: set it for a broker).
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		BrokerID:          -1,
		HeartbeatInterval: 100 * time.Millisecond,
		LeaseTimeout:      300 * time.Millisecond,
		RequestTimeout:    15 * time.Second,
		RetryTimeout:      30 * time.Second,
		WatchWait:         30 * time.Second,
		StartTimeout:      30 * time.Second,
		ProducerIDBlock:   ctlwire.DefaultProducerIDBlock,

		LoadReportInterval: 2 * time.Second,
		WaitingInterval:    3 * time.Second,
	}
}

func (cfg *ClientConfig) fill() error {
	if len(cfg.Controllers) == 0 {
		return errors.New("controller client: no controller addresses")
	}
	d := DefaultClientConfig()
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = d.HeartbeatInterval
	}
	cfg.HeartbeatInterval = max(cfg.HeartbeatInterval, ctlwire.MinHeartbeatInterval)
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = d.LeaseTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = d.RetryTimeout
	}
	if cfg.WatchWait <= 0 {
		cfg.WatchWait = d.WatchWait
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = d.StartTimeout
	}
	if cfg.LoadReportInterval <= 0 {
		cfg.LoadReportInterval = d.LoadReportInterval
	}
	if cfg.WaitingInterval <= 0 {
		cfg.WaitingInterval = d.WaitingInterval
	}
	if cfg.ProducerIDBlock <= 0 || cfg.ProducerIDBlock > ctlwire.MaxProducerIDBlock {
		cfg.ProducerIDBlock = d.ProducerIDBlock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// dialer is the DialContext of the client's HTTP transport: a plain dial, its
// connections passed through wrap when set.
func dialer(wrap func(addr string, nc net.Conn) net.Conn) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	if wrap == nil {
		return d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(addr, nc), nil
	}
}

// maxResponseBytes bounds an answer (a View of a very large cluster included).
const maxResponseBytes = 256 << 20

// Client is what a broker uses to reach the controllers. It implements
// metadata.Store, metadata.Registrar, metadata.Mover, metadata.Recoverer,
// metadata.Leaser, metadata.Drainer, metadata.ControllerAuth and
// metadata.ObjectManifest (and their batch forms), checked at compile time below: the
// broker finds them by type assertion, so a missing method must not build.
//
// Reads come from a View kept current by a long-poll watch on any reachable controller.
// Writes go to any controller (followers forward them to the leader), are retried on
// another controller after a connection error or not_leader/unavailable, and return only
// once the local View has caught up with the write, so a broker reads its own writes.
type Client struct {
	cfg ClientConfig
	log *slog.Logger
	hc  *http.Client
	hb  *http.Client // heartbeats only
	// hbConns are the connections hb dialled, closed by Close; nil once closed.
	hbConnsMu sync.Mutex
	hbConns   map[net.Conn]struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards view, changed, pollCancel
	view    *metadata.View
	changed chan struct{}
	// pollCancel aborts the watch's current long poll; watchNext (if >= 0) is the
	// controller to watch next.
	pollCancel context.CancelFunc
	watchNext  atomic.Int32

	hint    atomic.Int32 // index of the controller that answered the last write
	retries atomic.Int64 // attempts that failed and were retried (Stats)

	regMu       sync.Mutex // serialises registration
	selfID      atomic.Int32
	self        metadata.Broker
	incarnation string // random per Client: tells this process from another with the same ID
	epoch       atomic.Int64
	hbOnce      sync.Once
	hbPaused    atomic.Bool // PauseHeartbeats: stop heartbeating, as a hung broker would
	// lastLoad is the leaseClock reading when a load report was last acknowledged
	// (the heartbeat goroutine's; atomic for tests).
	lastLoad atomic.Int64

	// viewVersion is view.Version, for LeaseValid without taking mu.
	viewVersion atomic.Uint64
	// deltas and fulls count the Views the watch installed from deltas and from full
	// Views (tests, the scale benchmark).
	deltas, fulls atomic.Int64

	// leaseClock reads the clock leases are measured on (newLeaseClock: CLOCK_BOOTTIME
	// on Linux); tests replace it.
	leaseClock func() time.Duration

	leaseMu sync.Mutex // guards the lease and the fence state; epoch changes under it
	// acks holds, per controller (node ID) of the current registration, when the lease
	// it granted ends on the leaseClock: the send time of the last heartbeat (or the
	// registration) it acknowledged plus the lease it granted. The lease is valid while
	// a majority of the voters' entries lie in the future (controller/leases.go). hasAck
	// is false before registering and after a fence.
	acks       map[int32]time.Duration
	voters     int
	hasAck     bool
	leaseDur   time.Duration // the last lease granted (for logs)
	hbKick     chan struct{} // closed (and replaced) at each registration: heartbeat now
	regVersion uint64        // the metadata version of the registration: the lease needs a View this new
	// fenced is closed when the controller answers that registration fencedEpoch is over.
	fenced      chan struct{}
	fencedEpoch int64

	sec clientSecurity // token and scheme (clientauth.go)

	pidMu           sync.Mutex
	pidNext, pidEnd int64
	closeOnce       sync.Once
}

var (
	_ metadata.Store          = (*Client)(nil)
	_ metadata.Registrar      = (*Client)(nil)
	_ metadata.Mover          = (*Client)(nil)
	_ metadata.Recoverer      = (*Client)(nil)
	_ metadata.BatchRecoverer = (*Client)(nil)
	_ metadata.BatchMover     = (*Client)(nil)
	_ metadata.MoveCompleter  = (*Client)(nil)
	_ metadata.Epocher        = (*Client)(nil)
	_ metadata.Leaser         = (*Client)(nil)
	_ metadata.Drainer        = (*Client)(nil)
	_ metadata.ControllerAuth = (*Client)(nil)

	_ metadata.ObjectManifest = (*Client)(nil)
)

// NewClient connects to the controllers: it waits (up to StartTimeout) for a consistent
// View and starts the metadata watch.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	sec, err := newClientSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		sec:      sec,
		cfg:      cfg,
		log:      cfg.Logger.With("controller_client", cfg.BrokerID),
		ctx:      ctx,
		cancel:   cancel,
		changed:  make(chan struct{}),
		leaseDur: cfg.LeaseTimeout,
		acks:     map[int32]time.Duration{},
		fenced:   make(chan struct{}),

		incarnation: newIncarnation(),
		leaseClock:  newLeaseClock(),
		self:        metadata.Broker{ID: cfg.BrokerID, Host: cfg.Host, Port: cfg.Port, Rack: cfg.Rack, Listeners: slices.Clone(cfg.Listeners)},
		hc: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer(cfg.WrapConn),
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
			TLSClientConfig:     sec.tls,
		}},
	}
	// Heartbeats have connections of their own, kept open: a controller takes the close
	// of one for a hint that this process died (controller/leasevote.go), so nothing
	// else may close them (the pool of hc closes idle extras), and Close closes every one of them
	// (closing the idle ones is not enough: the transport may put one back in its pool
	// after the heartbeat that used it returned).
	hbDial := dialer(cfg.WrapConn)
	c.hb = &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := hbDial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.hbConnsMu.Lock()
			defer c.hbConnsMu.Unlock()
			if c.hbConns == nil { // closed meanwhile
				nc.Close()
				return nil, ErrClosed
			}
			c.hbConns[nc] = struct{}{}
			return nc, nil
		},
		MaxIdleConnsPerHost: 1,
		TLSClientConfig:     sec.tls,
	}}
	c.hbConns = map[net.Conn]struct{}{}
	c.selfID.Store(cfg.BrokerID)
	c.watchNext.Store(-1)
	start := 0
	if cfg.BrokerID > 0 {
		start = int(cfg.BrokerID) % len(cfg.Controllers)
	}
	c.hint.Store(int32(start))
	c.view = metadata.NewView(0, "", cfg.BrokerID, nil, nil)
	if cfg.StartTimeout > 0 {
		sctx, scancel := context.WithTimeout(ctx, cfg.StartTimeout)
		err := c.refreshConsistent(sctx)
		scancel()
		if err != nil {
			cancel()
			return nil, err
		}
	}
	c.wg.Add(1)
	go c.watchLoop(start)
	return c, nil
}

// Close stops the watch and heartbeats. It does not deregister the broker: its lease
// simply runs out.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.hc.CloseIdleConnections()
		c.hb.CloseIdleConnections()
		c.hbConnsMu.Lock()
		for nc := range c.hbConns {
			nc.Close()
		}
		c.hbConns = nil
		c.hbConnsMu.Unlock()
	})
	return nil
}

// View implements metadata.Store.
func (c *Client) View() *metadata.View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view
}

// Changed implements metadata.Store.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// publish installs a newer View (older or equal versions are ignored: every replica
// reaches the same version with the same state).
func (c *Client) publish(vj *ctlwire.ViewJSON) bool {
	ok, _ := c.publishView(vj)
	return ok
}

// publishView is publish; a delta (vj.DeltaFrom set) that does not fit the current View
// is refused with ctlwire.ErrStaleDelta.
func (c *Client) publishView(vj *ctlwire.ViewJSON) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view != nil && vj.Version <= c.view.Version {
		return false, nil
	}
	id := vj.ControllerID
	if self := c.selfID.Load(); self >= 0 {
		id = self
	}
	if vj.DeltaFrom != 0 {
		v, err := ctlwire.ApplyDelta(c.view, vj, id)
		if err != nil {
			return false, err
		}
		c.view = v
		c.deltas.Add(1)
	} else {
		c.view = ctlwire.ToView(vj, id)
		c.fulls.Add(1)
	}
	c.viewVersion.Store(vj.Version)
	close(c.changed)
	c.changed = make(chan struct{})
	return true, nil
}

// attempt sends one request to one controller; it returns the status and body.
func (c *Client) attempt(ctx context.Context, addr, method, path string, body []byte, timeout time.Duration) (int, []byte, error) {
	return c.attemptWith(c.hc, ctx, addr, method, path, body, timeout)
}

// attemptWith is attempt on the HTTP client hc.
func (c *Client) attemptWith(hc *http.Client, ctx context.Context, addr, method, path string, body []byte, timeout time.Duration) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, c.sec.scheme+"://"+addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	c.sec.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", "weir") // every call is safe to replay
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// callInfo tells a caller how a call went, for the retry-after-ambiguity checks.
type callInfo struct {
	// ambiguous: an earlier attempt may have been applied although it failed.
	ambiguous bool
	retries   int
}

// call performs an API call with retries across controllers on connection errors and
// not_leader/unavailable answers; other errors come back as their metadata sentinel.
// When the retry budget runs out the error wraps metadata.ErrNotController.
func (c *Client) call(ctx context.Context, method, path string, in, out any) (callInfo, error) {
	var info callInfo
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return info, fmt.Errorf("%w: %v", ctlwire.ErrBadRequest, err)
		}
	}
	if c.ctx.Err() != nil {
		return info, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RetryTimeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	n := len(c.cfg.Controllers)
	first := int(c.hint.Load())
	backoff := 25 * time.Millisecond
	var lastErr error
	for attempt := 0; ; attempt++ {
		idx := (first + attempt) % n
		status, resp, err := c.attempt(ctx, c.cfg.Controllers[idx], method, path, body, c.cfg.RequestTimeout)
		switch {
		case err != nil:
			lastErr = c.classifyErr(c.cfg.Controllers[idx], err)
			if !ctlwire.IsDialError(err) {
				info.ambiguous = true
			}
		case status/100 == 2:
			c.hint.Store(int32(idx))
			if out != nil && status != http.StatusNoContent {
				if err := json.Unmarshal(resp, out); err != nil {
					return info, fmt.Errorf("%w: undecodable answer from %s: %v", ctlwire.ErrUnavailable, c.cfg.Controllers[idx], err)
				}
			}
			return info, nil
		default:
			var ae ctlwire.APIError
			if json.Unmarshal(resp, &ae) != nil || ae.Code == "" {
				ae = ctlwire.APIError{Code: "internal", Message: fmt.Sprintf("HTTP %d: %.200s", status, resp)}
			}
			if !ae.Retriable() {
				return info, ae.ToError()
			}
			if ae.Code == "unavailable" {
				info.ambiguous = true
			}
			lastErr = &ae
		}
		if ctx.Err() != nil {
			if c.ctx.Err() != nil {
				return info, ErrClosed
			}
			return info, fmt.Errorf("%w: no controller answered %s %s: %v", metadata.ErrNotController, method, path, lastErr)
		}
		info.retries++
		c.retries.Add(1)
		c.log.Debug("controller call failed, retrying", "path", path, "controller", c.cfg.Controllers[idx], "err", lastErr)
		if (attempt+1)%n == 0 { // tried them all: wait a little (an election, a restart)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// fetchView GETs a View from one controller; nil, nil on 204 (no change).
func (c *Client) fetchView(ctx context.Context, addr, path string, timeout time.Duration) (*ctlwire.ViewJSON, error) {
	status, body, err := c.attempt(ctx, addr, http.MethodGet, path, nil, timeout)
	if err != nil {
		return nil, c.classifyErr(addr, err)
	}
	switch status {
	case http.StatusOK:
		var vj ctlwire.ViewJSON
		if err := json.Unmarshal(body, &vj); err != nil {
			return nil, fmt.Errorf("controller client: undecodable view from %s: %w", addr, err)
		}
		return &vj, nil
	case http.StatusNoContent:
		return nil, nil
	default:
		return nil, c.classifyAnswer(addr, status, body)
	}
}

// refreshConsistent fetches the leader's View after a barrier, trying every controller
// until ctx ends or every controller failed in a way waiting cannot fix (startwait.go).
// Its error is a *StartError.
func (c *Client) refreshConsistent(ctx context.Context) error {
	n := len(c.cfg.Controllers)
	first := int(c.hint.Load())
	backoff := 25 * time.Millisecond
	w := newStartWait(c.cfg.Controllers, c.cfg.DownGrace, c.log)
	stop := w.report(c.cfg.OnWaiting, c.cfg.WaitingInterval)
	defer stop()
	for attempt := 0; ; attempt++ {
		idx := (first + attempt) % n
		addr := c.cfg.Controllers[idx]
		vj, err := c.fetchView(ctx, addr, ctlwire.PathMetadata+"?consistent=1", c.cfg.RequestTimeout)
		if err == nil && vj != nil {
			c.publish(vj)
			return nil
		}
		if ctx.Err() != nil {
			// The start timeout cut this attempt short: that says little about the
			// controller, unless it is all there is to say.
			if !w.tried(idx) && err != nil {
				w.record(idx, c.classifyErr(addr, err))
			}
			if c.ctx.Err() != nil {
				return ErrClosed
			}
			return w.err(false, c.cfg.StartTimeout)
		}
		if err == nil {
			err = ctlErr(addr, nil, nil, transient, "%s answered no view", addr)
		}
		w.record(idx, c.classifyErr(addr, err))
		if w.hopeless() {
			return w.err(true, c.cfg.StartTimeout)
		}
		if (attempt+1)%n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

// watchLoop long-polls one controller at a time for newer Views, moving to the next
// controller on errors (or when waitVersion finds the watched one lagging).
func (c *Client) watchLoop(idx int) {
	defer c.wg.Done()
	n := len(c.cfg.Controllers)
	backoff := 50 * time.Millisecond
	full := false // the next poll asks for a full View (a delta did not fit)
	for c.ctx.Err() == nil {
		if next := c.watchNext.Swap(-1); next >= 0 {
			idx = int(next) % n
		}
		pctx, cancel := context.WithCancel(c.ctx)
		c.mu.Lock()
		c.pollCancel = cancel
		after := c.view.Version
		c.mu.Unlock()
		path := fmt.Sprintf("%s?after=%d&wait=%s", ctlwire.PathMetadata, after, c.cfg.WatchWait)
		if !full && after > 0 {
			path += "&delta=1"
		}
		full = false
		vj, err := c.fetchView(pctx, c.cfg.Controllers[idx], path, c.cfg.WatchWait+c.cfg.RequestTimeout)
		kicked := pctx.Err() != nil
		cancel()
		if c.ctx.Err() != nil {
			return
		}
		if kicked {
			continue
		}
		if err != nil {
			c.log.Debug("metadata watch failed", "controller", c.cfg.Controllers[idx], "err", err)
			idx = (idx + 1) % n
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if vj != nil {
			if _, err := c.publishView(vj); err != nil {
				c.log.Debug("metadata delta refused; fetching the full view", "err", err)
				full = true
			}
		}
	}
}

// kickWatch makes the watch poll controller idx right away.
func (c *Client) kickWatch(idx int) {
	c.watchNext.Store(int32(idx))
	c.mu.Lock()
	if c.pollCancel != nil {
		c.pollCancel()
	}
	c.mu.Unlock()
}

// waitVersion waits until the local View has reached version v (read your writes). If
// the watched controller seems to lag, the watch moves to the one that answered the
// write. The write already happened: running out of time is only logged.
func (c *Client) waitVersion(ctx context.Context, v uint64) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RetryTimeout)
	defer cancel()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		ch := c.Changed()
		if c.View().Version >= v {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			c.kickWatch(int(c.hint.Load()))
			t.Reset(time.Second)
		case <-ctx.Done():
			if c.ctx.Err() == nil {
				c.log.Warn("metadata view did not catch up with a write", "want", v, "have", c.View().Version)
			}
			return
		}
	}
}

// newIncarnation returns a random ID for this process's registrations.
func newIncarnation() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
