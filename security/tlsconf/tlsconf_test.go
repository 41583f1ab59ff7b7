package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/security/tlstest"
)

// tick moves the source's clock past CheckEvery, so the next handshake looks at the files.
func tick(s *Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.checked
	s.now = func() time.Time { return base.Add(CheckEvery + time.Millisecond) }
}

// serve runs a TLS server with cfg on 127.0.0.1 until the test ends; each accepted
// connection completes its handshake and reports its state (or error) on the channel.
type result struct {
	cs  tls.ConnectionState
	err error
}

func serve(t *testing.T, cfg *tls.Config) (string, <-chan result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan result, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(nc, cfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			err = tc.Handshake()
			if err == nil {
				// TLS 1.3: the client learns of a refused certificate on its first read.
				tc.Write([]byte{1})
			}
			out <- result{tc.ConnectionState(), err}
			tc.Close()
		}
	}()
	return ln.Addr().String(), out
}

// dial completes a handshake with cfg and reads the server's first byte; it returns the
// leaf certificate the server presented.
func dial(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := tc.Read(b[:]); err != nil {
		return nil, err
	}
	return tc.ConnectionState().PeerCertificates[0], nil
}

func serialOf(t *testing.T, certFile string) *big.Int {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

func newCA(t *testing.T) *tlstest.CA {
	t.Helper()
	ca, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t *testing.T, ca *tlstest.CA, name, cn string, hosts ...string) tlstest.Pair {
	t.Helper()
	p, err := ca.Issue(name, cn, hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newSource(t *testing.T, f Files) *Source {
	t.Helper()
	s, err := New(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A certificate renewed on disk is what the next handshake presents, without a restart;
// a renewal caught half-written (or with its key not written yet) keeps the previous
// certificate in use, and the complete one is picked up once it is there.
func TestServerReloadsRenewedCertificate(t *testing.T) {
	ca := newCA(t)
	first := issue(t, ca, "server", "broker")
	src := newSource(t, Files{CertFile: first.CertFile, KeyFile: first.KeyFile})
	addr, _ := serve(t, src.Server())
	client := &tls.Config{RootCAs: pool(t, ca)}
	s1 := serialOf(t, first.CertFile)
	expect := func(what string, want *big.Int) {
		t.Helper()
		leaf, err := dial(addr, client)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if leaf.SerialNumber.Cmp(want) != 0 {
			t.Fatalf("%s: served serial %v, want %v", what, leaf.SerialNumber, want)
		}
	}
	expect("first certificate", s1)

	// Renewed (same files, written by rename as certificate managers do).
	issue(t, ca, "server", "broker")
	s2 := serialOf(t, first.CertFile)
	if s2.Cmp(s1) == 0 {
		t.Fatal("the renewal has the same serial")
	}
	expect("renewed but not looked at yet (CheckEvery)", s1)
	tick(src)
	expect("renewed certificate", s2)

	// A half-written certificate file: the previous one stays in use.
	next := issue(t, ca, "next", "broker")
	nextCert, _ := os.ReadFile(next.CertFile)
	nextKey, _ := os.ReadFile(next.KeyFile)
	if err := os.WriteFile(first.CertFile, nextCert[:len(nextCert)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	tick(src)
	expect("half-written certificate", s2)

	// The whole certificate but the old key: still the previous pair.
	if err := os.WriteFile(first.CertFile, nextCert, 0o600); err != nil {
		t.Fatal(err)
	}
	tick(src)
	expect("certificate without its key", s2)

	// The key arrives: the new pair is served.
	if err := os.WriteFile(first.KeyFile, nextKey, 0o600); err != nil {
		t.Fatal(err)
	}
	tick(src)
	expect("certificate and key", serialOf(t, next.CertFile))

	// A certificate file removed: the last good pair is kept.
	os.Remove(first.CertFile)
	tick(src)
	expect("certificate file removed", serialOf(t, next.CertFile))
}

func pool(t *testing.T, ca *tlstest.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// With client auth "require", a client without a certificate is refused at the
// handshake, one with a certificate from the CA is accepted and named by its CN, and one
// from another CA is refused.
func TestServerRequiresClientCertificate(t *testing.T) {
	ca := newCA(t)
	srv := issue(t, ca, "server", "broker")
	src := newSource(t, Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: "require"})
	addr, results := serve(t, src.Server())

	anon := newSource(t, Files{CAFile: ca.CAFile})
	if _, err := dial(addr, anon.Client()); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if r := <-results; r.err == nil {
		t.Fatal("the server completed a handshake without a client certificate")
	}

	alice := issue(t, ca, "alice", "alice")
	cl := newSource(t, Files{CertFile: alice.CertFile, KeyFile: alice.KeyFile, CAFile: ca.CAFile})
	if _, err := dial(addr, cl.Client()); err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	r := <-results
	if r.err != nil || PeerName(r.cs) != "alice" {
		t.Fatalf("server side: err %v, peer %q, want alice", r.err, PeerName(r.cs))
	}

	other := newCA(t)
	mallory := issue(t, other, "mallory", "mallory")
	ml := newSource(t, Files{CertFile: mallory.CertFile, KeyFile: mallory.KeyFile, CAFile: ca.CAFile})
	if _, err := dial(addr, ml.Client()); err == nil {
		t.Fatal("a client with another CA's certificate was served")
	}
	if r := <-results; r.err == nil || PeerName(r.cs) != "" {
		t.Fatalf("another CA's certificate: err %v, peer %q", r.err, PeerName(r.cs))
	}
}

// The client checks the server's name or IP address, also when it dials an IP address
// (no SNI is sent then), and the chain against the CA file.
func TestClientVerifiesServer(t *testing.T) {
	ca := newCA(t)
	other := newCA(t)
	for _, tc := range []struct {
		name  string
		ca    *tlstest.CA
		hosts []string
		ok    bool
	}{
		{"IP in the certificate", ca, []string{"127.0.0.1"}, true},
		{"only a DNS name, dialled by IP", ca, []string{"localhost"}, false},
		{"another IP", ca, []string{"10.1.2.3"}, false},
		{"another CA", other, []string{"127.0.0.1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := issue(t, tc.ca, "srv", "broker", tc.hosts...)
			src := newSource(t, Files{CertFile: p.CertFile, KeyFile: p.KeyFile})
			addr, _ := serve(t, src.Server())
			cl := newSource(t, Files{CAFile: ca.CAFile})
			_, err := dial(addr, cl.Client())
			if (err == nil) != tc.ok {
				t.Fatalf("dial: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// InsecureSkipVerify accepts anything (debugging).
	p := issue(t, other, "srv2", "broker", "10.1.2.3")
	src := newSource(t, Files{CertFile: p.CertFile, KeyFile: p.KeyFile})
	addr, _ := serve(t, src.Server())
	cl := newSource(t, Files{InsecureSkipVerify: true})
	if _, err := dial(addr, cl.Client()); err != nil {
		t.Fatalf("insecure: %v", err)
	}
}

// A CA bundle renewed on disk applies to the client configurations made after it.
func TestClientCABundleReload(t *testing.T) {
	ca, next := newCA(t), newCA(t)
	p := issue(t, next, "srv", "broker")
	src := newSource(t, Files{CertFile: p.CertFile, KeyFile: p.KeyFile})
	addr, _ := serve(t, src.Server())
	cl := newSource(t, Files{CAFile: ca.CAFile})
	if _, err := dial(addr, cl.Client()); err == nil {
		t.Fatal("verified against the wrong CA")
	}
	if err := os.WriteFile(ca.CAFile, append(append([]byte{}, ca.CertPEM...), next.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	tick(cl)
	if _, err := dial(addr, cl.Client()); err != nil {
		t.Fatalf("after the CA bundle was renewed: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, f := range []Files{
		{CertFile: "c.pem"},
		{KeyFile: "k.pem"},
		{CertFile: "c", KeyFile: "k", ClientAuth: "always"},
		{CertFile: "c", KeyFile: "k", ClientAuth: "require"},
	} {
		if err := f.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", f, err)
		}
	}
	dir := t.TempDir()
	ca := newCA(t)
	p := issue(t, ca, "x", "x")
	for _, f := range []Files{
		{CertFile: dir + "/missing.pem", KeyFile: p.KeyFile},
		{CertFile: p.CertFile, KeyFile: ca.CAFile}, // not a key
		{CAFile: p.KeyFile},                        // no certificates
	} {
		if _, err := New(f, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): %v, want ErrConfig", f, err)
		}
	}
}
