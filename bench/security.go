package bench

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/security/tlsconf"
)

// PasswordEnv is read for the SASL password when --sasl-password is not given, so the
// password need not be on the command line (visible to every user in ps).
const PasswordEnv = "WEIR_SASL_PASSWORD"

// ClientSecurity is how the bench's clients connect: TLS (SSL listeners) and SASL
// (SASL_PLAINTEXT, or SASL_SSL with TLS). The zero value is PLAINTEXT.
type ClientSecurity struct {
	TLS      bool
	TLSFiles tlsconf.Files // CAFile, CertFile, KeyFile, InsecureSkipVerify

	SASLMechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	SASLUser      string
	SASLPassword  string
}

// BindFlags registers --tls, --tls-ca, --tls-cert, --tls-key, --tls-insecure,
// --sasl-mechanism, --sasl-user and --sasl-password.
func (s *ClientSecurity) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&s.TLS, "tls", s.TLS, "connect with TLS (a listener of protocol SSL or SASL_SSL); implied by --tls-ca, --tls-cert and --tls-insecure")
	fs.StringVar(&s.TLSFiles.CAFile, "tls-ca", s.TLSFiles.CAFile, "PEM CA bundle that verifies the brokers' certificates (default: the system roots)")
	fs.StringVar(&s.TLSFiles.CertFile, "tls-cert", s.TLSFiles.CertFile, "PEM client certificate, for brokers that require one (mutual TLS; the principal is User:<CN>)")
	fs.StringVar(&s.TLSFiles.KeyFile, "tls-key", s.TLSFiles.KeyFile, "PEM private key of --tls-cert")
	fs.BoolVar(&s.TLSFiles.InsecureSkipVerify, "tls-insecure", s.TLSFiles.InsecureSkipVerify, "do not verify the brokers' certificates (testing only)")
	fs.StringVar(&s.SASLMechanism, "sasl-mechanism", s.SASLMechanism, "authenticate with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (a listener of protocol SASL_PLAINTEXT, or SASL_SSL with --tls)")
	fs.StringVar(&s.SASLUser, "sasl-user", s.SASLUser, "SASL user name")
	fs.StringVar(&s.SASLPassword, "sasl-password", s.SASLPassword, "SASL password (default: $"+PasswordEnv+", which keeps it off the command line)")
}

func (s *ClientSecurity) tlsOn() bool {
	return s.TLS || s.TLSFiles.CAFile != "" || s.TLSFiles.CertFile != "" || s.TLSFiles.InsecureSkipVerify
}

// Validate checks the combination (not the files).
func (s *ClientSecurity) Validate() error {
	if (s.TLSFiles.CertFile == "") != (s.TLSFiles.KeyFile == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case "":
		if s.SASLUser != "" || s.SASLPassword != "" {
			return errors.New("--sasl-user and --sasl-password need --sasl-mechanism")
		}
		return nil
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return fmt.Errorf("--sasl-mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not %q", s.SASLMechanism)
	}
	if s.SASLUser == "" {
		return errors.New("--sasl-mechanism needs --sasl-user")
	}
	return nil
}

// Protocol is the Kafka security protocol these settings speak.
func (s *ClientSecurity) Protocol() string {
	switch {
	case s.tlsOn() && s.SASLMechanism != "":
		return "SASL_SSL"
	case s.tlsOn():
		return "SSL"
	case s.SASLMechanism != "":
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// Opts are the franz-go options of these settings; the TLS files are read here.
func (s *ClientSecurity) Opts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.tlsOn() {
		src, err := tlsconf.New(s.TLSFiles, nil)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(src.Client()))
	}
	if s.SASLMechanism != "" {
		pass := s.SASLPassword
		if pass == "" {
			pass = os.Getenv(PasswordEnv)
		}
		switch strings.ToUpper(s.SASLMechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUser, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: pass}.AsSha512Mechanism()))
		}
	}
	return opts, nil
}
