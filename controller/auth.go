package controller

// Authentication of the controller API. When a cluster token file is configured
// (--cluster-token-file) or client certificates are asked for
// (--controller-tls-client-auth request|require), every route but GET /v1/status needs
// either `Authorization: Bearer <key>`, where key is the controller-API key derived from
// one of the file's tokens (token.File.Bearer: the raw token never travels, and the key
// the brokers' peer connections use is another one), compared in constant time, or a client
// certificate verified against --controller-tls-ca whose principal (its subject DN,
// mapped by --controller-tls-principal-mapping-rules) is one of
// --controller-tls-principals; anything else gets 401 and the ctlwire.APIError code
// "unauthenticated".
//
// Refused at start: --authorizer acl (the brokers enforce ACLs) without a token file or
// client certificates, since an open API would let anyone grant themselves ALL and read
// the SCRAM keys in /v1/metadata; a token file without TLS on the API unless
// --insecure-plaintext-token says the network is trusted; client certificates without
// a principal list, since every certificate of the CA (the brokers' Kafka clients' too)
// would otherwise be an admin.
// /v1/status stays open: it carries Raft bookkeeping only (state, term, indexes, the
// peers' addresses, all of which a network observer learns anyway), no metadata, and
// liveness probes and `weir admin status` of an unreachable quorum need it without
// credentials.
//
// With --controller-tls-cert/--controller-tls-key the API is served over TLS (the files
// reloaded when they change, security/tlsconf), and a follower forwards to the leader
// over TLS too, presenting the same certificate and verifying the leader against the
// same CA. A forwarded request carries the caller's Authorization header, or this
// controller's own token when the caller proved itself with a certificate: the leader
// authenticates every hop itself.

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/token"
)

// apiAuth is a controller's API security, built by setupAuth from the Config.
type apiAuth struct {
	tokens   *token.File     // nil: no token accepted
	src      *tlsconf.Source // nil: plain HTTP
	certAuth bool            // client certificates are asked for (request or require)
	rules    tlsconf.PrincipalRules
	admins   map[string]bool // principals whose verified certificate authenticates
	scheme   string          // of the URLs this controller forwards to
}

// required reports whether callers must authenticate.
func (a *apiAuth) required() bool { return a.tokens != nil || a.certAuth }

// bindSecurityFlags registers --cluster-token-file and --controller-tls-*.
func (c *Config) bindSecurityFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TokenFile, "cluster-token-file", c.TokenFile, "file of the cluster's shared token(s), one per line: when set, the controller API "+
		"refuses callers without an Authorization: Bearer <token> header (or a verified client certificate); the first line is sent when forwarding, every line is accepted (rotation)")
	c.TLS.BindFlags(fs, "controller-", "the controller API (served, and used to forward to the leader)")
	fs.StringVar(&c.Authorizer, "authorizer", c.Authorizer, `"acl" when the brokers run with --authorizer acl: the API then refuses to start without authentication (--cluster-token-file or client certificates)`)
	fs.BoolVar(&c.InsecurePlaintextToken, "insecure-plaintext-token", c.InsecurePlaintextToken, "allow --cluster-token-file without --controller-tls-cert: the bearer key then crosses the network in the clear")
	fs.Func("controller-tls-principals", "principals separated by ; (subject DNs, e.g. CN=weir-admin,O=ops, after the mapping rules) whose client certificate authenticates a caller; "+
		"list the controllers' own when they have no token (forwarding)", func(s string) error {
		c.CertPrincipals = splitPrincipals(s)
		return nil
	})
	fs.Func("raft-tls-principals", "principals separated by ; (subject DNs after the mapping rules) of the controllers' certificates: with --raft-tls, "+
		"a Raft peer must present one (default: any certificate of --controller-tls-ca)", func(s string) error {
		c.RaftPrincipals = splitPrincipals(s)
		return nil
	})
	fs.StringVar(&c.PrincipalRules, "controller-tls-principal-mapping-rules", c.PrincipalRules, "Kafka's ssl.principal.mapping.rules for client certificates of the API: RULE:pattern/replacement/[LU],...,DEFAULT")
	fs.BoolVar(&c.RaftTLS, "raft-tls", c.RaftTLS, "Raft between controllers over mutual TLS: --controller-tls-cert is presented both ways and the other side "+
		"must hold a certificate of --controller-tls-ca (set it on every controller)")
}

