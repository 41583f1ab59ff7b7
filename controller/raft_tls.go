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
//
// A CA that also signs brokers' or clients' certificates would let their holders vote
// and append: RaftPrincipals (--raft-tls-principals) pins the principals (subject DN,
// after --controller-tls-principal-mapping-rules) a Raft peer's certificate must have,
// checked both ways (the accepting side checks the dialler's, the dialler the
// acceptor's). Without it any certificate of the CA is a peer (warned at start).

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
	srv, client := src.Server(), src.Client()
	if len(cfg.RaftPrincipals) > 0 {
		rules, err := tlsconf.ParsePrincipalRules(cfg.PrincipalRules)
		if err != nil {
			return nil, fmt.Errorf("controller: raft TLS: %w", err)
		}
		check := pinPrincipals(rules, cfg.RaftPrincipals)
		inner := srv.GetConfigForClient
		srv.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := inner(h)
			if c != nil {
				c = c.Clone()
				c.VerifyConnection = check
			}
			return c, err
		}
		client.VerifyConnection = check
	} else if cfg.Logger != nil {
		cfg.Logger.Warn("--raft-tls without --raft-tls-principals: any certificate of --controller-tls-ca can take part in Raft")
	}
	s.Listener = tls.NewListener(cfg.RaftListener, srv)
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

// pinPrincipals returns a tls VerifyConnection that refuses a peer whose verified
// certificate's principal is not one of allowed.
func pinPrincipals(rules tlsconf.PrincipalRules, allowed []string) func(tls.ConnectionState) error {
	set := map[string]bool{}
	for _, p := range allowed {
		set[p] = true
	}
	return func(cs tls.ConnectionState) error {
		p, err := rules.Principal(cs)
		if err != nil {
			return err
		}
		if !set[p] {
			return fmt.Errorf("controller: raft TLS: peer certificate %q is not one of --raft-tls-principals", p)
		}
		return nil
	}
}
