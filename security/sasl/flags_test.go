package sasl

import (
	"flag"
	"testing"
)

// TestFlagValueNames checks what -help shows as each flag's value name: Go's flag package
// takes a back-quoted word of the usage string for it, so a command quoted in the usage
// once made -help print "-sasl-mechanisms weir admin user set".
func TestFlagValueNames(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := DefaultConfig()
	c.BindFlags(fs)
	want := map[string]string{
		"sasl-mechanisms":                  "list",
		"sasl-session-lifetime":            "duration",
		"sasl-failed-authentication-delay": "duration",
	}
	fs.VisitAll(func(f *flag.Flag) {
		name, _ := flag.UnquoteUsage(f)
		if w, ok := want[f.Name]; !ok {
			t.Errorf("--%s: not in the test's table", f.Name)
		} else if name != w {
			t.Errorf("--%s: value name %q, want %q", f.Name, name, w)
		}
	})
	if err := fs.Parse([]string{"--sasl-mechanisms", "plain, scram-sha-256"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Mechanisms; len(got) != 2 || got[0] != Plain || got[1] != "SCRAM-SHA-256" {
		t.Fatalf("mechanisms %q", got)
	}
}
