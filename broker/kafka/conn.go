package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

// A connection has a reader goroutine and a writer goroutine. The reader parses each
// request and hands it to its handler in arrival order (so an idempotent producer's
// pipelined batches reach the WAL in sequence order), then queues a slot; handlers answer
// their slot whenever they finish (a produce after its fdatasync, a fetch after its wait),
// and the writer sends answers strictly in request order, as Kafka requires. At most
// MaxInFlight requests of a connection are unanswered (conn.inflight, blocking handlers
// included): then the reader stops reading the socket. A frame's body is read in growing
// steps as its bytes arrive, each step taken from the broker-wide budget (limits.go) and
// given back once the response is written or dropped.

const (
	// readBufSize and writeBufSize are the per-connection buffers: small, because an
	// idle or hostile connection must cost little (frames and answers larger than them
	// bypass them anyway).
	readBufSize  = 16 << 10
	writeBufSize = 16 << 10
	// The first quarter of a frame body is read in chunks (readBody): the first as large
	// as what is already buffered (at least minBodyChunk), each next one twice the
	// previous, up to maxBodyChunk. A slow writer holds a few KiB.
	minBodyChunk = 4 << 10
	maxBodyChunk = 1 << 20
)

var errFrameSize = errors.New("kafka: request frame size out of bounds")

type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan *slot
	// inflight holds a token per request read and not yet answered (MaxInFlight).
	inflight chan struct{}
	// fetchTok is held by the connection's one fetch whose answer is not yet written.
	fetchTok chan struct{}
	// mutedUntil (unix nanoseconds): a client over its quota has its next request held
	// until then (quota.go).
	mutedUntil atomic.Int64

	// lis is the listener the connection came in on (its zone, TLS, SASL); principal is
	// who the client is: Anonymous until TLS client authentication or SASL says otherwise.
	lis       *Listener
	principal atomic.Pointer[security.Principal]
	sasl      saslConn // SASL state (sasl_gate.go): read and written on the reader goroutine only

	// Zone routing (zones.go): the listener's zone, the rack of the client's Fetch
	// requests, the zone its bytes are counted under, whether it is another broker's.
	listenerZone string
	rack         atomic.Pointer[string]
	zone         atomic.Pointer[string]
	peer         atomic.Bool
	tc           *routing.Conn // nil: no byte accounting

	// brokerAuth is the inter-broker authentication of the connection (internal.go).
	brokerAuth brokerAuth
	// answered: an answer to a request other than the connection's set-up (ApiVersions,
	// SASL) was flushed to the client; franz-go counts only those, and takes an end of
	// stream before the first for a failed login (Server.Close resets connections
	// without one: resetOnClose).
	answered atomic.Bool
	// aclSession is the connection's authorizer session (authz.go), nil until needed.
	aclSession atomic.Pointer[acl.Session]
}

type slot struct {
	corr     int32
	key      int16
	clientID string
	flex     bool // response header carries tagged fields
	start    time.Time
	done     chan kmsg.Response // buffered 1; a nil response means "send nothing" (acks=0)
	raw      []byte             // pre-encoded body, for requests kmsg cannot answer
	closeIt  bool               // close the connection after this slot
	held     int64              // request budget bytes, returned once answered
	pool     *budget            // where held came from
	fetchTok bool               // holds the connection's fetch token (conn.fetchTok)
	size     int                // request frame bytes (quotas)
}

func newConn(s *Server, nc net.Conn, lis *Listener) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, slots: make(chan *slot, s.cfg.MaxInFlight), inflight: make(chan struct{}, s.cfg.MaxInFlight),
		fetchTok: make(chan struct{}, 1), lis: lis, listenerZone: lis.Zone}
	anon := security.Anonymous
	c.principal.Store(&anon)
	if s.cfg.Traffic != nil {
		// Whose bytes these are is known from the first request on (zones.go): until
		// then they are held back, then counted under the client's zone or as a peer
		// broker's connection (kind link).
		c.tc = s.cfg.Traffic.PendingConn(nc)
		c.nc = c.tc
	}
	if lis.TLS != nil {
		// Above the byte counter: the bytes counted are the ones on the wire.
		c.nc = tls.Server(c.nc, lis.TLS)
	}
	return c
}

