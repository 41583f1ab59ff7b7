package kafka

// Limits on what clients can make the broker hold, so that whatever arrives on a socket
// the broker stays up and well-behaved clients keep being served:
//
//   - request bytes in flight, broker-wide (budget, Kafka's queued.max.request.bytes):
//     a frame's body is read in growing steps, each step's bytes taken from the budget
//     only once the client has started sending them (conn.readBody), and given back when
//     the request's response has been written or dropped (conn.writeLoop); when the
//     budget is used up readers stop reading their sockets;
//   - connections, overall and per source address (max.connections,
//     max.connections.per.ip): refused at accept, counted, logged at a bounded rate;
//   - fetch sizes (fetch.max.bytes), clamped in handleFetch;
//   - pipelined requests per connection (Config.MaxInFlight, conn.inflight);
//   - a panicking handler closes its connection and is counted; the broker stays up;
//   - produced and fetched bytes per second per client id (quota.go), off by default.
//
// Exported series (besides those of metrics.go):
//
//	weir_broker_request_bytes_in_flight          gauge, budget bytes held by requests
//	weir_broker_request_bytes_budget             gauge, the budget with the small requests' and unauthenticated connections' pools (0: unlimited)
//	weir_broker_request_budget_waits_total       reads that waited for budget
//	weir_broker_request_budget_timeouts_total    connections closed: a partly read frame got no budget in time
//	weir_broker_connections_refused_total{reason} max_connections or max_connections_per_ip
//	weir_broker_in_flight_waits_total            reads held back by the pipelining limit or a pipelined fetch
//	weir_broker_fetch_clamped_total              fetches whose sizes were cut to fetch.max.bytes
//	weir_broker_handler_panics_total{api}        panics recovered in request handlers
//	weir_broker_quota_throttled_requests_total{kind}, weir_broker_quota_throttle_seconds_total{kind}
//	                                             client quotas (quota.go), kind produce or fetch

import (
	"container/list"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/metricset"
)

// Limits configures the bounds above. Zero values mean "unbounded" (FetchMaxBytes:
// Kafka's default), so a Config built by hand for a test keeps working.
type Limits struct {
	// QueuedMaxRequestBytes is the broker-wide budget of request bytes read and not yet
	// answered (queued.max.request.bytes).
	QueuedMaxRequestBytes int64
	// BudgetWait is how long a connection whose frame is partly read may wait for more
	// budget before it is closed (its budget returned): see budget.
	BudgetWait time.Duration
	// FrameReadTimeout is how long a request frame may take to arrive from its first
	// byte, plus a second per MiB of its size (sasl_preauth.go): a client stalled in the
	// middle of a frame is closed and the budget it held comes back.
	FrameReadTimeout time.Duration
	// MaxConnections bounds open client connections of the broker (max.connections).
	MaxConnections int
	// MaxConnectionsPerIP bounds open connections from one source address
	// (max.connections.per.ip).
	MaxConnectionsPerIP int
	// FetchMaxBytes bounds the record bytes of one fetch answer and of each of its
	// partitions (fetch.max.bytes), whatever the request asks for.
	FetchMaxBytes int32
	// ProducerByteRate and ConsumerByteRate are every client id's quota of produced and
	// fetched bytes per second (Kafka's producer_byte_rate, consumer_byte_rate); 0: none
	// (quota.go).
	ProducerByteRate, ConsumerByteRate int64
}

const (
	// DefaultFetchMaxBytes is Kafka's fetch.max.bytes (55 MiB).
	DefaultFetchMaxBytes = 55 << 20
	// defaultBudgetWait: long enough for a frame's missing bytes to get budget when
	// requests are merely queued (responses are written in milliseconds), short enough
	// that budget held by stuck half-read frames comes back quickly.
	defaultBudgetWait = 5 * time.Second
	// defaultFrameReadTimeout: a request of a few KiB arrives in milliseconds; seconds
	// leave room for a congested network.
	defaultFrameReadTimeout = 10 * time.Second
)

// DefaultLimits is what a broker runs with unless told otherwise.
func DefaultLimits() Limits {
	return Limits{
		QueuedMaxRequestBytes: 100 << 20,
		BudgetWait:            defaultBudgetWait,
		FrameReadTimeout:      defaultFrameReadTimeout,
		MaxConnections:        10000,
		MaxConnectionsPerIP:   1000,
		FetchMaxBytes:         DefaultFetchMaxBytes,
	}
}

