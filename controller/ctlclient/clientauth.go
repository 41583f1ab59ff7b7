package ctlclient

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/token"
)

// clientSecurity is how a Client proves itself to the controllers (controller/auth.go).
type clientSecurity struct {
	tokens *token.File // nil: no Authorization header
	tls    *tls.Config // nil: plain HTTP
	scheme string      // "http" or "https"
}

func newClientSecurity(cfg *ClientConfig) (clientSecurity, error) {
	s := clientSecurity{scheme: "http"}
	if cfg.TokenFile != "" {
		f, err := token.Load(cfg.TokenFile, cfg.Logger)
		if err != nil {
			return s, fmt.Errorf("controller client: %w", err)
		}
		s.tokens = f
	}
	if s.tokens != nil && !cfg.TLS.Enabled() && !cfg.InsecurePlaintextToken {
		return s, fmt.Errorf("controller client: %w: a cluster token file without controller TLS would send the cluster's key over plain HTTP; "+
			"set --controller-tls-ca (or --insecure-plaintext-token)", ErrBadConfig)
	}
	if cfg.TLS.Enabled() {
		src, err := tlsconf.New(cfg.TLS, cfg.Logger)
		if err != nil {
			return s, fmt.Errorf("controller client: TLS: %w", err)
		}
		s.tls, s.scheme = src.Client(), "https"
	}
	return s, nil
}

func (s *clientSecurity) authorize(req *http.Request) {
	if s.tokens != nil {
		req.Header.Set("Authorization", "Bearer "+s.tokens.Bearer())
	}
}

// BindSecurityFlags registers the flags of a controller client's credentials:
// --cluster-token-file, --controller-tls-ca, --controller-tls-cert,
// --controller-tls-key and --controller-tls-server-name.
func (cfg *ClientConfig) BindSecurityFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.TokenFile, "cluster-token-file", cfg.TokenFile, "file of the cluster's shared token(s), one per line (the first is sent): "+
		"what the controllers (and, for a broker, the other brokers) require when they have one")
	fs.StringVar(&cfg.TLS.CAFile, "controller-tls-ca", cfg.TLS.CAFile, "PEM CA bundle verifying the controllers' certificates; setting it (or --controller-tls-cert) makes the controller API calls HTTPS")
	fs.StringVar(&cfg.TLS.CertFile, "controller-tls-cert", cfg.TLS.CertFile, "PEM client certificate presented to the controllers (mutual TLS; reloaded when the file changes)")
	fs.StringVar(&cfg.TLS.KeyFile, "controller-tls-key", cfg.TLS.KeyFile, "PEM private key of --controller-tls-cert")
	fs.BoolVar(&cfg.InsecurePlaintextToken, "insecure-plaintext-token", cfg.InsecurePlaintextToken, "allow --cluster-token-file with plain-HTTP controllers (the key crosses the network in the clear)")
	fs.StringVar(&cfg.TLS.ServerName, "controller-tls-server-name", cfg.TLS.ServerName, "name verified in the controllers' certificates (default: the host dialled)")
}

// APIAuthRequired implements metadata.ControllerAuth: whether the controllers' API
// refuses unauthenticated callers (ctlwire.Status.AuthRequired of the first controller
// that answers). A broker enforcing ACLs asks before it starts: ACLs are worthless if
// anyone may change them there.
func (c *Client) APIAuthRequired(ctx context.Context) (bool, error) {
	var err error
	for i := range c.cfg.Controllers {
		var st ctlwire.Status
		if st, err = c.Status(ctx, i); err == nil {
			return st.AuthRequired, nil
		}
	}
	return false, err
}
