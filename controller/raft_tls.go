package controller

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/weir-io/weir/security/tlsconf"
)

// Raft between controllers over mutual TLS (--raft-tls): both sides present the
// controller's --controller-tls-cert and verify the other's against
// --controller-tls-ca, so only holders of a certificate of that CA can join the quorum's
// traffic (vote, append, snapshot) or read it. Certificates are reloaded like the API's
// (security/tlsconf). Every controller of a quorum must agree on it.

// newStreamLayer returns the stream layer over cfg.RaftListener: plain, or mutual TLS.
func newStreamLayer(cfg *Config, advertise net.Addr) (*streamLayer, error) {
	s := &streamLayer{Listener: cfg.RaftListener, advertise: advertise}
	if !cfg.RaftTLS {
		return s, nil
	}
	f := cfg.TLS
	f.ClientAuth = "require"
	src, err := tlsconf.New(f, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("controller: raft TLS: %w", err)
	}
	s.Listener = tls.NewListener(cfg.RaftListener, src.Server())
	client := src.Client()
	s.dial = func(addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, client)
	}
	return s, nil
}

// validateRaftTLS checks that --raft-tls has what it needs.
func (c *Config) validateRaftTLS() error {
	if !c.RaftTLS {
		return nil
	}
	if c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == "" {
		return fmt.Errorf("%w: --raft-tls needs --controller-tls-cert, --controller-tls-key and --controller-tls-ca", ErrBadConfig)
	}
	if c.RaftTransport != nil {
		return fmt.Errorf("%w: --raft-tls with an injected raft transport", ErrBadConfig)
	}
	return nil
}
