// Package sasl is the server side of the SASL mechanisms Weir's Kafka listeners accept:
// PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka
// speaks them inside SaslAuthenticate requests.
//
// There is one credential store: a user's SCRAM credentials (salt, iterations, StoredKey,
// ServerKey; never the password). PLAIN derives the StoredKey from the offered password
// with the stored salt and iterations and compares it in constant time, so a user set up
// for SCRAM can also log in with PLAIN (over TLS, one hopes) and nothing else is kept.
//
// Nothing here logs, and no error carries a password, a proof or a key. An unknown user
// and a wrong password fail alike (ErrAuthFailed, at the same step: SCRAM answers an
// unknown user with a made-up salt and fails the proof, PLAIN derives against a made-up
// credential), so neither the answers nor their timing tell which it was. The made-up
// credential looks like the real ones (Typical): the iteration count and salt length
// most real users of the mechanism have, a salt in the same alphabet, derived from the
// name with a per-process secret so repeated probes see the same salt; PLAIN derives
// with the hash and iterations a real user's check would use.
package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mechanism names, as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Mechanisms lists every mechanism this package serves.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512}

// Sentinel errors. The Kafka front end turns ErrAuthFailed and ErrMalformed into
// SASL_AUTHENTICATION_FAILED and ErrUnsupportedMechanism into
// UNSUPPORTED_SASL_MECHANISM.
var (
	// ErrAuthFailed: unknown user or wrong password (deliberately not saying which).
	ErrAuthFailed = errors.New("sasl: authentication failed: invalid credentials")
	// ErrMalformed: a message that does not follow the mechanism's grammar, or arrives
	// out of order.
	ErrMalformed = errors.New("sasl: authentication failed: malformed message")
	// ErrUnsupportedMechanism: not one of the enabled mechanisms.
	ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")
)

// maxMessage bounds one client message; real ones are well under 1 KiB.
const maxMessage = 8 << 10

// Config is the SASL part of a broker's configuration.
type Config struct {
	// Mechanisms are the enabled mechanisms, a subset of Mechanisms.
	Mechanisms []string
	// SessionLifetime is how long an authentication is good for (KIP-368, Kafka's
	// connections.max.reauth.ms): clients are told, re-authenticate before it ends, and a
	// connection that has not is closed at its next request. 0: no limit.
	SessionLifetime time.Duration
	// FailedDelay holds back the answer to a failed authentication, after which the
	// connection is closed (Kafka's connection.failed.authentication.delay.ms), so
	// guessing passwords goes at most one guess per connection and delay. 0: the
	// default, DefaultFailedDelay.
	FailedDelay time.Duration
}

// DefaultFailedDelay is Kafka's connection.failed.authentication.delay.ms.
const DefaultFailedDelay = 100 * time.Millisecond

// DefaultConfig enables every mechanism, with no session limit.
func DefaultConfig() Config {
	return Config{Mechanisms: slices.Clone(Mechanisms), FailedDelay: DefaultFailedDelay}
}

// Validate checks the mechanisms and the lifetime.
func (c *Config) Validate() error {
	if len(c.Mechanisms) == 0 {
		return errors.New("sasl: no mechanism enabled (--sasl-mechanisms)")
	}
	for _, m := range c.Mechanisms {
		if !slices.Contains(Mechanisms, m) {
			return fmt.Errorf("sasl: unknown mechanism %q (known: %s)", m, strings.Join(Mechanisms, ", "))
		}
	}
	if c.SessionLifetime < 0 {
		return errors.New("sasl: negative session lifetime")
	}
	if c.SessionLifetime > 0 && c.SessionLifetime < time.Second {
		return fmt.Errorf("sasl: session lifetime %v is below a second: clients could not re-authenticate in time", c.SessionLifetime)
	}
	if c.FailedDelay < 0 || c.FailedDelay > time.Minute {
		return fmt.Errorf("sasl: failed authentication delay %v: want 0..1m", c.FailedDelay)
	}
	return nil
}

// BindFlags registers --sasl-mechanisms, --sasl-session-lifetime and
// --sasl-failed-authentication-delay.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	// The back-quoted word is the value name -help shows (flag.UnquoteUsage): keep
	// commands and examples out of back quotes.
	fs.Func("sasl-mechanisms", "comma-separated `list` of SASL mechanisms SASL listeners accept (default \""+strings.Join(c.Mechanisms, ",")+"\"); "+
		"PLAIN checks the password against the user's SCRAM credential, so one user (weir admin user set) serves all three", func(s string) error {
		var ms []string
		for _, m := range strings.Split(s, ",") {
			if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
				ms = append(ms, m)
			}
		}
		c.Mechanisms = ms
		return nil
	})
	fs.DurationVar(&c.SessionLifetime, "sasl-session-lifetime", c.SessionLifetime, "how long a SASL authentication lasts (KIP-368, Kafka's connections.max.reauth.ms): "+
		"clients re-authenticate on the same connection before it ends, and a connection that has not is closed at its next request; 0: forever")
	fs.DurationVar(&c.FailedDelay, "sasl-failed-authentication-delay", c.FailedDelay, "how long the answer to a failed SASL authentication is held back before it is sent "+
		"and the connection closed (Kafka's connection.failed.authentication.delay.ms): slows password guessing")
}

