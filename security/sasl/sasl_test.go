package sasl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	fsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// users is a credential store for tests: user → mechanism → credential.
type users map[string]map[string]Credential

func (u users) lookup(user, mech string) (Credential, bool) {
	c, ok := u[user][mech]
	return c, ok
}

func (u users) add(t testing.TB, user, password string, mechs ...string) {
	t.Helper()
	for _, m := range mechs {
		c, err := NewCredential(m, password, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if u[user] == nil {
			u[user] = map[string]Credential{}
		}
		u[user][m] = c
	}
}

// TestScramRFC7677Vector replays the SCRAM-SHA-256 exchange of RFC 7677 section 3
// against the server, with the RFC's server nonce.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltedPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred := CredentialFromSalted(ScramSHA256, salted, salt, 4096)
	a := NewAuthenticator(Mechanisms, users{"user": {ScramSHA256: cred}}.lookup)
	a.nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	s, err := a.Start(ScramSHA256)
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: %v done=%v", err, done)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first %q, want %q", out, want)
	}
	out, done, err = s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: %v done=%v", err, done)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final %q, want %q", out, want)
	}
	if s.User() != "user" {
		t.Fatalf("user %q", s.User())
	}
}

// exchange runs a franz-go client mechanism against a server session to the end.
func exchange(t *testing.T, a *Authenticator, m fsasl.Mechanism) (Session, error) {
	t.Helper()
	s, err := a.Start(m.Name())
	if err != nil {
		return nil, err
	}
	cs, msg, err := m.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		out, done, err := s.Step(msg)
		if err != nil {
			return s, err
		}
		cdone, next, err := cs.Challenge(out)
		if err != nil {
			t.Fatalf("the client refused the server's message %q: %v", out, err)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return s, nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil, nil
}

// TestFranzClients logs in with franz-go's SCRAM and PLAIN clients, and fails with a
// wrong password and an unknown user alike (ErrAuthFailed, same step).
func TestFranzClients(t *testing.T) {
	u := users{}
	u.add(t, "alice", "s3cret", ScramSHA256, ScramSHA512)
	u.add(t, "bob", "hunter2", ScramSHA256) // PLAIN falls back to SHA-256's credential
	a := NewAuthenticator(Mechanisms, u.lookup)
	for _, tc := range []struct {
		name    string
		mech    fsasl.Mechanism
		wantErr error
	}{
		{"sha256", scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism(), nil},
		{"sha512", scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism(), nil},
		{"plain", plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism(), nil},
		{"plain sha256 only", plain.Auth{User: "bob", Pass: "hunter2"}.AsMechanism(), nil},
		{"sha256 wrong password", scram.Auth{User: "alice", Pass: "s3creT"}.AsSha256Mechanism(), ErrAuthFailed},
		{"sha512 wrong password", scram.Auth{User: "alice", Pass: "x"}.AsSha512Mechanism(), ErrAuthFailed},
		{"sha512 no credential of this mechanism", scram.Auth{User: "bob", Pass: "hunter2"}.AsSha512Mechanism(), ErrAuthFailed},
		{"sha256 unknown user", scram.Auth{User: "mallory", Pass: "s3cret"}.AsSha256Mechanism(), ErrAuthFailed},
		{"plain wrong password", plain.Auth{User: "alice", Pass: "s3cre"}.AsMechanism(), ErrAuthFailed},
		{"plain unknown user", plain.Auth{User: "mallory", Pass: "s3cret"}.AsMechanism(), ErrAuthFailed},
		{"plain other authzid", plain.Auth{Zid: "bob", User: "alice", Pass: "s3cret"}.AsMechanism(), ErrAuthFailed},
		{"scram other authzid", scram.Auth{Zid: "bob", User: "alice", Pass: "s3cret"}.AsSha256Mechanism(), ErrAuthFailed},
		{"scram token", scram.Auth{User: "alice", Pass: "s3cret", IsToken: true}.AsSha256Mechanism(), ErrAuthFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := exchange(t, a, tc.mech)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && s.User() == "" {
				t.Fatal("no user after success")
			}
			if tc.wantErr != nil && s.User() != "" {
				t.Fatalf("user %q after a failure", s.User())
			}
			if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "mallory")) {
				t.Fatalf("the error says too much: %v", err)
			}
		})
	}
}

// typical shapes made-up credentials after the first user's (the tests' users agree).
func (u users) typical(mech string) (int, []byte, bool) {
	for _, ms := range u {
		if c, ok := ms[mech]; ok {
			return c.Iterations, c.Salt, true
		}
	}
	return 0, nil, false
}

