package sasl

import (
	"bytes"
	"crypto/subtle"
	"fmt"
)

// plainSession checks one PLAIN message, "authzid NUL authcid NUL password" (RFC 4616),
// against the user's SCRAM credential: the password is salted with the credential's salt
// and iterations and the resulting StoredKey compared in constant time. SCRAM-SHA-512's
// credential is preferred when the user has both. An unknown user is checked against a
// made-up credential of the mechanism and iterations real users have (plainMock), so the
// work done, and the time taken, are the same.
type plainSession struct {
	a    *Authenticator
	user string
	done bool
	over bool
}

func (s *plainSession) User() string {
	if !s.done {
		return ""
	}
	return s.user
}

func (s *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if s.over {
		return nil, false, fmt.Errorf("%w: message after the exchange ended", ErrMalformed)
	}
	s.over = true
	if len(msg) > maxMessage {
		return nil, false, fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w: PLAIN wants authzid, user and password separated by NUL", ErrMalformed)
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return nil, false, fmt.Errorf("%w: empty user or password", ErrMalformed)
	}
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: authorization id differs from the user name", ErrAuthFailed)
	}
	mech, cred, found := "", Credential{}, false
	if s.a.lookup != nil {
		for _, m := range []string{ScramSHA512, ScramSHA256} {
			if c, ok := s.a.lookup(user, m); ok && len(c.StoredKey) == HashSize(m) && len(c.Salt) > 0 && c.Iterations > 0 && c.Iterations <= MaxIterations {
				mech, cred, found = m, c, true
				break
			}
		}
	}
	// The made-up credential is made for a known user too, so both cost the same.
	mockMech, mock := s.a.plainMock(user)
	if !found {
		mech, cred = mockMech, mock
	}
	salted, err := SaltedPassword(mech, password, cred.Salt, cred.Iterations)
	if err != nil {
		return nil, false, ErrAuthFailed
	}
	derived := CredentialFromSalted(mech, salted, cred.Salt, cred.Iterations)
	if subtle.ConstantTimeCompare(derived.StoredKey, cred.StoredKey) != 1 || !found {
		return nil, false, ErrAuthFailed
	}
	s.user, s.done = user, true
	return nil, true, nil
}
