// Package tlsconf builds TLS configurations from PEM files and keeps them current: the
// certificate and key are read again when their files change (a certificate renewed by
// cert-manager or an ACME client takes effect on the next handshake, without a restart),
// and so is the CA bundle used to verify peers.
//
// The files are checked at most once per CheckEvery on a handshake, by modification time
// and size; a file that fails to load (a half-written renewal) keeps the previous
// certificate in use and is logged, so a bad write never takes a listener down.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrConfig marks an unusable TLS configuration (missing or unreadable files, a key that
// does not match its certificate, a CA file without certificates).
var ErrConfig = errors.New("tlsconf: bad TLS configuration")

// Files names the PEM files of one TLS endpoint. Empty CertFile and KeyFile: no
// certificate of our own (a client that does not present one).
type Files struct {
	CertFile string // certificate chain, leaf first
	KeyFile  string
	// CAFile verifies the other side: a server's client certificates (with ClientAuth),
	// a client's server. Empty: the system roots for a client; no client certificates
	// for a server.
	CAFile string
	// ClientAuth asks clients for a certificate signed by CAFile: "none" (default),
	// "request" (verified if given) or "require".
	ClientAuth string
	// ServerName overrides the name a client verifies (default: the dialled host).
	ServerName string
	// InsecureSkipVerify disables server verification for a client (tests, debugging).
	InsecureSkipVerify bool
}

// Enabled reports whether any TLS setting is given.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// BindFlags registers prefix+"tls-cert", "tls-key", "tls-ca" and "tls-client-auth" on fs,
// writing into f; what names the endpoint in the help text.
func (f *Files) BindFlags(fs *flag.FlagSet, prefix, what string) {
	fs.StringVar(&f.CertFile, prefix+"tls-cert", f.CertFile, "PEM certificate chain of "+what+" (reloaded when the file changes)")
	fs.StringVar(&f.KeyFile, prefix+"tls-key", f.KeyFile, "PEM private key of "+what+" (reloaded when the file changes)")
	fs.StringVar(&f.CAFile, prefix+"tls-ca", f.CAFile, "PEM CA bundle verifying the other side of "+what)
	fs.StringVar(&f.ClientAuth, prefix+"tls-client-auth", f.ClientAuth, "client certificates on "+what+": none, request or require (verified against the CA bundle)")
}

// Validate checks the combination of settings, not the files.
func (f Files) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return fmt.Errorf("%w: a certificate needs its key and a key its certificate", ErrConfig)
	}
	switch f.ClientAuth {
	case "", "none", "request", "require":
	default:
		return fmt.Errorf("%w: client auth %q: want none, request or require", ErrConfig, f.ClientAuth)
	}
	if (f.ClientAuth == "request" || f.ClientAuth == "require") && f.CAFile == "" {
		return fmt.Errorf("%w: client auth %q needs a CA file", ErrConfig, f.ClientAuth)
	}
	return nil
}

// CheckEvery bounds how often the files are looked at.
const CheckEvery = time.Second

// Source loads and reloads the files of one endpoint.
type Source struct {
	f   Files
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	checked time.Time
	certSt  [2]stamp
	cert    *tls.Certificate
	caSt    stamp
	pool    *x509.CertPool
}

type stamp struct {
	mod  time.Time
	size int64
}

func fileStamp(path string) (stamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{st.ModTime(), st.Size()}, nil
}

// New loads the files once (an error here is fatal: nothing to serve with) and returns
// the source. log may be nil.
func New(f Files, log *slog.Logger) (*Source, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Source{f: f, log: log, now: time.Now}
	if err := s.reload(true); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads whatever changed; first makes any failure an error, later ones keep the
// previous material.
func (s *Source) reload(first bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !first && now.Sub(s.checked) < CheckEvery {
		return nil
	}
	s.checked = now
	var errs []error
	if s.f.CertFile != "" {
		cs, err1 := fileStamp(s.f.CertFile)
		ks, err2 := fileStamp(s.f.KeyFile)
		switch {
		case err1 != nil || err2 != nil:
			errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, errors.Join(err1, err2)))
		case first || cs != s.certSt[0] || ks != s.certSt[1]:
			c, err := tls.LoadX509KeyPair(s.f.CertFile, s.f.KeyFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: certificate %s, key %s: %w", ErrConfig, s.f.CertFile, s.f.KeyFile, err))
				break
			}
			if len(c.Certificate) > 0 {
				c.Leaf, _ = x509.ParseCertificate(c.Certificate[0])
			}
			s.cert, s.certSt = &c, [2]stamp{cs, ks}
			if !first {
				s.log.Info("TLS certificate reloaded", "cert", s.f.CertFile)
			}
		}
	}
	if s.f.CAFile != "" {
		st, err := fileStamp(s.f.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
		case first || st != s.caSt:
			pem, err := os.ReadFile(s.f.CAFile)
			pool := x509.NewCertPool()
			if err == nil && !pool.AppendCertsFromPEM(pem) {
				err = errors.New("no certificates in it")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: CA file %s: %w", ErrConfig, s.f.CAFile, err))
				break
			}
			s.pool, s.caSt = pool, st
			if !first {
				s.log.Info("TLS CA bundle reloaded", "ca", s.f.CAFile)
			}
		}
	}
	err := errors.Join(errs...)
	if err != nil && !first {
		s.log.Warn("TLS files changed but could not be loaded; the previous ones stay in use", "err", err)
		return nil
	}
	return err
}

func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.reload(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.pool
}

// Certificate is the current certificate (nil: none).
func (s *Source) Certificate() *tls.Certificate { c, _ := s.current(); return c }

// Server returns a server configuration that picks up reloaded files on each handshake.
func (s *Source) Server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, ClientCAs: pool}
			if cert != nil {
				c.Certificates = []tls.Certificate{*cert}
			}
			switch s.f.ClientAuth {
			case "request":
				c.ClientAuth = tls.VerifyClientCertIfGiven
			case "require":
				c.ClientAuth = tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// Client returns a client configuration: our certificate (if any, reloaded on each
// handshake) for servers that ask, and the CA bundle as loaded now (or the system roots)
// to verify them. Verification is Go's own, by the name or IP address the client dials
// (dialers such as franz-go's and net/http's set ServerName from it): a callback cannot
// do that, since a dial by IP address sends no server name to check against. A CA bundle
// renewed later applies to the configurations made after it (call Client again).
func (s *Source) Client() *tls.Config {
	_, pool := s.current()
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         s.f.ServerName,
		InsecureSkipVerify: s.f.InsecureSkipVerify,
		RootCAs:            pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert := s.Certificate(); cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil // none: the server decides whether that is enough
		},
	}
}

// PeerName is the subject common name of the verified client certificate of a TLS
// connection state ("" none). It is not a principal: principals are the full DN mapped
// by PrincipalRules (principal.go), since CNs repeat across OUs and organisations.
func PeerName(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return cs.VerifiedChains[0][0].Subject.CommonName
}