// serverFirst runs a client-first for user and returns the server's salt (decoded) and
// iteration count.
func serverFirst(t *testing.T, a *Authenticator, mech, user string) ([]byte, string) {
	t.Helper()
	s, _ := a.Start(mech)
	out, _, err := s.Step([]byte("n,,n=" + user + ",r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(out), ",s=")
	salt64, iter, _ := strings.Cut(rest, ",i=")
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		t.Fatal(err)
	}
	return salt, iter
}

// TestUnknownUserLooksKnown (issue 20, item 7): an unknown user gets a server-first
// message like a known one's: the same iteration count as real users (4096 here, not
// the default 8192), a salt of the same length and alphabet, the same salt at every
// attempt; it fails only at the proof. Without users, DefaultIterations.
func TestUnknownUserLooksKnown(t *testing.T) {
	u := users{}
	u.add(t, "alice", "pw", ScramSHA256, ScramSHA512)
	a := NewAuthenticator(Mechanisms, u.lookup)
	a.SetTypical(u.typical)
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		known, ki := serverFirst(t, a, mech, "alice")
		ghost, gi := serverFirst(t, a, mech, "ghost")
		again, _ := serverFirst(t, a, mech, "ghost")
		if ki != gi || gi != "4096" {
			t.Fatalf("%s: iterations known %s, unknown %s", mech, ki, gi)
		}
		if len(known) != len(ghost) || !bytes.Equal(ghost, again) {
			t.Fatalf("%s: salts known %x, unknown %x then %x", mech, known, ghost, again)
		}
	}
	// Java clients' printable salts: the made-up one is printable too.
	j := users{"bob": {ScramSHA256: {Iterations: 4096, Salt: []byte("1n2k3l4m5n6o7p8q9r0s1t2u3"), StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}}}
	aj := NewAuthenticator(Mechanisms, j.lookup)
	aj.SetTypical(j.typical)
	if salt, _ := serverFirst(t, aj, ScramSHA256, "ghost"); len(salt) != 25 || !base36(salt) {
		t.Fatalf("made-up salt %q does not look like a Java client's", salt)
	}
	if _, it := serverFirst(t, NewAuthenticator(Mechanisms, users{}.lookup), ScramSHA512, "ghost"); it != "8192" {
		t.Fatalf("iterations without users: %s", it)
	}
	// PLAIN checks an unknown user against what a known user's check uses: here users
	// have SCRAM-SHA-256 only, at 4096 iterations.
	o := users{}
	o.add(t, "carol", "pw", ScramSHA256)
	ao := NewAuthenticator(Mechanisms, o.lookup)
	ao.SetTypical(o.typical)
	if mech, c := ao.plainMock("ghost"); mech != ScramSHA256 || c.Iterations != 4096 {
		t.Fatalf("PLAIN's made-up credential: %s, %d iterations", mech, c.Iterations)
	}
}

