package ctlclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/weir-io/weir/controller/ctlwire"
)

// Why a controller could not be used, in words an operator acts on. Go's own errors
// ("context deadline exceeded", "malformed HTTP response \x15\x03...") say what broke in
// the client, not what to change: a wrong port, a missing --controller-tls-ca, a missing
// token. classifyErr and classifyAnswer turn each failed attempt into a ControllerError
// naming the controller and the flag to look at, with a sentinel (errors.go) to match;
// NewClient's wait (startwait.go) decides from them whether waiting can help.

// failClass is how waiting bears on a failure.
type failClass int

const (
	// transient: it may pass by itself (a controller without a leader yet, a timeout).
	transient failClass = iota
	// down: nothing listens there, or the name does not resolve. A controller restarting
	// looks like this for a few seconds; a wrong --controllers forever.
	down
	// permanent: the client's configuration and the controller's disagree (TLS, CA,
	// credentials, not a controller at all); waiting changes nothing.
	permanent
)

// ControllerError is one controller's failure: its address, a sentinel of errors.go
// saying what kind (nil: another, transient failure) and the error underneath. Its
// message is a sentence that says what to do.
type ControllerError struct {
	Addr  string
	Kind  error
	Err   error
	msg   string
	class failClass
}

func (e *ControllerError) Error() string { return e.msg }

// Unwrap lets errors.Is match the kind's sentinel and what the error underneath matches.
func (e *ControllerError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Permanent reports whether waiting cannot make this controller answer (the client's
// configuration and the controller's disagree).
func (e *ControllerError) Permanent() bool { return e.class == permanent }

func ctlErr(addr string, kind, err error, class failClass, format string, args ...any) *ControllerError {
	return &ControllerError{Addr: addr, Kind: kind, Err: err, class: class, msg: fmt.Sprintf(format, args...)}
}

// classifyErr explains a request to addr that got no HTTP answer.
func (c *Client) classifyErr(addr string, err error) *ControllerError {
	var ce *ControllerError
	if errors.As(err, &ce) {
		return ce
	}
	var (
		dnsErr   *net.DNSError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		recHdr   tls.RecordHeaderError
		verifyEr *tls.CertificateVerificationError
		netErr   net.Error
	)
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ctlErr(addr, ErrRefused, err, down, "connection refused at %s (no controller listening there: down, restarting, or a wrong address in --controllers?)", addr)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return ctlErr(addr, ErrUnresolved, err, down, "cannot resolve %s (no such host): check --controllers", dnsErr.Name)
	case errors.As(err, &dnsErr):
		return ctlErr(addr, ErrUnresolved, err, transient, "DNS lookup of %s failed: %v", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &unknown):
		hint := "check --controller-tls-ca: it must hold the CA that signed the controllers' certificates"
		if c.cfg.TLS.CAFile == "" {
			hint = "pass --controller-tls-ca, the CA that signed the controllers' certificates (the system roots do not know it)"
		}
		return ctlErr(addr, ErrUnknownAuthority, err, permanent, "certificate signed by unknown authority at %s: %s", addr, hint)
	case errors.As(err, &hostErr):
		return ctlErr(addr, ErrBadCertificate, err, permanent, "the certificate of %s is not valid for %q (%v): dial a name it holds, or pass --controller-tls-server-name", addr, hostErr.Host, err)
	case errors.As(err, &invalid) || errors.As(err, &verifyEr):
		return ctlErr(addr, ErrBadCertificate, err, permanent, "the certificate of %s is refused: %v", addr, err)
	case strings.Contains(msg, "tls: certificate required"):
		return ctlErr(addr, ErrBadCertificate, err, permanent, "%s requires a client certificate: pass --controller-tls-cert and --controller-tls-key", addr)
	case strings.Contains(msg, "remote error: tls: bad certificate"), strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: expired certificate"):
		return ctlErr(addr, ErrBadCertificate, err, permanent, "%s refused the client certificate (%v): check --controller-tls-cert (signed by the CA the controllers trust?)", addr, err)
	case errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &recHdr):
		return ctlErr(addr, ErrNotTLS, err, permanent, "%s does not speak TLS: its API is plain HTTP; drop --controller-tls-ca/--controller-tls-cert, or check --controllers", addr)
	case speaksTLSGarbage(msg):
		return ctlErr(addr, ErrSpeaksTLS, err, permanent, "%s speaks TLS: pass --controller-tls-ca", addr)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return ctlErr(addr, ErrTimeout, err, transient, "no answer from %s (timed out): a firewall dropping packets, a stuck controller, or the wrong address?", addr)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ctlErr(addr, nil, err, transient, "%s is unreachable (no route): %v", addr, err)
	}
	return ctlErr(addr, nil, err, transient, "%s: %v", addr, err)
}

