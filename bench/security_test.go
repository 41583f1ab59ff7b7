package bench

import (
	"io"
	"strings"
	"testing"
)

// The client security flags: the protocol they speak, what they refuse, and a password
// that never reaches the results.
func TestClientSecurityFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		proto string
	}{
		{nil, "PLAINTEXT"},
		{[]string{"--tls"}, "SSL"},
		{[]string{"--tls-insecure"}, "SSL"},
		{[]string{"--sasl-mechanism", "PLAIN", "--sasl-user", "u"}, "SASL_PLAINTEXT"},
		{[]string{"--tls", "--sasl-mechanism", "scram-sha-512", "--sasl-user", "u"}, "SASL_SSL"},
	} {
		cfg, err := parseArgs(append([]string{"produce"}, tc.args...), io.Discard, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if p := cfg.sec.Protocol(); p != tc.proto {
			t.Errorf("%v: protocol %s, want %s", tc.args, p, tc.proto)
		}
	}
	for _, bad := range [][]string{
		{"--sasl-mechanism", "GSSAPI", "--sasl-user", "u"},
		{"--sasl-mechanism", "PLAIN"},
		{"--sasl-user", "u"},
		{"--tls-cert", "c.pem"},
		{"--tls-ca", "/nonexistent/ca.pem"},
	} {
		if _, err := parseArgs(append([]string{"produce"}, bad...), io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	cfg, err := parseArgs([]string{"produce", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "u", "--sasl-password", "hunter2"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cfg.settings {
		if strings.Contains(v, "hunter2") {
			t.Fatalf("setting %s shows the password", k)
		}
	}
}
