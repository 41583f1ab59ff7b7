package sasl

import (
	"context"
	"testing"

	fsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// BenchmarkServerLogin measures the server's work for one login (the client's PBKDF2 is
// done once, outside the loop, for SCRAM): SCRAM costs the server two HMACs and a hash,
// PLAIN a whole PBKDF2 of the stored credential's iterations.
func BenchmarkServerLogin(b *testing.B) {
	for _, tc := range []struct {
		mech string
		iter int
	}{{ScramSHA256, 4096}, {ScramSHA512, 4096}, {Plain + "/SHA-256/4096", 4096}, {Plain + "/SHA-512/8192", 8192}} {
		b.Run(tc.mech, func(b *testing.B) {
			u := users{}
			m := tc.mech
			switch m {
			case Plain + "/SHA-256/4096":
				c, _ := NewCredential(ScramSHA256, "pw", tc.iter)
				u["alice"] = map[string]Credential{ScramSHA256: c}
				m = Plain
			case Plain + "/SHA-512/8192":
				c, _ := NewCredential(ScramSHA512, "pw", tc.iter)
				u["alice"] = map[string]Credential{ScramSHA512: c}
				m = Plain
			default:
				c, _ := NewCredential(m, "pw", tc.iter)
				u["alice"] = map[string]Credential{m: c}
			}
			a := NewAuthenticator(Mechanisms, u.lookup)
			if m == Plain {
				for i := 0; i < b.N; i++ {
					s, _ := a.Start(Plain)
					if _, done, err := s.Step([]byte("\x00alice\x00pw")); err != nil || !done {
						b.Fatal(err)
					}
				}
				return
			}
			// One client-final per iteration needs a fresh exchange; the client side is
			// precomputed by replaying franz-go's client with a fixed nonce against a
			// fixed server nonce.
			a.nonce = func() string { return "S" }
			var mech fsasl.Mechanism = scram.Auth{User: "alice", Pass: "pw", Nonce: []byte("C")}.AsSha256Mechanism()
			if m == ScramSHA512 {
				mech = scram.Auth{User: "alice", Pass: "pw", Nonce: []byte("C")}.AsSha512Mechanism()
			}
			cs, first, _ := mech.Authenticate(context.Background(), "")
			s, _ := a.Start(m)
			sf, _, _ := s.Step(first)
			_, final, err := cs.Challenge(sf)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, _ := a.Start(m)
				s.Step(first)
				if _, done, err := s.Step(final); err != nil || !done {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFailedLogin compares a wrong password for a known user with an unknown
// user, for PLAIN (one whole PBKDF2 each) and SCRAM's first step: the pairs should cost
// the same (issue 20, item 7). Users have SCRAM-SHA-256 at 4096 iterations, as Kafka's
// tools make them. Timing is not asserted (a shared machine is noisy); compare the
// numbers it prints.
func BenchmarkFailedLogin(b *testing.B) {
	u := users{}
	u.add(b, "alice", "pw", ScramSHA256)
	a := NewAuthenticator(Mechanisms, u.lookup)
	a.SetTypical(u.typical)
	for _, tc := range []struct{ name, mech, msg string }{
		{"PLAIN/known-wrong-password", Plain, "\x00alice\x00wrong"},
		{"PLAIN/unknown-user", Plain, "\x00ghost\x00wrong"},
		{"SCRAM-SHA-256-first/known", ScramSHA256, "n,,n=alice,r=abc"},
		{"SCRAM-SHA-256-first/unknown", ScramSHA256, "n,,n=ghost,r=abc"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, _ := a.Start(tc.mech)
				s.Step([]byte(tc.msg))
			}
		})
	}
}
