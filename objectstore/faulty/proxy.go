package faulty

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// HTTPFault is what the Proxy does to a request a rule picks.
type HTTPFault int

const (
	// SlowDown answers 503 with an S3 SlowDown error document.
	SlowDown HTTPFault = iota
	// InternalError answers 500 with an S3 InternalError error document.
	InternalError
	// Hang reads the request and never answers (until the client gives up or the
	// proxy closes).
	Hang
	// Reset resets the connection (TCP RST) before answering.
	Reset
	// ResetMidBody forwards the request, sends the status, the headers and the first
	// HTTPRule.After bytes of the body, then resets the connection.
	ResetMidBody
)

func (f HTTPFault) String() string {
	switch f {
	case SlowDown:
		return "slowdown"
	case InternalError:
		return "internal-error"
	case Hang:
		return "hang"
	case Reset:
		return "reset"
	case ResetMidBody:
		return "reset-mid-body"
	}
	return fmt.Sprintf("HTTPFault(%d)", int(f))
}

// HTTPRule picks requests. S3 operations by request: PUT object = PUT; GET object = GET
// (with a Range header for a ranged get); ListObjectsV2 = GET with "list-type=2" in the
// query; HEAD object = HEAD; DELETE object = DELETE.
type HTTPRule struct {
	// Method matches the request method ("" = any).
	Method string
	// PathContains matches a substring of the URL path ("" = any), e.g. a key.
	PathContains string
	// QueryContains matches a substring of the raw query ("" = any).
	QueryContains string
	// Times is how many requests the rule faults before it is used up; 0 = unlimited.
	Times int
	Fault HTTPFault
	// After is the body bytes ResetMidBody lets through.
	After int64
}

type httpRule struct {
	HTTPRule
	hits int
}

// Proxy is an HTTP reverse proxy on a loopback port in front of an S3 server; it passes
// requests through unless a rule picks them. Point the s3 store's Endpoint at URL.
// The Host header is passed unchanged, so SigV4 signatures stay valid.
type Proxy struct {
	// URL is http://127.0.0.1:<port>.
	URL string

	ln      net.Listener
	srv     *http.Server
	rp      *httputil.ReverseProxy
	closing chan struct{}
	once    sync.Once

	mu       sync.Mutex
	rules    []*httpRule
	requests int
	faults   map[HTTPFault]int
}

// NewProxy starts a proxy to target (e.g. a MinIO endpoint).
func NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:     "http://" + ln.Addr().String(),
		ln:      ln,
		closing: make(chan struct{}),
		faults:  map[HTTPFault]int{},
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // signed by the client
		},
		// Pass-through failures (a client that gave up, a server that went away) become
		// 502s, which the client maps like any 5xx; no need to log them.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Inject adds a rule; rules are checked in order, the first that picks a request wins.
func (p *Proxy) Inject(r HTTPRule) {
	p.mu.Lock()
	p.rules = append(p.rules, &httpRule{HTTPRule: r})
	p.mu.Unlock()
}

// Clear removes every rule.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.rules = nil
	p.mu.Unlock()
}

// Requests returns how many requests reached the proxy.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Faults returns how many requests got fault f.
func (p *Proxy) Faults(f HTTPFault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[f]
}

// Close stops the proxy, releases hung requests and closes every connection.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.closing)
		err = p.srv.Close()
	})
	return err
}

func (p *Proxy) pick(r *http.Request) *HTTPRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	for _, ru := range p.rules {
		if ru.Method != "" && ru.Method != r.Method ||
			!strings.Contains(r.URL.Path, ru.PathContains) ||
			!strings.Contains(r.URL.RawQuery, ru.QueryContains) ||
			ru.Times > 0 && ru.hits >= ru.Times {
			continue
		}
		ru.hits++
		p.faults[ru.Fault]++
		cp := ru.HTTPRule
		return &cp
	}
	return nil
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	ru := p.pick(r)
	if ru == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	switch ru.Fault {
	case SlowDown:
		_, _ = io.Copy(io.Discard, r.Body)
		writeS3Error(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case InternalError:
		_, _ = io.Copy(io.Discard, r.Body)
		writeS3Error(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case Hang:
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-p.closing:
		}
	case Reset:
		resetConn(w, false)
	case ResetMidBody:
		rw := &cutWriter{ResponseWriter: w, left: ru.After}
		defer func() {
			// ReverseProxy aborts the handler with http.ErrAbortHandler when the copy to
			// the client fails, which is what cutWriter makes happen.
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				panic(v)
			}
		}()
		p.rp.ServeHTTP(rw, r)
		if !rw.cut {
			resetConn(w, true) // the body was shorter than After: cut at its end
		}
	}
}

func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>faulty-proxy</RequestId></Error>`,
		code, msg, r.URL.Path)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
}

// resetConn takes the connection over and closes it with SO_LINGER 0, so the client
// sees a reset; with flush, what was written so far is sent first (flushing sends
// the headers, so without it the client gets no status at all).
func resetConn(w http.ResponseWriter, flush bool) {
	rc := http.NewResponseController(w)
	if flush {
		_ = rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// cutWriter passes a response through until left body bytes are written, then resets
// the connection and fails the write.
type cutWriter struct {
	http.ResponseWriter
	left int64
	cut  bool
}

var errCut = errors.New("faulty: connection reset on purpose")

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	if int64(len(b)) < c.left {
		n, err := c.ResponseWriter.Write(b)
		c.left -= int64(n)
		return n, err
	}
	n, err := c.ResponseWriter.Write(b[:c.left])
	c.left -= int64(n)
	if err != nil {
		return n, err
	}
	c.cut = true
	resetConn(c.ResponseWriter, true)
	return n, errCut
}

// Unwrap lets http.ResponseController reach the real writer (Flush, Hijack).
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
