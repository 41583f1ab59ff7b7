package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/security/sasl"

	"github.com/weir-io/weir/bench"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
)

// runBench runs `weir bench ARGS --json` and decodes its result.
func runBench(t *testing.T, args ...string) *bench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	args = append(args, "--json")
	if err := bench.Main(ctx, args, &out, &progress); err != nil {
		t.Fatalf("weir bench %v: %v\n%s", args, err, progress.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("weir bench %v: bad JSON: %v\n%s", args, err, out.String())
	}
	return &res
}

// `weir bench produce` and `consume` with --tls-ca against a broker's SSL listener:
// every record sent is acked over TLS and read back over TLS.
func TestBenchOverTLS(t *testing.T) {
	pki := newTestPKI(t)
	tb := startBroker(t, t.TempDir(), func(c *Config) {
		c.Listeners = []NamedListener{{Name: "SSL", Protocol: "SSL", Listen: "127.0.0.1:0"}}
		c.TLS = tlsconf.Files{CertFile: pki.server.CertFile, KeyFile: pki.server.KeyFile}
	})
	ssl := tb.NamedAddrs()["SSL"].String()
	sec := []string{"--bootstrap", ssl, "--tls-ca", pki.ca.CAFile, "--topic", "bench-tls", "--interval", "1s"}
	pr := runBench(t, append([]string{"produce", "--records", "500", "--warmup", "0s", "--partitions", "2"}, sec...)...).Produce
	if pr == nil || pr.RecordsSent != 500 || pr.RecordsAcked != 500 || pr.RecordsFailed != 0 {
		t.Fatalf("produce over TLS: %+v", pr)
	}
	cr := runBench(t, append([]string{"consume", "--stop-at-end", "--drain-timeout", "20s"}, sec...)...).Consume
	if cr == nil || cr.RecordsRead != 500 || !cr.ReachedEnd {
		t.Fatalf("consume over TLS: %+v", cr)
	}
}

// TestListenerProtocolThroughput measures produce throughput and ack latency of one
// broker through listeners of each security protocol, back to back in one run:
//
//	WEIR_LISTENER_BENCH=PLAINTEXT,SSL,SASL_SSL go test -run TestListenerProtocolThroughput -v -timeout 30m ./broker
//
// The first protocol is the main listener's, every other one a named listener of its
// own. Each protocol gets two `weir bench produce` runs: unlimited (closed loop: the
// throughput) and at a fixed rate well below it (open loop: the ack latency without
// queueing). WEIR_LISTENER_BENCH_ARGS replaces the common flags and
// WEIR_LISTENER_BENCH_RATE the fixed rate (records/s); WEIR_LISTENER_BENCH_ROUNDS
// repeats the whole list (interleaved, so drift of the machine spreads over every
// protocol). SASL_PLAINTEXT and SASL_SSL clients use WEIR_LISTENER_BENCH_SASL=MECHANISM:user
// (default SCRAM-SHA-256:bench; password $WEIR_SASL_PASSWORD, default bench-password),
// created on the broker before the runs.
func TestListenerProtocolThroughput(t *testing.T) {
	list := os.Getenv("WEIR_LISTENER_BENCH")
	if list == "" {
		t.Skip("WEIR_LISTENER_BENCH is not set (e.g. PLAINTEXT,SSL)")
	}
	protos := strings.Split(strings.ToUpper(list), ",")
	args := strings.Fields(os.Getenv("WEIR_LISTENER_BENCH_ARGS"))
	if len(args) == 0 {
		args = strings.Fields("--duration 15s --warmup 3s --partitions 6 --record-size 1024 --producers 2 --interval 15s")
	}
	rate := "10000"
	if r := os.Getenv("WEIR_LISTENER_BENCH_RATE"); r != "" {
		rate = r
	}
	rounds := 1
	fmt.Sscan(os.Getenv("WEIR_LISTENER_BENCH_ROUNDS"), &rounds)
	mech, user, _ := strings.Cut(os.Getenv("WEIR_LISTENER_BENCH_SASL"), ":")
	if mech == "" {
		mech, user = "SCRAM-SHA-256", "bench"
	}
	if os.Getenv("WEIR_SASL_PASSWORD") == "" {
		t.Setenv("WEIR_SASL_PASSWORD", "bench-password")
	}

	pki := newTestPKI(t)
	tb := startBroker(t, t.TempDir(), func(c *Config) {
		c.ListenProtocol = protos[0]
		for _, p := range protos[1:] {
			c.Listeners = append(c.Listeners, NamedListener{Name: p, Protocol: p, Listen: "127.0.0.1:0"})
		}
		c.TLS = tlsconf.Files{CertFile: pki.server.CertFile, KeyFile: pki.server.KeyFile}
	})
	// The SASL user exists on the broker (its local metadata store), with both SCRAM
	// mechanisms (PLAIN checks against them).
	for _, m := range []metadata.ScramMechanism{metadata.ScramSHA256, metadata.ScramSHA512} {
		c, err := sasl.NewCredential(m.String(), os.Getenv("WEIR_SASL_PASSWORD"), 8192)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tb.meta.AlterScram(context.Background(), []metadata.ScramAlteration{{User: user, Mechanism: m,
			Credential: metadata.ScramCredential{Mechanism: m, Iterations: 8192, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("creating the SASL user: %v %v", res, err)
		}
	}
	addr := func(p string) string {
		if p == protos[0] {
			return tb.addr()
		}
		return tb.NamedAddrs()[p].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "weir bench produce %s; latency at --rate %s; one broker, %d round(s):\n", strings.Join(args, " "), rate, rounds)
	fmt.Fprintf(&b, "| protocol | records/s (unlimited) | MB/s | ack p50 ms @rate | ack p99 ms @rate | ack p99.9 ms @rate |\n|---|---|---|---|---|---|\n")
	for r := 0; r < rounds; r++ {
		for _, p := range protos {
			a := []string{"produce", "--bootstrap", addr(p), "--topic", "listener-bench-" + strings.ToLower(p)}
			if p == metadata.ProtocolSSL || p == metadata.ProtocolSASLSSL {
				a = append(a, "--tls-ca", pki.ca.CAFile)
			}
			if p == metadata.ProtocolSASLPlaintext || p == metadata.ProtocolSASLSSL {
				a = append(a, "--sasl-mechanism", mech, "--sasl-user", user)
			}
			a = append(a, args...)
			tput := runBench(t, a...).Produce
			lat := runBench(t, append(a, "--rate", rate)...).Produce
			if tput == nil || tput.RecordsAcked == 0 || lat == nil || lat.Latency == nil {
				t.Fatalf("%s: no result: %+v %+v", p, tput, lat)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.2f | %.2f | %.2f |\n", p, tput.RecordsPerSec, tput.MBPerSec, lat.Latency.P50, lat.Latency.P99, lat.Latency.P999)
		}
	}
	t.Log("\n" + b.String())
}