// Principal is who the client is (security.Anonymous until it authenticates).
func (c *conn) Principal() security.Principal { return *c.principal.Load() }

// setPrincipal records who the client authenticated as (SASL, a TLS client certificate).
func (c *conn) setPrincipal(p security.Principal) { c.principal.Store(&p) }

// tlsHandshake completes the TLS handshake of a TLS listener's connection before its
// first request, so the principal of a client certificate is known to every handler.
func (c *conn) tlsHandshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.s.metrics.tlsFailures.Inc()
		c.s.log.Info("TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
		return err
	}
	tc.SetDeadline(time.Time{})
	name, err := c.s.cfg.PrincipalRules.Principal(tc.ConnectionState())
	if err != nil {
		c.s.metrics.tlsFailures.Inc()
		c.s.log.Info("TLS client certificate refused", "remote", c.nc.RemoteAddr().String(), "err", err)
		return err
	}
	if name != "" {
		c.setPrincipal(security.User(name))
	}
	return nil
}

func (c *conn) serve() {
	c.s.metrics.connections.Inc()
	defer c.s.metrics.connections.Dec()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
		c.s.log.Debug("connection closed", "remote", c.nc.RemoteAddr().String(), "err", err)
	}
	close(c.slots)
	<-done
	c.cancel()
	if !c.answered.Load() && c.s.ctx.Err() != nil {
		resetOnClose(c.nc) // the server is closing: see resetOnClose
	}
	c.nc.Close()
	if c.tc != nil {
		c.tc.Settle(routing.UnknownZone, routing.KindClientOther)
	}
}

func (c *conn) readLoop() (err error) {
	defer func() {
		// Handlers recover their own panics (dispatch); this is for the reading and
		// parsing around them, which must not take the broker down either.
		if r := recover(); r != nil {
			c.s.recovered(c, -1, r)
			err = errPanic
		}
	}()
	if err := c.tlsHandshake(); err != nil {
		return err
	}
	var size [4]byte
	r := bufio.NewReaderSize(c.nc, readBufSize)
	for {
		// Idle until the next frame's first byte; from then on the frame has a deadline
		// of its own (sasl_preauth.go).
		c.nc.SetReadDeadline(c.idleDeadline())
		if _, err := r.Peek(1); err != nil {
			return err
		}
		start := time.Now()
		c.nc.SetReadDeadline(c.frameDeadline(start, 0))
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		pre := c.preAuth()
		limit := c.s.cfg.MaxRequestBytes
		if pre {
			limit = min(limit, maxPreAuthFrame)
		}
		// The header alone is 8 bytes; anything beyond the limit is refused before
		// allocating so a hostile size cannot exhaust memory.
		if n < 8 || n > limit {
			c.s.metrics.badFrames.Inc()
			c.s.lim.badFrameLog.Warn("closing connection: request frame size out of bounds", "remote", c.nc.RemoteAddr().String(), "size", n, "max", limit, "unauthenticated", pre)
			return fmt.Errorf("%w: %d", errFrameSize, n)
		}
		deadline := c.frameDeadline(start, int(n))
		c.nc.SetReadDeadline(deadline)
		pool := c.s.lim.pool(int(n), pre)
		if pre {
			// Before authentication only a few keys are served: anything else is refused
			// before its body is read, let alone parsed.
			key, err := peekKey(r)
			if err != nil {
				return err
			}
			if err := c.saslGate(key); err != nil {
				return err
			}
		}
		body, held, err := c.readBody(r, int(n), pool, pre, &deadline)
		if err != nil {
			return err
		}
		s, req, err := c.parse(body)
		if err != nil {
			c.s.lim.release(pool, held)
			c.s.metrics.badFrames.Inc()
			c.s.lim.badFrameLog.Warn("closing connection: malformed request", "remote", c.nc.RemoteAddr().String(), "err", err)
			return err
		}
		if err := c.saslGate(s.key); err != nil {
			c.s.lim.release(pool, held)
			return err
		}
		s.held, s.pool, s.size = held, pool, int(n)
		if err := c.waitMuted(); err != nil {
			c.s.lim.release(s.pool, held)
			return err
		}
		// The token is given back by the writer once the answer is written, so this
		// bounds every request of the connection, those on blocking handlers included.
		select {
		case c.inflight <- struct{}{}:
		default:
			c.s.lim.inFlightWaits.Inc()
			select {
			case c.inflight <- struct{}{}:
			case <-c.ctx.Done():
				c.s.lim.release(s.pool, held)
				return c.ctx.Err()
			}
		}
		if req != nil && req.Key() == 1 && !c.oneFetch(s) {
			<-c.inflight
			c.s.lim.release(s.pool, held)
			return c.ctx.Err()
		}
		c.slots <- s // never blocks: the queue has room for every token
		if s.closeIt {
			return nil
		}
		if req != nil {
			c.s.dispatch(c, s, req)
		}
	}
}

