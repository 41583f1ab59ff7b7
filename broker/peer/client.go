package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Errors of a request.
var (
	// ErrUnavailable: the request was not sent (no connection); the peer did nothing.
	ErrUnavailable = errors.New("peer: broker unavailable")
	// ErrLost: the request was sent but no answer came (the connection broke or the
	// answer took longer than the timeout); the peer may have acted on it.
	ErrLost = errors.New("peer: answer lost")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("peer: client closed")
)

// InternalKey is the API key of the requests (broker/kafka.InternalKey).
const InternalKey int16 = 10000

// maxAnswer bounds an answer's frame.
const maxAnswer = 64 << 20

// Config configures a Client.
type Config struct {
	// ClientID goes in every request header.
	ClientID string
	// DialTimeout bounds a connection attempt; Timeout an answer's wait (the connection
	// is then closed and every pending request fails with ErrLost).
	DialTimeout time.Duration
	Timeout     time.Duration
	// Dial opens connections (nil: net.Dialer); Wrap, when set, wraps each (byte
	// accounting).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	Wrap func(net.Conn) net.Conn
	// TLS, when set, makes connections TLS (the other broker's listener is TLS); an
	// empty ServerName is the dialled host. Token, when set, returns the cluster token
	// this broker proves it knows (auth.go) before any other request on a connection;
	// BrokerID is this broker's ID, bound into the proof.
	TLS      *tls.Config
	Token    func() []byte
	BrokerID int32
}

// DefaultConfig returns the defaults: 2 s to connect, 10 s for an answer.
func DefaultConfig() Config {
	return Config{ClientID: "weir-broker", DialTimeout: 2 * time.Second, Timeout: 10 * time.Second}
}

// Client talks to one broker over one connection, opened on first use and again after a
// failure. Requests are pipelined: Do sends without waiting for earlier answers, and
// answers are delivered in request order.
type Client struct {
	cfg  Config
	addr string

	mu     sync.Mutex
	cc     *clientConn
	closed bool
}

// NewClient returns a client of the broker listening at addr.
func NewClient(addr string, cfg Config) *Client {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		cfg.Dial = d.DialContext
	}
	return &Client{cfg: cfg, addr: addr}
}

// Addr is the address the client connects to.
func (c *Client) Addr() string { return c.addr }

type call struct {
	corr int32
	sent time.Time
	done func(resp []byte, err error)
}

type clientConn struct {
	c  *Client
	nc net.Conn
	w  *bufio.Writer

	mu      sync.Mutex // order of writes and of the pending queue
	pending []*call
	corr    int32
	err     error
	stop    chan struct{}
}

// Do sends body and calls done with the answer's body or an error, exactly once, from
// the connection's reader goroutine (done must not block). Calls of one goroutine go on
// the wire, and are answered, in call order.
func (c *Client) Do(body []byte, done func(resp []byte, err error)) {
	cc, err := c.conn()
	if err != nil {
		done(nil, err)
		return
	}
	if err := cc.send(body, done); err != nil {
		done(nil, err)
	}
}

// Call is Do waiting for the answer (or ctx).
func (c *Client) Call(ctx context.Context, body []byte) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	c.Do(body, func(b []byte, err error) { ch <- res{b, err} })
	select {
	case r := <-ch:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrLost, ctx.Err())
	}
}

func (c *Client) conn() (*clientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cc != nil && c.cc.alive() {
		return c.cc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	defer cancel()
	nc, err := c.cfg.Dial(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.addr, err)
	}
	if c.cfg.Wrap != nil {
		nc = c.cfg.Wrap(nc)
	}
	// The handshakes happen here, before the connection takes requests, so no request
	// is ever sent on a connection the peer would refuse.
	var corr int32
	if nc, corr, err = c.secure(ctx, nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.addr, err)
	}
	cc := &clientConn{c: c, nc: nc, w: bufio.NewWriterSize(nc, 64<<10), stop: make(chan struct{}), corr: corr}
	go cc.readLoop()
	go cc.watch()
	c.cc = cc
	return cc, nil
}

// Close closes the connection; pending requests fail with ErrLost.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	cc := c.cc
	c.mu.Unlock()
	if cc != nil {
		cc.fail(ErrClosed)
	}
}

func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err == nil
}

func (cc *clientConn) send(body []byte, done func([]byte, error)) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, cc.err)
	}
	cc.corr++
	id := cc.c.cfg.ClientID
	var hdr [4 + 2 + 2 + 4 + 2]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(2+2+4+2+len(id)+len(body)))
	binary.BigEndian.PutUint16(hdr[4:], uint16(InternalKey))
	binary.BigEndian.PutUint16(hdr[6:], 0)
	binary.BigEndian.PutUint32(hdr[8:], uint32(cc.corr))
	binary.BigEndian.PutUint16(hdr[12:], uint16(len(id)))
	cc.nc.SetWriteDeadline(time.Now().Add(cc.c.cfg.Timeout))
	cc.w.Write(hdr[:])
	cc.w.WriteString(id)
	cc.w.Write(body)
	if err := cc.w.Flush(); err != nil {
		cc.err = err
		cc.nc.Close()
		// Part of the frame may have left: the peer may have the request.
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	cc.pending = append(cc.pending, &call{corr: cc.corr, sent: time.Now(), done: done})
	return nil
}

func (cc *clientConn) readLoop() {
	r := bufio.NewReaderSize(cc.nc, 64<<10)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			cc.fail(err)
			return
		}
		n := int32(binary.BigEndian.Uint32(hdr[:]))
		corr := int32(binary.BigEndian.Uint32(hdr[4:]))
		if n < 4 || n > maxAnswer {
			cc.fail(fmt.Errorf("answer frame of %d bytes", n))
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			cc.fail(err)
			return
		}
		cc.mu.Lock()
		if len(cc.pending) == 0 || cc.pending[0].corr != corr {
			cc.mu.Unlock()
			cc.fail(fmt.Errorf("answer with correlation id %d out of order", corr))
			return
		}
		k := cc.pending[0]
		cc.pending[0] = nil
		cc.pending = cc.pending[1:]
		cc.mu.Unlock()
		k.done(body, nil)
	}
}

// watch closes a connection whose oldest request waits longer than the timeout.
func (cc *clientConn) watch() {
	t := time.NewTicker(cc.c.cfg.Timeout / 4)
	defer t.Stop()
	for {
		select {
		case <-cc.stop:
			return
		case <-t.C:
		}
		cc.mu.Lock()
		late := len(cc.pending) > 0 && time.Since(cc.pending[0].sent) > cc.c.cfg.Timeout
		cc.mu.Unlock()
		if late {
			cc.fail(fmt.Errorf("no answer within %v", cc.c.cfg.Timeout))
			return
		}
	}
}

// fail closes the connection and fails every pending request with ErrLost.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
		close(cc.stop)
	}
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	cc.nc.Close()
	for _, k := range pending {
		k.done(nil, fmt.Errorf("%w: %s: %w", ErrLost, cc.c.addr, err))
	}
}