// Validate checks the limits against the largest request frame accepted.
func (l *Limits) Validate(maxRequestBytes int32) error {
	switch {
	case l.QueuedMaxRequestBytes < 0 || l.MaxConnections < 0 || l.MaxConnectionsPerIP < 0 || l.ProducerByteRate < 0 || l.ConsumerByteRate < 0:
		return errors.New("limits must be >= 0 (0: unlimited)")
	case l.QueuedMaxRequestBytes > 0 && l.QueuedMaxRequestBytes < int64(maxRequestBytes):
		// A frame larger than the whole budget could never be read.
		return fmt.Errorf("queued max request bytes %d is below max request bytes %d", l.QueuedMaxRequestBytes, maxRequestBytes)
	case l.FetchMaxBytes < 1024:
		return fmt.Errorf("fetch max bytes %d is too small", l.FetchMaxBytes)
	case l.BudgetWait < 0:
		return errors.New("request budget wait must be >= 0")
	case l.FrameReadTimeout < 0:
		return errors.New("request read timeout must be >= 0")
	}
	if l.BudgetWait == 0 {
		l.BudgetWait = defaultBudgetWait
	}
	if l.FrameReadTimeout == 0 {
		l.FrameReadTimeout = defaultFrameReadTimeout
	}
	return nil
}

// BindFlags registers the limits' flags on fs.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	fs.Int64Var(&l.QueuedMaxRequestBytes, "queued-max-request-bytes", l.QueuedMaxRequestBytes,
		"broker-wide budget of request bytes read and not yet answered (Kafka's queued.max.request.bytes): "+
			"a request's bytes count from the moment they arrive until its response is written; when the budget is used up "+
			"the broker stops reading sockets until responses free some (clients see latency, not errors). "+
			"Requests up to 64 KiB have a pool of their own on top, an eighth of this (at least 1 MiB), so large ones cannot hold them up; "+
			"requests of connections not yet authenticated (SASL listeners) another, a sixteenth (at least 4 MiB). "+
			"Must be >= --max-request-bytes; 0: unlimited")
	fs.DurationVar(&l.BudgetWait, "request-budget-wait", l.BudgetWait,
		"how long a connection with a partly read request may wait for --queued-max-request-bytes budget before it is closed and its budget returned "+
			"(so half-read large requests cannot hold the budget against each other forever)")
	fs.DurationVar(&l.FrameReadTimeout, "request-read-timeout", l.FrameReadTimeout,
		"how long one request may take to arrive from its first byte, plus a second per MiB of its size (and any time it waited for --queued-max-request-bytes budget): "+
			"a client stalled in the middle of a request is closed and the budget its partial request held comes back")
	fs.IntVar(&l.MaxConnections, "max-connections", l.MaxConnections,
		"most open Kafka connections (clients and other brokers); more are closed at accept and counted in weir_broker_connections_refused_total (max.connections; 0: unlimited)")
	fs.IntVar(&l.MaxConnectionsPerIP, "max-connections-per-ip", l.MaxConnectionsPerIP,
		"most open Kafka connections from one source IP address; more are closed at accept (max.connections.per.ip; 0: unlimited)")
	fs.Int64Var(&l.ProducerByteRate, "producer-byte-rate", l.ProducerByteRate,
		"quota of produced bytes per second of every client id (Kafka's producer_byte_rate): a client over it gets throttle_time_ms in its answers "+
			"and its connection's next request is held as long (0: no quota)")
	fs.Int64Var(&l.ConsumerByteRate, "consumer-byte-rate", l.ConsumerByteRate,
		"quota of fetched record bytes per second of every client id (Kafka's consumer_byte_rate), enforced like --producer-byte-rate (0: no quota)")
	fs.Func("fetch-max-bytes", fmt.Sprintf("most record bytes in one fetch answer and in each of its partitions, whatever the client asks for; "+
		"the first batch is still sent whole if larger, as in Kafka (fetch.max.bytes, default %d)", l.FetchMaxBytes), func(s string) error {
		var n int32
		_, err := fmt.Sscan(s, &n)
		l.FetchMaxBytes = n
		return err
	})
}

// limiter holds the server's limits and their metrics.
type limiter struct {
	cfg    Limits
	log    *slog.Logger
	budget *budget // nil: unlimited
	small  *budget // frames up to smallFrame: a pool of their own (nil with budget)
	// preAuth: frames of unauthenticated connections (sasl_preauth.go), a pool of their
	// own (nil with budget).
	preAuth *budget
	conns   connCounter
	q       *quotas

	refusedLog  rateLog
	badFrameLog rateLog
	budgetLog   rateLog

	budgetWaits    prometheus.Counter
	budgetTimeouts prometheus.Counter
	refused        *prometheus.CounterVec
	inFlightWaits  prometheus.Counter
	fetchClamped   prometheus.Counter
	panics         *prometheus.CounterVec
}

