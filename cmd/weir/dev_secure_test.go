package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/security/tlsconf"
)

// TestDevSecureEndToEnd runs the cluster `weir dev --secure` runs (3 controllers, 2
// brokers) and exercises its checklist over real TCP with the
// files it leaves: the admin of client.properties (SASL_SSL, SCRAM, the CA) creates a
// topic, produces through both brokers and consumes; a plaintext client, a TLS client
// without SASL and a wrong password get nothing; a SCRAM user without ACLs is refused
// by the authorizer; the controller API refuses an unauthenticated caller and plain
// HTTP, and serves the holder of the cluster token.
func TestDevSecureEndToEnd(t *testing.T) {
	dir := t.TempDir()
	sec, err := devSecurity(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := cluster.Config{Dir: dir, Controllers: 3, Brokers: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg}
	sec.apply(&cfg)
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := sec.bootstrap(ctx, c, cfg.Brokers, c.Bootstrap()); err != nil {
		t.Fatal(err)
	}

	// Everything a client needs is in client.properties.
	props := readProps(t, sec.propsFile)
	if props["security.protocol"] != "SASL_SSL" || props["sasl.username"] != "admin" {
		t.Fatalf("client.properties: %v", props)
	}
	// The Java client's file says the same in its own keys (issue 24 item 7).
	java := readProps(t, sec.javaFile)
	jaas := `org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="` + props["sasl.password"] + `";`
	if java["security.protocol"] != "SASL_SSL" || java["sasl.mechanism"] != "SCRAM-SHA-512" || java["sasl.jaas.config"] != jaas ||
		java["ssl.truststore.type"] != "PEM" || java["ssl.truststore.location"] != props["ssl.ca.location"] || java["bootstrap.servers"] != props["bootstrap.servers"] {
		t.Fatalf("java-client.properties: %v", java)
	}
	// The printed recipe names every file, and its weir command works as printed.
	recipe := sec.recipe(c.Bootstrap())
	for _, want := range []string{"kcat -F " + sec.propsFile, "--command-config " + sec.javaFile, "--tls-ca " + props["ssl.ca.location"], "AsSha512Mechanism"} {
		if !strings.Contains(recipe, want) {
			t.Fatalf("recipe lacks %q:\n%s", want, recipe)
		}
	}
	t.Setenv("WEIR_SASL_PASSWORD", props["sasl.password"])
	var listed bytes.Buffer
	if err := runTopic(ctx, []string{"list", "--bootstrap", c.Bootstrap(), "--tls-ca", props["ssl.ca.location"], "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin"}, &listed); err != nil {
		t.Fatalf("the recipe's weir topic list: %v\n%s", err, listed.String())
	}
	src, err := tlsconf.New(tlsconf.Files{CAFile: props["ssl.ca.location"]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := src.Client()
	seeds := strings.Split(props["bootstrap.servers"], ",")
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(10 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	scramAs := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	}
	tlsDial := kgo.DialTLSConfig(tlsCfg)

	admin := client(tlsDial, scramAs("admin", props["sasl.password"]), kgo.ConsumeTopics("secure"))
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "secure"); err != nil {
		t.Fatalf("admin creates a topic: %v", err)
	}
	var recs []*kgo.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: "secure", Value: []byte{byte(i)}})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("admin produces: %v", err)
	}
	got := 0
	for got < len(recs) && ctx.Err() == nil {
		fs := admin.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("admin consumes: %v", errs)
		}
		got += fs.NumRecords()
	}
	if got != len(recs) {
		t.Fatalf("consumed %d of %d", got, len(recs))
	}

	// The group's coordinator exports its lag for every partition, those the other broker
	// leads too: it asks that leader over the brokers' authenticated connections (a Kafka client
	// of its own would need the listeners' SASL and TLS, and failed here before).
	offs := kadm.Offsets{}
	for p := int32(0); p < 4; p++ {
		offs.AddOffset("secure", p, 0, -1)
	}
	if resp, err := adm.CommitOffsets(ctx, "lagging", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	var failures float64
	testutil.EventuallyNoError(t, time.Minute, "consumer group lag on a secure cluster", func() error {
		var lagSeries, lagSum float64
		failures = 0
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "weir_broker_consumer_group_lag":
					for _, l := range m.GetLabel() {
						if l.GetName() == "group" && l.GetValue() == "lagging" {
							lagSeries++
							lagSum += m.GetGauge().GetValue()
						}
					}
				case "weir_broker_consumer_group_lag_lookup_failures_total":
					failures += m.GetCounter().GetValue()
				}
			}
		}
		if lagSeries == 4 && lagSum == float64(len(recs)) {
			return nil
		}
		return fmt.Errorf("%v series summing to %v (want 4 summing to %d), %v lookup failures", lagSeries, lagSum, len(recs), failures)
	})
	if failures != 0 {
		t.Fatalf("consumer group lag on a secure cluster: %v lookup failures", failures)
	}

	// Anonymous clients get nothing: plaintext, TLS without SASL, a wrong password.
	short, cancelShort := context.WithTimeout(ctx, 15*time.Second)
	defer cancelShort()
	for name, opts := range map[string][]kgo.Opt{
		"plaintext":          nil,
		"TLS without SASL":   {tlsDial},
		"wrong password":     {tlsDial, scramAs("admin", "not-the-password")},
		"TLS without the CA": {kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}), scramAs("admin", props["sasl.password"])},
	} {
		if _, err := kadm.NewClient(client(opts...)).ListTopics(short); err == nil {
			t.Errorf("%s: listed topics", name)
		}
	}

	// A SCRAM user without ACLs: authenticated, then refused by the authorizer.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}}); err != nil {
		t.Fatal(err)
	}
	bob := client(tlsDial, scramAs("bob", "bob-pw"), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("secure"))
	// bob's credential reaches every broker's view shortly after the write; until then
	// his login fails.
	testutil.EventuallyNoError(t, time.Minute, "bob's produce refused as TOPIC_AUTHORIZATION_FAILED", func() error {
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := bob.ProduceSync(pctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("bob's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		return nil
	})

	// The controller API: 401 without credentials, no plain HTTP, 200 with the token.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	api := c.APIAddrs()[0]
	resp, err := hc.Get("https://" + api + "/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated controller API call: HTTP %d, want 401", resp.StatusCode)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + api + "/v1/metadata"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the controller API answered plain HTTP")
		}
	}
	base := []string{"--controllers", strings.Join(c.APIAddrs(), ","), "--timeout", "20s"}
	if err := runAdmin(ctx, append(append([]string{"describe"}, base...), strings.Fields(sec.adminFlags)...), io.Discard); err != nil {
		t.Fatalf("weir admin describe %s: %v", sec.adminFlags, err)
	}
}

// readProps reads a properties file's key=value lines (comments skipped).
func readProps(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			props[k] = v
		}
	}
	return props
}
