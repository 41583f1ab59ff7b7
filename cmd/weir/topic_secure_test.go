package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTopicSecureCluster: weir topic and weir config against the SASL_SSL listeners of
// the cluster weir dev --secure runs (one controller and one broker here, to start fast),
// with the client flags kafkaCLI shares; without SASL, or without TLS, they get nothing.
func TestTopicSecureCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, sec := startSecureDev(t, ctx)
	base := []string{"--bootstrap", c.Bootstrap(), "--timeout", "20s"}
	tlsFlags := []string{"--tls-ca", sec.caFile}
	saslFlags := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", devAdmin}
	t.Setenv("WEIR_SASL_PASSWORD", sec.password) // the password off the command line, as the flag's help advises
	secure := append(append(append([]string{}, base...), tlsFlags...), saslFlags...)
	topic := kafkaRunner(ctx, runTopic, secure...)
	config := kafkaRunner(ctx, runConfig, secure...)

	if out, err := topic("create", "secured", "--partitions", "2"); err != nil || !strings.Contains(out, "created") {
		t.Fatalf("create over SASL_SSL: %v\n%s", err, out)
	}
	if out, err := config("set", "--topic", "secured", "retention.ms=60000"); err != nil {
		t.Fatalf("config set over SASL_SSL: %v\n%s", err, out)
	}
	out, err := topic("describe", "secured", "--json")
	var got []describedTopic
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || len(got[0].Partitions) != 2 ||
		len(got[0].Configs) != 1 || *got[0].Configs[0].Value != "60000" {
		t.Fatalf("describe over SASL_SSL: %v\n%s", err, out)
	}

	// Without one of them the client's error says which is missing.
	short := []string{"--bootstrap", c.Bootstrap(), "--timeout", "5s"}
	for _, tc := range []struct {
		flags []string
		want  string
	}{{tlsFlags, "is SASL missing"}, {saslFlags, "is TLS missing"}} {
		run := kafkaRunner(ctx, runTopic, append(append([]string{}, short...), tc.flags...)...)
		if out, err := run("list"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("list with only %q: %v (want %q)\n%s", tc.flags, err, tc.want, out)
		}
	}
}