var errPanic = errors.New("kafka: panic while serving the connection")

// waitMuted holds the request just read while the client is throttled by its quota.
func (c *conn) waitMuted() error {
	d := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// mute holds the connection's next request for d (quota throttling).
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// oneFetch waits until the connection's previous fetch answer has been written. A fetch
// answer is up to --fetch-max-bytes of records in memory until it is written, so a client
// that pipelines fetches and never reads could otherwise make the broker hold
// MaxInFlight of them; clients send one fetch per connection at a time anyway. Taken in
// request order on the reader before the slot is queued (fetch handlers run on
// goroutines of their own: a later fetch taking it first would wait forever for the
// writer, which waits for the earlier).
func (c *conn) oneFetch(s *slot) bool {
	select {
	case c.fetchTok <- struct{}{}:
	default:
		c.s.lim.inFlightWaits.Inc()
		select {
		case c.fetchTok <- struct{}{}:
		case <-c.ctx.Done():
			return false
		}
	}
	s.fetchTok = true
	return true
}

// readBody reads a frame body of n bytes. Memory is taken only for bytes the client has
// started sending (a client announcing 100 MiB and sending nothing costs nothing), each
// piece taken from the request budget before it is allocated: when the budget is used up
// the reader waits (backpressure). The first quarter of a frame is read in chunks as its
// bytes arrive; then (or as soon as the rest is already buffered) the whole body is
// allocated once, the chunks copied in and the rest read in place. So a frame holds at most
// four times what its client has sent (plus a 4 KiB chunk), and a large frame costs one
// extra copy of a quarter of it. It returns the budget bytes held for the body; on error it
// has given them back. Time spent waiting for budget is added to the frame's read
// deadline: a client is not closed for the broker's backpressure.
//
// Before authentication (pre, sasl_preauth.go) the whole frame is read in chunks of at
// most what has arrived (at least 4 KiB), never ahead of the bytes: a stalled
// unauthenticated frame holds what its client sent and 4 KiB, not four times as much.
func (c *conn) readBody(r *bufio.Reader, n int, pool *budget, pre bool, deadline *time.Time) (body []byte, held int64, err error) {
	defer func() {
		if err != nil {
			c.s.lim.release(pool, held)
			body, held = nil, 0
		}
	}()
	take := func(k int, partial bool) error {
		t0 := time.Now()
		err := c.s.lim.take(c.ctx, pool, int64(k), partial)
		if waited := time.Since(t0); waited > time.Millisecond {
			*deadline = deadline.Add(waited)
			c.nc.SetReadDeadline(*deadline)
		}
		if errors.Is(err, errBudgetTimeout) {
			c.s.lim.budgetLog.Warn("closing connection: its partly read request got no budget in time (--queued-max-request-bytes)",
				"remote", c.nc.RemoteAddr().String(), "size", n, "wait", c.s.lim.cfg.BudgetWait)
		}
		if err == nil {
			held += int64(k)
		}
		return err
	}
	var chunks [][]byte
	quarter := (n + 3) / 4
	if pre {
		quarter = n
	}
	got, size := 0, 0
	for {
		// Wait for the first byte before taking anything; later chunks follow bytes that
		// are flowing, each at most twice the one before.
		if got == 0 {
			if _, err = r.Peek(1); err != nil {
				return
			}
		}
		if got >= quarter || r.Buffered() >= n-got {
			if err = take(n-got, got > 0); err != nil {
				return
			}
			body = make([]byte, n)
			off := 0
			for _, ch := range chunks {
				off += copy(body[off:], ch)
			}
			_, err = io.ReadFull(r, body[got:])
			return body, held, err
		}
		size = min(quarter-got, max(minBodyChunk, r.Buffered(), min(2*size, maxBodyChunk)))
		if pre {
			size = min(quarter-got, max(minBodyChunk, r.Buffered()))
		}
		if err = take(size, got > 0); err != nil {
			return
		}
		chunk := make([]byte, size)
		chunks = append(chunks, chunk)
		var k int
		k, err = io.ReadFull(r, chunk)
		got += k
		if err != nil {
			return
		}
	}
}

// reqHeader is the part of a request header the broker uses.
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     string
}

