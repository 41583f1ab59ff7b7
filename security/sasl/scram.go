package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Iteration bounds of a SCRAM credential, Kafka's: at least 4096 (RFC 7677's minimum
// for SHA-256, which Kafka applies to SHA-512 too), at most 16384.
const (
	MinIterations = 4096
	MaxIterations = 16384
	// DefaultIterations is what `weir admin user set` uses, and what an unknown user
	// appears to have when no user has a credential of the mechanism (else the
	// iterations most users have: Typical).
	DefaultIterations = 8192
)

type scramHash struct {
	new  func() hash.Hash
	size int
}

func hashOf(mechanism string) scramHash {
	if mechanism == ScramSHA512 {
		return scramHash{sha512.New, sha512.Size}
	}
	return scramHash{sha256.New, sha256.Size}
}

func (h scramHash) hmac(key []byte, msg string) []byte {
	m := hmac.New(h.new, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func (h scramHash) sum(b []byte) []byte {
	d := h.new()
	d.Write(b)
	return d.Sum(nil)
}

// HashSize is the length of a mechanism's salted password and keys.
func HashSize(mechanism string) int { return hashOf(mechanism).size }

// SaltedPassword is Hi(password, salt, iterations) of RFC 5802: PBKDF2 with the
// mechanism's HMAC. The password is used as its UTF-8 bytes, without SASLprep, as Kafka
// does.
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if mechanism != ScramSHA256 && mechanism != ScramSHA512 {
		return nil, fmt.Errorf("%w: %q is not a SCRAM mechanism", ErrUnsupportedMechanism, mechanism)
	}
	h := hashOf(mechanism)
	return pbkdf2.Key(h.new, password, salt, iterations, h.size)
}

// CredentialFromSalted derives the stored credential from a salted password (what
// Kafka's AlterUserScramCredentials carries): StoredKey = H(HMAC(salted, "Client Key")),
// ServerKey = HMAC(salted, "Server Key").
func CredentialFromSalted(mechanism string, salted, salt []byte, iterations int) Credential {
	h := hashOf(mechanism)
	return Credential{
		Iterations: iterations,
		Salt:       bytes.Clone(salt),
		StoredKey:  h.sum(h.hmac(salted, "Client Key")),
		ServerKey:  h.hmac(salted, "Server Key"),
	}
}

// NewCredential makes the credential of password with a fresh random salt.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	salted, err := SaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(mechanism, salted, salt, iterations), nil
}

func randomNonce() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// scramSession is the server side of one SCRAM exchange:
//
//	client-first  n,[a=authzid],n=user,r=cnonce[,ext...]
//	server-first  r=cnonce+snonce,s=salt,i=iterations
//	client-final  c=base64(gs2-header),r=cnonce+snonce[,ext...],p=proof
//	server-final  v=base64(ServerSignature)
type scramSession struct {
	a     *Authenticator
	h     scramHash
	state int // 0: expecting client-first, 1: client-final, 2: failed, 3: authenticated

	user        string
	gs2Header   string
	clientFirst string // client-first-message-bare
	serverFirst string
	nonce       string
	cred        Credential
}