// TestScramRefusals: tampered or malformed messages fail, and a session never
// authenticates after a failure.
func TestScramRefusals(t *testing.T) {
	u := users{}
	u.add(t, "alice", "pw", ScramSHA256)
	u.add(t, "a,b=c", "pw", ScramSHA256)
	a := NewAuthenticator(Mechanisms, u.lookup)
	a.nonce = func() string { return "SNONCE" }
	// A correct client-final for alice, built with franz-go's client on a fixed nonce.
	m := scram.Auth{User: "alice", Pass: "pw", Nonce: []byte("CNONCE")}.AsSha256Mechanism()
	good := func() (Session, []byte) {
		s, _ := a.Start(ScramSHA256)
		cs, msg, _ := m.Authenticate(context.Background(), "")
		out, _, err := s.Step(msg)
		if err != nil {
			t.Fatal(err)
		}
		_, final, err := cs.Challenge(out)
		if err != nil {
			t.Fatal(err)
		}
		return s, final
	}
	_, final := good()
	proofAt := bytes.LastIndex(final, []byte(",p="))
	flip := bytes.Clone(final)
	proof, _ := base64.StdEncoding.DecodeString(string(final[proofAt+3:]))
	proof[0] ^= 1
	flip = append(flip[:proofAt+3], base64.StdEncoding.EncodeToString(proof)...)
	for name, tc := range map[string]struct {
		msg  []byte
		want error
	}{
		"flipped proof bit": {flip, ErrAuthFailed},
		"other nonce":       {bytes.Replace(final, []byte("SNONCE"), []byte("SNONCF"), 1), ErrMalformed},
		"other binding":     {bytes.Replace(final, []byte("c=biws"), []byte("c=eSws"), 1), ErrMalformed},
		"no proof":          {final[:proofAt], ErrMalformed},
		"short proof":       {append(bytes.Clone(final[:proofAt]), ",p=AAAA"...), ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := good()
			if _, done, err := s.Step(tc.msg); !errors.Is(err, tc.want) || done {
				t.Fatalf("err %v done %v, want %v", err, done, tc.want)
			}
			if _, done, err := s.Step(final); err == nil || done || s.User() != "" {
				t.Fatal("a failed session went on")
			}
		})
	}
	if s, _ := good(); true {
		if _, done, err := s.Step(final); err != nil || !done || s.User() != "alice" {
			t.Fatalf("the untampered message: %v %v %q", err, done, s.User())
		}
	}

	for _, first := range []string{"", "n", "n,", "x,,n=alice,r=a", "p=tls-unique,,n=alice,r=a", "n,,r=a", "n,,n=alice",
		"n,,n=alice,r=", "n,,n=alice,r=a b", "n,,n=al=ice,r=a", "n,z,n=alice,r=a", "n,,m=x,n=alice,r=a", "n,,n=,r=a", "n,,n=alice,r=a,bad"} {
		s, _ := a.Start(ScramSHA256)
		if _, _, err := s.Step([]byte(first)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-first %q: %v, want ErrMalformed", first, err)
		}
	}
	// Escaped names decode (",", "=").
	s, _ := a.Start(ScramSHA256)
	if _, _, err := s.Step([]byte("n,,n=a=2Cb=3Dc,r=x")); err != nil {
		t.Fatal(err)
	}
	if ss := s.(*scramSession); ss.user != "a,b=c" {
		t.Fatalf("decoded user %q", ss.user)
	}
	if _, err := a.Start("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("GSSAPI: %v", err)
	}
	only := NewAuthenticator([]string{ScramSHA512}, u.lookup)
	if _, err := only.Start(Plain); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("PLAIN not enabled: %v", err)
	}
}

func TestPlainMalformed(t *testing.T) {
	u := users{}
	u.add(t, "alice", "pw", ScramSHA256)
	a := NewAuthenticator(Mechanisms, u.lookup)
	for _, msg := range []string{"", "alice", "\x00alice", "\x00alice\x00", "\x00\x00pw", "a\x00b\x00c\x00d"} {
		s, _ := a.Start(Plain)
		if _, _, err := s.Step([]byte(msg)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", msg, err)
		}
	}
	s, _ := a.Start(Plain)
	if _, done, err := s.Step([]byte("alice\x00alice\x00pw")); err != nil || !done || s.User() != "alice" {
		t.Fatalf("authzid = user: %v %v %q", err, done, s.User())
	}
	if _, _, err := s.Step([]byte("\x00alice\x00pw")); err == nil {
		t.Fatal("a second message in a PLAIN session")
	}
}

func TestConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{{}, {Mechanisms: []string{"GSSAPI"}}, {Mechanisms: []string{Plain}, SessionLifetime: -1}, {Mechanisms: []string{Plain}, SessionLifetime: 1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if s := (Credential{Iterations: 4096, StoredKey: []byte("secret")}).String(); strings.Contains(s, "secret") {
		t.Fatal(s)
	}
}

// FuzzScram feeds arbitrary client messages to SCRAM and PLAIN sessions: they must never
// panic, and never authenticate without the password.
func FuzzScram(f *testing.F) {
	u := users{}
	u.add(f, "alice", "pw", ScramSHA256, ScramSHA512)
	a := NewAuthenticator(Mechanisms, u.lookup)
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=abc,ext=1"), []byte("c=eSxhPWFsaWNlLA==,r=abc,p="))
	f.Add([]byte("n,,n=a=2Cb,r=x"), []byte(",p=,p=,"))
	f.Add([]byte("\x00alice\x00pw"), []byte{})
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, m := range Mechanisms {
			s, err := a.Start(m)
			if err != nil {
				t.Fatal(err)
			}
			_, done, err := s.Step(first)
			if done && !bytes.Equal(first, []byte("\x00alice\x00pw")) && !bytes.Equal(first, []byte("alice\x00alice\x00pw")) {
				t.Fatalf("%s authenticated %q", m, first)
			}
			if err != nil || done {
				continue
			}
			if _, done, _ := s.Step(final); done {
				t.Fatalf("%s authenticated with a forged final message %q", m, final)
			}
		}
	})
}
