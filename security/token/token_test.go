package token

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cluster.token")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(p+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	write("# comment\n\n  first-token-0123456789  \nsecond-token-0123456789\n")
	f, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.now = func() time.Time { return now }
	if got := string(f.Current()); got != "first-token-0123456789" {
		t.Fatalf("current %q", got)
	}
	for tok, want := range map[string]bool{
		"first-token-0123456789": true, "second-token-0123456789": true,
		"first-token-012345678": false, "first-token-01234567890": false, "": false, "# comment": false,
	} {
		if f.Match([]byte(tok)) != want {
			t.Errorf("Match(%q) = %v", tok, !want)
		}
	}
	// Rotation: a changed file is read again after CheckEvery, not before.
	write("third-token-0123456789\n")
	if !f.Match([]byte("first-token-0123456789")) {
		t.Fatal("the file was read again within CheckEvery")
	}
	now = now.Add(CheckEvery)
	if f.Match([]byte("first-token-0123456789")) || !f.Match([]byte("third-token-0123456789")) {
		t.Fatal("the rewritten file was not picked up")
	}
	// A bad rewrite keeps the tokens in use.
	write("short\n")
	now = now.Add(CheckEvery)
	if !f.Match([]byte("third-token-0123456789")) {
		t.Fatal("a bad file replaced the tokens")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, content := range map[string]string{
		"empty":    "",
		"comments": "# only\n\n",
		"short":    "tok-secret-1\n",
	} {
		_, err := Parse([]byte(content))
		if err == nil {
			t.Errorf("%s: parsed", name)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("a missing file loaded")
	}
	if len(Generate()) < MinLen || Generate() == Generate() {
		t.Error("Generate")
	}
}

// TestDerivedKeysSeparate: the controller-API key and the peer key of one token
// differ from each other and from the token, are stable, and differ between tokens, so
// a holder of one (a controller sees bearers) learns neither the other nor the token.
func TestDerivedKeysSeparate(t *testing.T) {
	f, err := Static("token-a-0123456789abcdef", "token-b-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	api, peer := f.Key(PurposeControllerAPI), f.Key(PurposePeer)
	if bytes.Equal(api, peer) || bytes.Equal(api, f.Current()) || bytes.Equal(peer, f.Current()) || len(api) != 32 {
		t.Fatalf("keys not separate: api %x peer %x", api, peer)
	}
	if !bytes.Equal(api, Derive([]byte("token-a-0123456789abcdef"), PurposeControllerAPI)) {
		t.Fatal("Key is not Derive of the current token")
	}
	keys := f.Keys(PurposePeer)
	if len(keys) != 2 || !bytes.Equal(keys[0], peer) || bytes.Equal(keys[0], keys[1]) {
		t.Fatalf("Keys: %x", keys)
	}
	if !f.MatchBearer([]byte(f.Bearer())) || f.MatchBearer(f.Current()) || f.MatchBearer(nil) {
		t.Fatal("MatchBearer accepts the raw token or refuses the bearer")
	}
	g, _ := Static("token-b-0123456789abcdef")
	if !f.MatchBearer([]byte(g.Bearer())) {
		t.Fatal("the second token's bearer is refused (rotation)")
	}
}