// Credential is what the server stores for one user and SCRAM mechanism. The keys are
// secrets (with them one can impersonate the server, or the user to another server with
// the same credential): never log them.
type Credential struct {
	Iterations int
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// String hides the keys.
func (c Credential) String() string { return fmt.Sprintf("credential(%d iterations)", c.Iterations) }

// Lookup finds a user's credential for a SCRAM mechanism (ScramSHA256 or ScramSHA512).
type Lookup func(user, mechanism string) (Credential, bool)

// Session is one authentication exchange.
type Session interface {
	// Step takes the client's next message and returns the server's answer; done is
	// true once the client is authenticated (the answer, if any, must still be sent).
	// After an error the session is over.
	Step(msg []byte) (answer []byte, done bool, err error)
	// User is the authenticated user's name, once done.
	User() string
}

// Typical describes what the real credentials of a mechanism look like: the iteration
// count and salt most users have, ok false when no user has one. An unknown user's
// made-up credential is shaped after it.
type Typical func(mechanism string) (iterations int, salt []byte, ok bool)

// Authenticator starts sessions of the enabled mechanisms against one credential
// lookup. Safe for concurrent use.
type Authenticator struct {
	mechanisms []string
	lookup     Lookup
	typical    Typical // nil: DefaultIterations and 16-byte salts
	// mockKey makes the salt an unknown user is answered with: the same salt for the
	// same name every time (a prober sees a stable salt, as for a real user), different
	// per process.
	mockKey [32]byte
	nonce   func() string // tests fix it
}

// NewAuthenticator returns an Authenticator for mechanisms (validated with
// Config.Validate) looking credentials up with lookup.
func NewAuthenticator(mechanisms []string, lookup Lookup) *Authenticator {
	a := &Authenticator{mechanisms: slices.Clone(mechanisms), lookup: lookup, nonce: randomNonce}
	_, _ = rand.Read(a.mockKey[:])
	return a
}

// SetTypical sets how unknown users' made-up credentials are shaped (call before use).
func (a *Authenticator) SetTypical(t Typical) { a.typical = t }

// Mechanisms lists the enabled mechanisms.
func (a *Authenticator) Mechanisms() []string { return slices.Clone(a.mechanisms) }

// Enabled reports whether mechanism is enabled.
func (a *Authenticator) Enabled(mechanism string) bool {
	return slices.Contains(a.mechanisms, mechanism)
}

// Start begins a session of mechanism; ErrUnsupportedMechanism if it is not enabled.
func (a *Authenticator) Start(mechanism string) (Session, error) {
	if !a.Enabled(mechanism) {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	switch mechanism {
	case Plain:
		return &plainSession{a: a}, nil
	case ScramSHA256, ScramSHA512:
		return &scramSession{a: a, h: hashOf(mechanism)}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
}

// mockCredential is the made-up credential of an unknown user for a SCRAM mechanism:
// shaped like the mechanism's typical credential (its iterations, a salt of its length
// and alphabet; without users, DefaultIterations and 16 bytes), the salt derived from
// the name so it is the same at every attempt, keys that match no password (random).
func (a *Authenticator) mockCredential(user, mechanism string) Credential {
	iterations, sample := DefaultIterations, []byte(nil)
	if a.typical != nil {
		if it, salt, ok := a.typical(mechanism); ok && it >= MinIterations && it <= MaxIterations && len(salt) > 0 && len(salt) <= 256 {
			iterations, sample = it, salt
		}
	}
	saltLen := 16
	if sample != nil {
		saltLen = len(sample)
	}
	salt := make([]byte, 0, saltLen+sha256.Size)
	for i := byte(0); len(salt) < saltLen; i++ {
		m := hmac.New(sha256.New, a.mockKey[:])
		m.Write([]byte{i})
		m.Write([]byte(mechanism + "\x00" + user))
		salt = m.Sum(salt)
	}
	salt = salt[:saltLen]
	if base36(sample) {
		// Java clients make printable salts (a random number in base 36).
		for i, b := range salt {
			salt[i] = base36Digits[int(b)%len(base36Digits)]
		}
	}
	h := hashOf(mechanism)
	stored := make([]byte, h.size)
	_, _ = rand.Read(stored)
	return Credential{Iterations: iterations, Salt: salt, StoredKey: stored, ServerKey: stored}
}

// plainMock is the mechanism and made-up credential an unknown user's PLAIN password is
// checked against: the one a typical user's check would use (SCRAM-SHA-512's when users
// have it, as for a known user), so both cost the same PBKDF2.
func (a *Authenticator) plainMock(user string) (string, Credential) {
	mech := ScramSHA512
	if a.typical != nil {
		if _, _, ok := a.typical(ScramSHA512); !ok {
			if _, _, ok := a.typical(ScramSHA256); ok {
				mech = ScramSHA256
			}
		}
	}
	return mech, a.mockCredential(user, mech)
}

const base36Digits = "0123456789abcdefghijklmnopqrstuvwxyz"

// base36 reports whether salt is made of base-36 digits only.
func base36(salt []byte) bool {
	for _, b := range salt {
		if !strings.ContainsRune(base36Digits, rune(b)) {
			return false
		}
	}
	return len(salt) > 0
}
