package tlsconf_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// A client dialling an IP address verifies that the server's certificate names that
// address (crypto/tls sends no SNI for IPs, so a verifier that relied on the connection
// state's server name would check the chain only).
func TestClientVerifiesDialledIP(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ca.Issue("good", "broker", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.Issue("other", "broker", "10.9.9.9", "elsewhere.example")
	if err != nil {
		t.Fatal(err)
	}
	client, err := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pair tlstest.Pair
		ok   bool
	}{{good, true}, {other, false}} {
		src, err := tlsconf.New(tlsconf.Files{CertFile: tc.pair.CertFile, KeyFile: tc.pair.KeyFile}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", src.Server())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		c, err := tls.DialWithDialer(&net.Dialer{}, "tcp", ln.Addr().String(), client.Client())
		if c != nil {
			c.Close()
		}
		ln.Close()
		if (err == nil) != tc.ok {
			t.Fatalf("certificate %s: dial error %v, want ok=%v", tc.pair.CertFile, err, tc.ok)
		}
	}
}
