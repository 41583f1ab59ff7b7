package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// TestAdminUserLocal: set, list and delete against a standalone broker's metadata file;
// the file holds the credential (which verifies the password) and never the password.
func TestAdminUserLocal(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "metadata.json")
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("Tr0ub4dor&3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runAdminUser(context.Background(), append(args, "--metadata-file", meta), &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		// Columns collapsed to one space: tabwriter's widths depend on the names.
		var lines []string
		for _, l := range strings.Split(out.String(), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(lines, "\n")
	}
	run("set", "--name", "alice", "--password-file", pw, "--mechanism", "SCRAM-SHA-512")
	run("set", "--name", "bob", "--password-file", pw, "--iterations", "4096")
	out := run("list")
	for _, want := range []string{"alice SCRAM-SHA-512 8192", "bob SCRAM-SHA-256 4096", "bob SCRAM-SHA-512 4096"} {
		if !strings.Contains(out, want) {
			t.Fatalf("list lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("Tr0ub4dor")) {
		t.Fatal("the password is in the metadata file")
	}
	ls, err := metadata.OpenLocal(metadata.LocalConfig{Path: meta})
	if err != nil {
		t.Fatal(err)
	}
	// The stored credential checks the password (trailing newline dropped) over PLAIN.
	a := sasl.NewAuthenticator(sasl.Mechanisms, func(user, mech string) (sasl.Credential, bool) {
		m, _ := metadata.ParseScramMechanism(mech)
		c, ok := ls.View().Scram.Credential(user, m)
		return sasl.Credential{Iterations: int(c.Iterations), Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, ok
	})
	s, _ := a.Start(sasl.Plain)
	if _, done, err := s.Step([]byte("\x00alice\x00Tr0ub4dor&3")); err != nil || !done {
		t.Fatalf("alice's password does not verify: %v", err)
	}
	run("delete", "--name", "bob", "--mechanism", "SCRAM-SHA-256")
	run("delete", "--name", "alice")
	if out := run("list"); strings.Contains(out, "alice") || !strings.Contains(out, "bob SCRAM-SHA-512") || strings.Contains(out, "bob SCRAM-SHA-256") {
		t.Fatalf("after deletes:\n%s", out)
	}
	var errOut bytes.Buffer
	if err := runAdminUser(context.Background(), []string{"set", "--name", "x", "--password-file", pw, "--iterations", "100", "--metadata-file", meta}, &errOut); err == nil {
		t.Fatal("100 iterations accepted")
	}
	if err := runAdminUser(context.Background(), []string{"delete", "--name", "nobody", "--metadata-file", meta}, &errOut); err == nil {
		t.Fatal("deleting an unknown user succeeded")
	}
}