func newLimiter(cfg Limits, set *metricset.Set, log *slog.Logger) *limiter {
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = defaultBudgetWait
	}
	if cfg.FrameReadTimeout <= 0 {
		cfg.FrameReadTimeout = defaultFrameReadTimeout
	}
	l := &limiter{cfg: cfg, log: log,
		conns:       connCounter{max: cfg.MaxConnections, maxPerIP: cfg.MaxConnectionsPerIP, perIP: map[string]int{}},
		refusedLog:  rateLog{log: log, every: 10 * time.Second},
		badFrameLog: rateLog{log: log, every: 10 * time.Second},
		budgetLog:   rateLog{log: log, every: 10 * time.Second},
		budgetWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_request_budget_waits_total",
			Help: "Reads of request bytes that waited for the broker-wide budget (--queued-max-request-bytes) to free up."}),
		budgetTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_request_budget_timeouts_total",
			Help: "Connections closed because a partly read request got no budget within --request-budget-wait."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_connections_refused_total",
			Help: "Connections closed at accept, by the limit they were over (max_connections, max_connections_per_ip)."}, []string{"reason"}),
		inFlightWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_in_flight_waits_total",
			Help: "Times a connection's reads paused because --max-in-flight-requests-per-connection requests were unanswered, or a pipelined fetch waited for the previous fetch answer to be written."}),
		fetchClamped: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_fetch_clamped_total",
			Help: "Fetch requests whose max bytes or partition max bytes were cut to --fetch-max-bytes."}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_handler_panics_total",
			Help: "Panics recovered while handling a request, by API; each closed its connection."}, []string{"api"}),
	}
	inFlight := prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_request_bytes_in_flight",
		Help: "Request bytes read and not yet answered, taken from --queued-max-request-bytes."})
	size := prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_request_bytes_budget",
		Help: "The broker-wide budget of request bytes in flight: --queued-max-request-bytes plus the pools of requests up to 64 KiB and of unauthenticated connections (0: unlimited)."})
	if cfg.QueuedMaxRequestBytes > 0 {
		smallSize := max(cfg.QueuedMaxRequestBytes/8, 1<<20)
		preSize := max(cfg.QueuedMaxRequestBytes/16, 4<<20)
		g := &sumGauge{g: inFlight}
		l.budget = newBudget(cfg.QueuedMaxRequestBytes, g.part(0))
		l.small = newBudget(smallSize, g.part(1))
		l.preAuth = newBudget(preSize, g.part(2))
		size.Set(float64(cfg.QueuedMaxRequestBytes + smallSize + preSize))
	}
	l.q = newQuotas(cfg, time.Now)
	set.MustRegister(inFlight, size, l.budgetWaits, l.budgetTimeouts, l.refused, l.inFlightWaits, l.fetchClamped, l.panics, l.q.throttled, l.q.throttleTime)
	return l
}

// errBudgetTimeout closes a connection whose partly read frame got no budget in time.
var errBudgetTimeout = errors.New("kafka: no request budget for a partly read request")

// smallFrame: frames up to this size (Metadata, ApiVersions, commits, fetches, small
// produces) take their bytes from a pool of their own, an eighth of the budget (at least
// 1 MiB) on top of it, so clients holding the main budget with large requests (stalled
// half-way, or just many) cannot hold up everyone's small ones.
const smallFrame = 64 << 10

// pool is the budget a frame of n bytes takes from; pre: its connection has not
// authenticated (sasl_preauth.go).
func (l *limiter) pool(n int, pre bool) *budget {
	if pre {
		return l.preAuth
	}
	if n <= smallFrame {
		return l.small
	}
	return l.budget
}

// take takes n bytes from pool b for a frame being read; partial says the connection
// already holds part of the frame, which bounds the wait (see budget).
func (l *limiter) take(ctx context.Context, b *budget, n int64, partial bool) error {
	if b == nil || n <= 0 {
		return nil
	}
	if b.tryAcquire(n) {
		return nil
	}
	l.budgetWaits.Inc()
	var wait time.Duration // unbounded: the frame holds nothing yet
	if partial {
		wait = l.cfg.BudgetWait
	}
	err := b.acquire(ctx, n, wait)
	if errors.Is(err, errBudgetTimeout) {
		l.budgetTimeouts.Inc()
	}
	return err
}

func (l *limiter) release(b *budget, n int64) {
	if b != nil && n > 0 {
		b.release(n)
	}
}