func (s *scramSession) User() string {
	if s.state != 3 {
		return ""
	}
	return s.user
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	if len(msg) > maxMessage {
		s.state = 2
		return nil, false, fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	switch s.state {
	case 0:
		s.state = 2 // unless it succeeds
		out, err := s.first(string(msg))
		if err != nil {
			return nil, false, err
		}
		s.state = 1
		return out, false, nil
	case 1:
		s.state = 2
		out, err := s.final(string(msg))
		if err != nil {
			return nil, false, err
		}
		s.state = 3
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%w: message after the exchange ended", ErrMalformed)
}

func (s *scramSession) first(msg string) ([]byte, error) {
	// gs2-header: cbind flag and authzid.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no GS2 header", ErrMalformed)
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: channel binding is not supported", ErrMalformed)
	default:
		return nil, fmt.Errorf("%w: bad GS2 channel binding flag", ErrMalformed)
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: truncated GS2 header", ErrMalformed)
	}
	var authzid string
	if authzField != "" {
		v, ok := strings.CutPrefix(authzField, "a=")
		if !ok {
			return nil, fmt.Errorf("%w: bad authzid", ErrMalformed)
		}
		var err error
		if authzid, err = decodeSaslName(v); err != nil {
			return nil, err
		}
	}
	s.gs2Header = flag + "," + authzField + ","
	s.clientFirst = bare

	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return nil, fmt.Errorf("%w: client-first needs a user and a nonce", ErrMalformed)
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, fmt.Errorf("%w: mandatory extensions are not supported", ErrMalformed)
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return nil, fmt.Errorf("%w: no user name", ErrMalformed)
	}
	user, err := decodeSaslName(name)
	if err != nil {
		return nil, err
	}
	if user == "" {
		return nil, fmt.Errorf("%w: empty user name", ErrMalformed)
	}
	cnonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || cnonce == "" || !printable(cnonce) {
		return nil, fmt.Errorf("%w: bad client nonce", ErrMalformed)
	}
	for _, ext := range attrs[2:] {
		// Kafka's extensions (tokenauth=true for delegation tokens): no delegation tokens
		// here, so a token login must fail rather than pass as the user's password.
		if ext == "" || !strings.Contains(ext, "=") {
			return nil, fmt.Errorf("%w: bad extension", ErrMalformed)
		}
		if k, v, _ := strings.Cut(ext, "="); k == "tokenauth" && strings.EqualFold(v, "true") {
			return nil, fmt.Errorf("%w: delegation tokens are not supported", ErrAuthFailed)
		}
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("%w: authorization id differs from the user name", ErrAuthFailed)
	}
	s.user = user
	cred, found := Credential{}, false
	if s.a.lookup != nil {
		cred, found = s.a.lookup(user, s.mechanism())
	}
	// The made-up credential is made for a known user too, so both cost the same.
	mock := s.a.mockCredential(user, s.mechanism())
	if !found || len(cred.StoredKey) != s.h.size || len(cred.ServerKey) != s.h.size || len(cred.Salt) == 0 || cred.Iterations <= 0 {
		// Carry on with a made-up credential: the proof fails at the next step, like a
		// wrong password's.
		cred = mock
	}
	s.cred = cred
	s.nonce = cnonce + s.a.nonce()
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramSession) mechanism() string {
	if s.h.size == sha512.Size {
		return ScramSHA512
	}
	return ScramSHA256
}

func (s *scramSession) final(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, fmt.Errorf("%w: no proof", ErrMalformed)
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 {
		return nil, fmt.Errorf("%w: client-final needs channel binding and nonce", ErrMalformed)
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return nil, fmt.Errorf("%w: no channel binding", ErrMalformed)
	}
	if cbBytes, err := base64.StdEncoding.DecodeString(cb); err != nil || string(cbBytes) != s.gs2Header {
		return nil, fmt.Errorf("%w: channel binding does not match the GS2 header", ErrMalformed)
	}
	// librdkafka sends its own nonce again in front of the combined one; Kafka accepts
	// any nonce that ends with the combined one, and so do we (the server's part, which
	// is what makes a replay fail, is still bound).
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !strings.HasSuffix(nonce, s.nonce) {
		return nil, fmt.Errorf("%w: nonce does not match", ErrMalformed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h.size {
		return nil, fmt.Errorf("%w: bad proof encoding", ErrMalformed)
	}
	authMessage := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	clientSig := s.h.hmac(s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSig)
	if subtle.ConstantTimeCompare(s.h.sum(clientKey), s.cred.StoredKey) != 1 {
		return nil, ErrAuthFailed
	}
	serverSig := s.h.hmac(s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

// decodeSaslName undoes RFC 5802's escaping: "=2C" is ',' and "=3D" is '='; any other
// '=' is an error.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in a name", ErrMalformed)
		}
		i += 2
	}
	return b.String(), nil
}

// printable: RFC 5802's nonce characters, printable ASCII but ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}
