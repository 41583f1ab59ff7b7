package ctlclient

import (
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/security/tlstest"
)

// startTimeout is what each client of these tests may wait; a controller that cannot be
// used must be reported in well under half of it.
const startTimeout = 20 * time.Second

// closedAddr is a loopback address with nothing listening.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// answering is a plain HTTP server answering every request with status and body.
func answering(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// rawServer accepts connections and writes reply to each (nil: writes nothing, keeps
// them open).
func rawServer(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if reply != nil {
				c.Write(reply)
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

func hostPort(s *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "https://"), "http://")
}

// TestStartFailsFast: NewClient against controllers it cannot use reports, per
// controller, what is wrong and what to do, and gives up long before its StartTimeout
// when waiting cannot help: each case against a real listener.
func TestStartFailsFast(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes these clients fail
	tlsSrv.StartTLS()                                   // a self-signed certificate
	t.Cleanup(tlsSrv.Close)
	plain := answering(t, http.StatusOK, "{}")
	unauth := answering(t, http.StatusUnauthorized, `{"code":"unauthenticated","message":"GET /v1/metadata needs a cluster token"}`)
	forbidden := answering(t, http.StatusForbidden, "not you")
	metrics := answering(t, http.StatusNotFound, "404 page not found")
	closed := closedAddr(t)
	alert := rawServer(t, []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28}) // a TLS alert, as a TLS server answers HTTP

	for _, tc := range []struct {
		name   string
		addrs  []string
		caFile string
		kinds  []error
		want   []string
	}{
		{"connection refused", []string{closed}, "", []error{ErrRefused},
			[]string{"connection refused at " + closed, "--controllers"}},
		{"TLS server, plain client", []string{hostPort(tlsSrv)}, "", []error{ErrSpeaksTLS},
			[]string{hostPort(tlsSrv) + " speaks TLS: pass --controller-tls-ca"}},
		{"TLS alert, plain client", []string{alert}, "", []error{ErrSpeaksTLS},
			[]string{alert + " speaks TLS: pass --controller-tls-ca"}},
		{"unknown CA", []string{hostPort(tlsSrv)}, ca.CAFile, []error{ErrUnknownAuthority},
			[]string{"certificate signed by unknown authority at " + hostPort(tlsSrv) + ": check --controller-tls-ca"}},
		{"plain server, TLS client", []string{hostPort(plain)}, ca.CAFile, []error{ErrNotTLS},
			[]string{hostPort(plain) + " does not speak TLS"}},
		{"401", []string{hostPort(unauth)}, "", []error{ctlwire.ErrUnauthenticated},
			[]string{"401 at " + hostPort(unauth) + ": pass --cluster-token-file (or a client certificate"}},
		{"403", []string{hostPort(forbidden)}, "", []error{ErrForbidden},
			[]string{"403 at " + hostPort(forbidden), "not you"}},
		{"not a controller", []string{hostPort(metrics)}, "", []error{ErrNotAPI},
			[]string{hostPort(metrics) + " answered HTTP 404", "--controllers"}},
		{"each controller named", []string{closed, hostPort(unauth), hostPort(tlsSrv)}, "", []error{ErrRefused, ctlwire.ErrUnauthenticated, ErrSpeaksTLS},
			[]string{"connection refused at " + closed, "401 at " + hostPort(unauth), hostPort(tlsSrv) + " speaks TLS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultClientConfig()
			cfg.Controllers, cfg.StartTimeout, cfg.DownGrace = tc.addrs, startTimeout, time.Second
			cfg.TLS.CAFile = tc.caFile
			start := time.Now()
			cl, err := NewClient(cfg)
			took := time.Since(start)
			if err == nil {
				cl.Close()
				t.Fatal("NewClient succeeded")
			}
			if took >= startTimeout/2 {
				t.Errorf("failed after %v: not well before the start timeout %v", took, startTimeout)
			}
			var se *StartError
			if !errors.As(err, &se) || !se.GaveUp || !errors.Is(err, ErrNoController) {
				t.Errorf("%v: not a StartError that gave up", err)
			}
			for _, k := range tc.kinds {
				if !errors.Is(err, k) {
					t.Errorf("error does not match %v: %v", k, err)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "context deadline exceeded") {
				t.Errorf("error %q says only that time ran out", err)
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
		})
	}
}

// TestStartWaitsForRefused: a broker's client (DownGrace 0) keeps waiting while nothing
// listens, as a controller starting after it would; it reports progress every
// WaitingInterval, logs the failure once however often it recurs, and finally names it.
// A timeout is reported as such, not as "context deadline exceeded".
func TestStartWaitsForRefused(t *testing.T) {
	closed := closedAddr(t)
	silent := rawServer(t, nil) // accepts, never answers
	var logs testutil.Buffer
	var mu sync.Mutex
	var progress []string
	cfg := DefaultClientConfig()
	cfg.Controllers, cfg.StartTimeout, cfg.RequestTimeout = []string{closed, silent}, 3*time.Second, 300*time.Millisecond
	cfg.WaitingInterval = 500 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cfg.OnWaiting = func(waited time.Duration, status string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, fmt.Sprintf("%s (%v)", status, waited.Round(time.Millisecond)))
	}
	start := time.Now()
	cl, err := NewClient(cfg)
	if err == nil {
		cl.Close()
		t.Fatal("NewClient succeeded")
	}
	if took := time.Since(start); took < cfg.StartTimeout {
		t.Errorf("gave up after %v, before the start timeout %v: a broker waits for its controllers", took, cfg.StartTimeout)
	}
	var se *StartError
	if !errors.As(err, &se) || se.GaveUp || !errors.Is(err, ErrRefused) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("%v: want a StartError that did not give up, matching ErrRefused and ErrTimeout", err)
	}
	for _, w := range []string{"within 3s", "connection refused at " + closed, "no answer from " + silent} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) < 3 || !strings.Contains(progress[len(progress)-1], "connection refused at "+closed) {
		t.Errorf("progress reports %q: want one every 500ms naming the refusal", progress)
	}
	if n := strings.Count(logs.String(), "connection refused at "+closed); n != 1 && n != 2 {
		// Logged when first seen; the silent controller's first timeout logs the summary
		// (which names it) once more.
		t.Errorf("the refusal was logged %d times, want once (twice with the summary of the timeout):\n%s", n, logs.String())
	}
	t.Logf("error: %v\nprogress: %q", err, progress)
}

// TestClassifyDNS: a name that does not resolve is said so, and counts as down (waited
// for during DownGrace), not as permanent.
func TestClassifyDNS(t *testing.T) {
	c := &Client{}
	e := c.classifyErr("ctl-1.example:9401", fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host", Name: "ctl-1.example", IsNotFound: true}))
	if !errors.Is(e, ErrUnresolved) || e.class != down || !strings.Contains(e.Error(), "cannot resolve ctl-1.example") {
		t.Fatalf("%v (class %d)", e, e.class)
	}
	e = c.classifyErr("ctl-1.example:9401", &net.DNSError{Err: "server misbehaving", Name: "ctl-1.example", IsTemporary: true})
	if !errors.Is(e, ErrUnresolved) || e.class != transient {
		t.Fatalf("a temporary DNS failure: %v (class %d)", e, e.class)
	}
}