// speaksTLSGarbage reports whether an HTTP client's error shows a TLS record where an
// HTTP answer was expected (a TLS alert or handshake: bytes 0x15 or 0x16, then 0x03).
func speaksTLSGarbage(msg string) bool {
	return strings.Contains(msg, `malformed HTTP response "\x15\x03`) || strings.Contains(msg, `malformed HTTP response "\x16\x03`)
}

// classifyAnswer explains a non-2xx answer of addr: status and body.
func (c *Client) classifyAnswer(addr string, status int, body []byte) *ControllerError {
	var ae ctlwire.APIError
	isAPI := json.Unmarshal(body, &ae) == nil && ae.Code != ""
	switch {
	case status == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server"):
		return ctlErr(addr, ErrSpeaksTLS, fmt.Errorf("HTTP %d: %.200s", status, body), permanent, "%s speaks TLS: pass --controller-tls-ca", addr)
	case status == http.StatusUnauthorized || (isAPI && ae.Code == ctlwire.CodeUnauthenticated):
		err := error(fmt.Errorf("%w: HTTP %d", ctlwire.ErrUnauthenticated, status))
		if isAPI {
			err = ae.ToError()
		}
		hint := "pass --cluster-token-file (or a client certificate: --controller-tls-cert and --controller-tls-key)"
		switch {
		case c.sec.tokens != nil:
			hint = "the controllers refused the cluster token: check --cluster-token-file (it must hold a token of the controllers' file)"
		case c.cfg.TLS.CertFile != "":
			hint = "the client certificate's principal is not one of the controllers' --controller-tls-principals; pass --cluster-token-file or another certificate"
		}
		return ctlErr(addr, ctlwire.ErrUnauthenticated, err, permanent, "401 at %s: %s", addr, hint)
	case status == http.StatusForbidden:
		what := fmt.Sprintf("%.200s", strings.TrimSpace(string(body)))
		if isAPI {
			what = ae.Message
		}
		return ctlErr(addr, ErrForbidden, fmt.Errorf("HTTP %d: %s", status, what), permanent, "403 at %s: the controller refuses this caller (%s): check the credentials (--cluster-token-file, --controller-tls-cert)", addr, what)
	case !isAPI && status >= 500:
		// A proxy in front of controllers that are restarting, say.
		return ctlErr(addr, nil, fmt.Errorf("HTTP %d: %.200s", status, body), transient, "%s answered HTTP %d: %.200s", addr, status, strings.TrimSpace(string(body)))
	case !isAPI || ae.Code == "not_found":
		// Something answers HTTP there, but not as a controller does: a broker's metrics
		// port, another service.
		return ctlErr(addr, ErrNotAPI, fmt.Errorf("HTTP %d: %.200s", status, body), permanent,
			"%s answered HTTP %d, not as a controller's API does: is it a controller's API address? (check --controllers)", addr, status)
	}
	return ctlErr(addr, nil, ae.ToError(), transient, "%s: %v", addr, ae.ToError())
}