// validateSecurity checks the combination of security settings, not the files.
func (c *Config) validateSecurity() error {
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("%w: controller API TLS: %w", ErrBadConfig, err)
	}
	if c.TLS.CertFile == "" && (c.TLS.CAFile != "" || (c.TLS.ClientAuth != "" && c.TLS.ClientAuth != "none")) {
		return fmt.Errorf("%w: controller API TLS settings without --controller-tls-cert and --controller-tls-key", ErrBadConfig)
	}
	certAuth := c.TLS.ClientAuth == "request" || c.TLS.ClientAuth == "require"
	switch c.Authorizer {
	case "", "none":
	case "acl":
		if c.TokenFile == "" && !certAuth {
			return fmt.Errorf("%w: --authorizer acl needs an authenticated controller API: set --cluster-token-file (with TLS) or --controller-tls-client-auth require", ErrBadConfig)
		}
	default:
		return fmt.Errorf("%w: --authorizer %q: want acl or none", ErrBadConfig, c.Authorizer)
	}
	if c.TokenFile != "" && c.TLS.CertFile == "" && !c.InsecurePlaintextToken {
		return fmt.Errorf("%w: --cluster-token-file without --controller-tls-cert would send the cluster's key over plain HTTP; add TLS or --insecure-plaintext-token", ErrBadConfig)
	}
	if certAuth && len(c.CertPrincipals) == 0 {
		return fmt.Errorf("%w: --controller-tls-client-auth %s needs --controller-tls-principals: any certificate of the CA would otherwise be an admin", ErrBadConfig, c.TLS.ClientAuth)
	}
	if _, err := tlsconf.ParsePrincipalRules(c.PrincipalRules); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return c.validateRaftTLS()
}

// setupAuth loads the token file and TLS files and puts TLS on the API listener and on
// the forwarding client. It runs in New, after the listener is bound.
func (c *Controller) setupAuth() error {
	a := &apiAuth{scheme: "http"}
	c.auth = a
	if c.cfg.TokenFile != "" {
		f, err := token.Load(c.cfg.TokenFile, c.log)
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		a.tokens = f
	}
	if c.cfg.TLS.CertFile == "" {
		return nil
	}
	src, err := tlsconf.New(c.cfg.TLS, c.log)
	if err != nil {
		return fmt.Errorf("controller: API TLS: %w", err)
	}
	a.src, a.scheme = src, "https"
	a.certAuth = c.cfg.TLS.ClientAuth == "request" || c.cfg.TLS.ClientAuth == "require"
	if a.rules, err = tlsconf.ParsePrincipalRules(c.cfg.PrincipalRules); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	a.admins = map[string]bool{}
	for _, p := range c.cfg.CertPrincipals {
		a.admins[p] = true
	}
	if c.cfg.TLS.CAFile == "" && len(c.cfg.Peers) > 1 {
		c.log.Warn("controller API TLS without --controller-tls-ca: followers verify the leader's certificate against the system roots when forwarding")
	}
	c.apiLn = tls.NewListener(c.apiLn, src.Server())
	if tr, ok := c.fwd.Transport.(*http.Transport); ok {
		tr.TLSClientConfig = src.Client()
	}
	return nil
}

// authenticate refuses callers that prove nothing, when the API requires proof.
func (c *Controller) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := c.auth
		if a == nil || !a.required() || (r.Method == http.MethodGet && r.URL.Path == ctlwire.PathStatus) ||
			a.verifiedCert(r) || a.validBearer(r) {
			next.ServeHTTP(w, r)
			return
		}
		// Counted by instrument: weir_controller_api_requests_total{status="401"}.
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir-controller"`)
		writeError(w, fmt.Errorf("%w: %s %s needs a cluster token (Authorization: Bearer, --cluster-token-file) or a verified client certificate",
			ctlwire.ErrUnauthenticated, r.Method, r.URL.Path))
	})
}

// verifiedCert reports whether the caller presented a certificate of the CA whose
// principal is one of the listed ones.
func (a *apiAuth) verifiedCert(r *http.Request) bool {
	if !a.certAuth || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return false
	}
	p, err := a.rules.Principal(*r.TLS)
	return err == nil && p != "" && a.admins[p]
}

// splitPrincipals splits a list of principals at ";" (DNs hold commas themselves); a
// list of names without "=" (mapped by rules to plain names) may use ",".
func splitPrincipals(s string) []string {
	sep := ";"
	if !strings.Contains(s, ";") && !strings.Contains(s, "=") {
		sep = ","
	}
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (a *apiAuth) validBearer(r *http.Request) bool {
	if a.tokens == nil {
		return false
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && a.tokens.MatchBearer([]byte(strings.TrimSpace(tok)))
}

// forwardCredentials gives a request forwarded to the leader the caller's credentials,
// or this controller's own token when the caller used a certificate (the forwarding
// connection presents this controller's certificate as well).
func (a *apiAuth) forwardCredentials(from, to *http.Request) {
	if h := from.Header.Get("Authorization"); h != "" {
		to.Header.Set("Authorization", h)
	} else if a.tokens != nil {
		to.Header.Set("Authorization", "Bearer "+a.tokens.Bearer())
	}
}