// inUse is the bytes held in every pool.
func (l *limiter) inUse() int64 {
	if l.budget == nil {
		return 0
	}
	return l.budget.inUse() + l.small.inUse() + l.preAuth.inUse()
}

// sumGauge shows the sum of several parts (the pools) as one gauge.
type sumGauge struct {
	mu    sync.Mutex
	g     prometheus.Gauge
	parts [3]float64
}

type gaugePart struct {
	s *sumGauge
	i int
}

func (s *sumGauge) part(i int) gaugePart { return gaugePart{s, i} }

func (p gaugePart) Set(v float64) {
	p.s.mu.Lock()
	p.s.parts[p.i] = v
	p.s.g.Set(p.s.parts[0] + p.s.parts[1] + p.s.parts[2])
	p.s.mu.Unlock()
}

// budget is a FIFO weighted semaphore of request bytes. FIFO so that a frame's next
// step is not starved by a stream of small requests.
//
// Deadlock: connections each holding part of the budget for half-read frames, each
// waiting for more, could wait on each other forever. So only the first step of a frame
// (the connection holds nothing of it yet) waits without bound; a later step waits at
// most BudgetWait, and a connection that times out is closed and its budget returned,
// which lets the others finish. Budget held by whole requests is never at risk: it comes
// back when their responses are written, which needs no budget.
type budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // *budgetWaiter, oldest first
	gauge   interface{ Set(float64) }
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when granted
}

func newBudget(size int64, gauge interface{ Set(float64) }) *budget {
	return &budget{size: size, gauge: gauge}
}

func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.gauge.Set(float64(b.used))
		return true
	}
	return false
}

// acquire waits for n bytes, for at most wait (0: until ctx ends).
func (b *budget) acquire(ctx context.Context, n int64, wait time.Duration) error {
	b.mu.Lock()
	if n > b.size {
		b.mu.Unlock()
		return fmt.Errorf("%w: %d bytes wanted, budget %d", errBudgetTimeout, n, b.size)
	}
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.gauge.Set(float64(b.used))
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ready:
		return nil
	case <-timeout:
		err = errBudgetTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		return nil // granted meanwhile: keep it
	default:
	}
	front := b.waiters.Front() == e
	b.waiters.Remove(e)
	if front {
		b.grantLocked() // the waiters behind may fit now
	}
	return err
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		panic("kafka: request budget released more than taken")
	}
	b.grantLocked()
	b.gauge.Set(float64(b.used))
	b.mu.Unlock()
}

func (b *budget) grantLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
	b.gauge.Set(float64(b.used))
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// connCounter counts open connections, overall and per source address.
type connCounter struct {
	max, maxPerIP int
	mu            sync.Mutex
	total         int
	perIP         map[string]int
}

// admit counts a new connection from ip, or returns the limit it is over.
func (cc *connCounter) admit(ip string) string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.max > 0 && cc.total >= cc.max {
		return "max_connections"
	}
	if cc.maxPerIP > 0 && cc.perIP[ip] >= cc.maxPerIP {
		return "max_connections_per_ip"
	}
	cc.total++
	cc.perIP[ip]++
	return ""
}

func (cc *connCounter) leave(ip string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.total--
	if cc.perIP[ip]--; cc.perIP[ip] <= 0 {
		delete(cc.perIP, ip)
	}
}

// remoteIP is the source address a connection counts under.
func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// rateLog logs at most one warning per period, with the number left out since the last,
// so a flood (of connections, of bad frames) cannot become a flood of log lines.
type rateLog struct {
	log        *slog.Logger
	every      time.Duration
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

func (r *rateLog) Warn(msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Before(r.next) {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed, r.next = 0, now.Add(r.every)
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	r.log.Warn(msg, args...)
}

// recovered handles a panic caught while serving a request of c: it is counted and
// logged with its stack, and the connection is closed (its state may be inconsistent),
// never the broker. The stack is logged, not the request: it may carry record data.
func (s *Server) recovered(c *conn, key int16, r any) {
	api := kmsg.NameForKey(key)
	switch {
	case key < 0:
		api = "none" // outside any handler: reading, parsing, writing
	case kmsg.RequestForKey(key) == nil: // Weir's internal key, tests' keys
		api = fmt.Sprintf("key_%d", key)
	}
	s.lim.panics.WithLabelValues(api).Inc()
	s.log.Error("panic while handling a request; closing its connection", "api", api, "remote", c.nc.RemoteAddr().String(),
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	c.cancel()
	c.nc.Close()
}