// errUnsupported marks a request whose key or version the broker does not serve.
var errUnsupported = errors.New("kafka: unsupported API key or version")

// parseRequest decodes a request frame's header and body. A key or version outside
// the registry returns the header with errUnsupported; anything malformed returns
// another error, after which the connection is closed (as Kafka does).
// s says which keys are served (nil: those served whatever the configuration).
func parseRequest(s *Server, body []byte) (reqHeader, kmsg.Request, error) {
	rd := kbin.Reader{Src: body}
	h := reqHeader{key: rd.Int16(), version: rd.Int16(), corr: rd.Int32()}
	if cid := rd.NullableString(); cid != nil {
		h.clientID = *cid
	}
	if !rd.Ok() {
		return h, nil, errors.New("kafka: truncated request header")
	}
	a, known := apis[h.key]
	if !known || !a.served(s) || h.version < a.min || h.version > a.max {
		return h, nil, errUnsupported // a feature that is off here is as an unknown key
	}
	var req kmsg.Request
	if a.newReq != nil {
		req = a.newReq()
	} else {
		req = kmsg.RequestForKey(h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return h, nil, errors.New("kafka: truncated request header tags")
		}
	}
	if h.key == 0 {
		if err := checkProduceShape(h.version, rd.Src); err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		return h, nil, fmt.Errorf("kafka: decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// parse turns a frame into a response slot and the request to dispatch. Requests the
// broker cannot serve get a slot with a pre-made answer: ApiVersions above our range gets
// the v0 answer with UNSUPPORTED_VERSION (clients then retry with a version we have); any
// other unknown key or version gets UNSUPPORTED_VERSION and the connection is closed,
// since no answer could be encoded in a format the client would parse.
func (c *conn) parse(body []byte) (*slot, kmsg.Request, error) {
	h, req, err := parseRequest(c.s, body)
	if err != nil && !errors.Is(err, errUnsupported) {
		return nil, nil, err
	}
	s := &slot{corr: h.corr, key: h.key, clientID: h.clientID, start: time.Now(), done: make(chan kmsg.Response, 1)}
	if err != nil {
		c.s.metrics.unsupported.Inc()
		if h.key == 18 {
			resp := apiVersionsResponse(c.s, 0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			s.done <- resp
			return s, nil, nil
		}
		c.s.log.Warn("unsupported request; closing connection", "remote", c.nc.RemoteAddr().String(), "key", h.key, "version", h.version)
		s.raw = binary.BigEndian.AppendUint16(nil, uint16(kerr.UnsupportedVersion.Code))
		s.closeIt = true
		return s, nil, nil
	}
	s.flex = req.IsFlexible() && h.key != 18 // ApiVersions answers always use header v0
	return s, req, nil
}

// waitsByDesign tells requests whose duration includes a wait the client asked for
// (Fetch's max wait, a group's rebalance, the brokers' internal long polls): they are
// slow without anything being wrong, so they never trigger a slow-request trace.
func waitsByDesign(key int16) bool {
	switch key {
	case 1, 11, 14, InternalKey:
		return true
	}
	return false
}

// respond hands a finished response to the writer. It never blocks.
func (s *slot) respond(resp kmsg.Response) { s.done <- resp }

func (c *conn) writeLoop() {
	var w *bufio.Writer // made with the first answer: a connection that never gets one costs less
	var buf []byte
	broken := false
	for s := range c.slots {
		if !broken {
			if w == nil {
				w = bufio.NewWriterSize(c.nc, writeBufSize)
			}
			broken = c.writeSlot(w, s, &buf)
		}
		// Answered, or dropped with the connection: the request's bytes (produce batches
		// are sub-slices of them, alive until the WAL write is done, which precedes the
		// answer) and its pipelining token are free again.
		c.s.lim.release(s.pool, s.held)
		if s.fetchTok {
			<-c.fetchTok
		}
		<-c.inflight
	}
	if !broken && w != nil {
		w.Flush()
	}
}

// writeSlot waits for a slot's answer and writes it; it reports whether the connection
// is broken (then the remaining slots are only drained, so the reader never blocks).
func (c *conn) writeSlot(w *bufio.Writer, s *slot, buf *[]byte) (broken bool) {
	defer func() {
		// Encoding a response a handler built wrongly panics here, on the writer.
		if r := recover(); r != nil {
			c.s.recovered(c, s.key, r)
			broken = true
		}
	}()
	var resp kmsg.Response
	if s.raw == nil {
		select {
		case resp = <-s.done:
		case <-c.ctx.Done():
			return true
		}
	}
	if s.raw == nil {
		if d := c.s.lim.q.throttle(s, s.size, resp); d > 0 {
			c.mute(d)
		}
	}
	took := time.Since(s.start)
	c.s.metrics.observe(s.key, took, resp)
	if !waitsByDesign(s.key) {
		c.s.cfg.SlowRequests.Observe(kmsg.NameForKey(s.key), took)
	}
	if resp == nil && s.raw == nil {
		if s.closeIt {
			c.nc.Close()
			return true
		}
		return false // acks=0 produce
	}
	if need := encodedSizeHint(resp); cap(*buf) < need {
		*buf = make([]byte, 0, need) // one allocation, not a doubling series of copies
	}
	b := append((*buf)[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(s.corr))
	if s.raw != nil {
		b = append(b, s.raw...)
	} else {
		if s.flex {
			b = append(b, 0)
		}
		b = resp.AppendTo(b)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	*buf = b
	c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := w.Write(b)
	if err == nil && (len(c.slots) == 0 || s.closeIt) {
		err = w.Flush()
	}
	if err == nil && !c.answered.Load() && !setUpKey(s.key) && w.Buffered() < len(b) {
		c.answered.Store(true) // at least part of it reached the socket; stored once
	}
	if cap(*buf) > 1<<20 {
		*buf = nil // don't pin a huge fetch answer for the connection's lifetime
	}
	if err != nil || s.closeIt {
		c.nc.Close()
		c.cancel()
		return true
	}
	return false
}

// encodedSizeHint estimates the encoded size of a response whose size is dominated by
// record data (fetch answers of many MiB): growing the buffer by appending would copy the
// data several times and fault in fresh memory each time (it was 40% of a cold read's
// CPU at 8 MiB per partition).
func encodedSizeHint(resp kmsg.Response) int {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += 64 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 96 + len(p.RecordBatches) + 40*len(p.AbortedTransactions)
		}
	}
	return n
}

// setUpKey reports the requests that set a connection up rather than use it: answering
// them does not make a connection answered (see conn.answered).
func setUpKey(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}
