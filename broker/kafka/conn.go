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
	"github.com/weir-io/weir/security/tlsconf"
)

// A connection has a reader goroutine and a writer goroutine. The reader parses each
// request and hands it to its handler in arrival order (so an idempotent producer's
// pipelined batches reach the WAL in sequence order), then queues a slot; handlers answer
// their slot whenever they finish (a produce after its fdatasync, a fetch after its wait),
// and the writer sends answers strictly in request order, as Kafka requires. The slot queue
// is bounded: when MaxInFlight answers are pending the reader stops reading the socket.

var errFrameSize = errors.New("kafka: request frame size out of bounds")

type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan *slot

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
}

func newConn(s *Server, nc net.Conn, lis *Listener) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, slots: make(chan *slot, s.cfg.MaxInFlight), lis: lis, listenerZone: lis.Zone}
	anon := security.Anonymous
	c.principal.Store(&anon)
	if s.cfg.Traffic != nil {
		// Whose bytes these are is known from the first request on (zones.go): until
		// then they are held back, then counted under the client's zone or as a peer
		// broker's link.
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
	if name := tlsconf.PeerName(tc.ConnectionState()); name != "" {
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
	c.nc.Close()
	if c.tc != nil {
		c.tc.Settle(routing.UnknownZone, routing.KindClientOther)
	}
}

func (c *conn) readLoop() error {
	if err := c.tlsHandshake(); err != nil {
		return err
	}
	var size [4]byte
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		if c.s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		}
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		// The header alone is 8 bytes; anything beyond the limit is refused before
		// allocating so a hostile size cannot exhaust memory.
		if n < 8 || n > c.s.cfg.MaxRequestBytes {
			c.s.metrics.badFrames.Inc()
			c.s.log.Warn("closing connection: request frame size out of bounds", "remote", c.nc.RemoteAddr().String(), "size", n, "max", c.s.cfg.MaxRequestBytes)
			return fmt.Errorf("%w: %d", errFrameSize, n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		s, req, err := c.parse(body)
		if err != nil {
			c.s.metrics.badFrames.Inc()
			c.s.log.Warn("closing connection: malformed request", "remote", c.nc.RemoteAddr().String(), "err", err)
			return err
		}
		if err := c.saslGate(s.key); err != nil {
			return err
		}
		select {
		case c.slots <- s:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if s.closeIt {
			return nil
		}
		if req != nil {
			c.s.dispatch(c, s, req)
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
func parseRequest(body []byte) (reqHeader, kmsg.Request, error) {
	rd := kbin.Reader{Src: body}
	h := reqHeader{key: rd.Int16(), version: rd.Int16(), corr: rd.Int32()}
	if cid := rd.NullableString(); cid != nil {
		h.clientID = *cid
	}
	if !rd.Ok() {
		return h, nil, errors.New("kafka: truncated request header")
	}
	a, known := apis[h.key]
	if !known || h.version < a.min || h.version > a.max {
		return h, nil, errUnsupported
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
	h, req, err := parseRequest(body)
	if err != nil && !errors.Is(err, errUnsupported) {
		return nil, nil, err
	}
	s := &slot{corr: h.corr, key: h.key, clientID: h.clientID, start: time.Now(), done: make(chan kmsg.Response, 1)}
	if err != nil {
		c.s.metrics.unsupported.Inc()
		if h.key == 18 {
			resp := apiVersionsResponse(0)
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

// respond hands a finished response to the writer. It never blocks.
func (s *slot) respond(resp kmsg.Response) { s.done <- resp }

func (c *conn) writeLoop() {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	broken := false
	for s := range c.slots {
		var resp kmsg.Response
		if s.raw == nil {
			select {
			case resp = <-s.done:
			case <-c.ctx.Done():
				broken = true
			}
		}
		if broken {
			continue // drain so the reader never blocks on a full queue
		}
		c.s.metrics.observe(s.key, time.Since(s.start), resp)
		if resp == nil && s.raw == nil {
			if s.closeIt {
				c.nc.Close()
				broken = true
			}
			continue // acks=0 produce
		}
		if need := encodedSizeHint(resp); cap(buf) < need {
			buf = make([]byte, 0, need) // one allocation, not a doubling series of copies
		}
		buf = append(buf[:0], 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(s.corr))
		if s.raw != nil {
			buf = append(buf, s.raw...)
		} else {
			if s.flex {
				buf = append(buf, 0)
			}
			buf = resp.AppendTo(buf)
		}
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := w.Write(buf)
		if err == nil && (len(c.slots) == 0 || s.closeIt) {
			err = w.Flush()
		}
		if err != nil || s.closeIt {
			c.nc.Close()
			c.cancel()
			broken = true
		}
		if cap(buf) > 1<<20 {
			buf = nil // don't pin a huge fetch answer for the connection's lifetime
		}
	}
	if !broken {
		w.Flush()
	}
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
