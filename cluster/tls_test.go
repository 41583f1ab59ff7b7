package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// dialTLS dials through d (recording the address) and completes a TLS handshake with
// cfg, verifying the server by the dialled host.
func (d *dialLog) dialTLS(cfg *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		nc, err := d.dial(ctx, network, host)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		c.ServerName, _, _ = net.SplitHostPort(host)
		tc := tls.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
}

// Every broker of a 2-broker cluster has a plaintext main listener and a named SSL
// listener with a certificate from a test CA. Clients that bootstrap from one SSL
// listener and verify the certificates against the CA are told every broker's SSL
// listener and only ever dial those: franz-go produces and reads back with a consumer
// group (FindCoordinator answered there), kcat (librdkafka) produces and consumes with
// security.protocol=SSL, sarama produces and consumes with TLS. A certificate renewed
// on disk is served on the next connection.
func TestTLSListenerClients(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	ca, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("broker", "broker")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, func(cfg *Config) {
		cfg.Brokers = 2
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.Listeners = []broker.NamedListener{{Name: "SSL", Protocol: "SSL", Listen: "127.0.0.1:0"}}
			b.TLS = tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile}
		}
	})
	sslAddr := map[int32]string{}
	var sslAddrs []string
	for i := 0; i < 2; i++ {
		b := c.Broker(i).Broker
		a := b.NamedAddrs()["SSL"].String()
		sslAddr[b.Advertised().ID] = a
		sslAddrs = append(sslAddrs, a)
	}
	testutil.Eventually(t, 30*time.Second, "every broker's SSL listener registered", func() bool {
		v := c.Broker(0).Client.View()
		for id, a := range sslAddr {
			br, ok := v.Broker(id)
			if h, p := br.Endpoint("SSL"); !ok || net.JoinHostPort(h, fmt.Sprint(p)) != a {
				return false
			}
		}
		return true
	})
	src, err := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := src.Client()
	adm := kadm.NewClient(newClient(t, c))
	const parts = 3
	for _, topic := range []string{"tls-franz", "tls-kcat", "tls-sarama"} {
		if err := createTopic(t, adm, parts, topic); err != nil {
			t.Fatal(err)
		}
		waitTopic(t, c, topic)
	}

	t.Run("franz-go", func(t *testing.T) {
		var dials dialLog
		opts := []kgo.Opt{kgo.SeedBrokers(sslAddrs[1]), kgo.Dialer(dials.dialTLS(clientTLS)), kgo.RetryTimeout(60 * time.Second)}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		md, err := kadm.NewClient(cl).BrokerMetadata(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 2 {
			t.Fatalf("%d brokers", len(md.Brokers))
		}
		for _, b := range md.Brokers {
			if got := net.JoinHostPort(b.Host, fmt.Sprint(b.Port)); got != sslAddr[b.NodeID] {
				t.Fatalf("SSL listener's Metadata: broker %d at %s, want its SSL listener %s", b.NodeID, got, sslAddr[b.NodeID])
			}
		}
		acked := produceValues(t, cl, "tls-franz", parts, 50, "tls")

		gc, err := kgo.NewClient(append(opts, kgo.ConsumerGroup("tls-group"), kgo.ConsumeTopics("tls-franz"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		ctx := ctxFor(t, 90*time.Second)
		got := 0
		for got < len(acked) {
			fs := gc.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", got, len(acked))
			}
			fs.EachRecord(func(r *kgo.Record) {
				if off, ok := acked[string(r.Value)]; !ok || off != r.Offset {
					t.Fatalf("read %q at %d, acked at %d (%v)", r.Value, r.Offset, off, ok)
				}
				got++
			})
		}
		if err := gc.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit through the coordinator's SSL listener: %v", err)
		}
		ssl := map[string]bool{}
		for _, a := range sslAddrs {
			ssl[a] = true
		}
		for a := range dials.dialed() {
			if !ssl[a] {
				t.Fatalf("dialled %s, not an SSL listener (dials %v)", a, dials.dialed())
			}
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
				t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
			}
			t.Skip("kcat not installed")
		}
		run := func(stdin string, args ...string) string {
			t.Helper()
			args = append([]string{"-b", sslAddrs[0], "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.CAFile}, args...)
			cmd := exec.CommandContext(ctxFor(t, 90*time.Second), kcat, args...)
			cmd.Stdin = strings.NewReader(stdin)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("kcat %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
			}
			return out.String()
		}
		md := run("", "-L")
		for _, a := range sslAddrs {
			if !strings.Contains(md, a) {
				t.Fatalf("kcat -L over SSL does not name SSL listener %s:\n%s", a, md)
			}
		}
		var lines []string
		for i := 0; i < 60; i++ {
			lines = append(lines, fmt.Sprintf("kcat-%03d", i))
		}
		run(strings.Join(lines, "\n")+"\n", "-P", "-t", "tls-kcat", "-p", "1", "-X", "acks=all", "-X", "enable.idempotence=true")
		out := run("", "-C", "-t", "tls-kcat", "-p", "1", "-o", "beginning", "-e", "-f", "%o %s\n")
		got := strings.Split(strings.TrimSpace(out), "\n")
		if len(got) != len(lines) {
			t.Fatalf("consumed %d messages, want %d:\n%s", len(got), len(lines), out)
		}
		for i, l := range got {
			if want := fmt.Sprintf("%d %s", i, lines[i]); l != want {
				t.Fatalf("line %d: %q, want %q", i, l, want)
			}
		}
		// librdkafka verifies the broker's certificate: another CA is refused.
		other, err := tlstest.NewCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctxFor(t, 60*time.Second), kcat, "-b", sslAddrs[0], "-X", "security.protocol=SSL",
			"-X", "ssl.ca.location="+other.CAFile, "-m", "5", "-L")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("kcat trusting another CA listed metadata:\n%s", out)
		}
	})

	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = clientTLS
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Metadata.Retry.Max = 20
		cfg.Producer.Retry.Max = 20
		cfg.Version = sarama.V2_8_0_0
		prod, err := sarama.NewSyncProducer([]string{sslAddrs[0]}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		offsets := map[string]int64{}
		for i := 0; i < 30; i++ {
			v := fmt.Sprintf("sarama-%02d", i)
			p, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "tls-sarama", Partition: 2, Value: sarama.StringEncoder(v)})
			if err != nil {
				t.Fatalf("sarama produce over TLS: %v", err)
			}
			if p != 2 {
				t.Fatalf("sarama produced to partition %d", p)
			}
			offsets[v] = off
		}
		cons, err := sarama.NewConsumer([]string{sslAddrs[1]}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		pc, err := cons.ConsumePartition("tls-sarama", 2, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		timeout := time.After(60 * time.Second)
		for n := 0; n < len(offsets); n++ {
			select {
			case m := <-pc.Messages():
				if off, ok := offsets[string(m.Value)]; !ok || off != m.Offset {
					t.Fatalf("sarama read %q at %d, acked at %d (%v)", m.Value, m.Offset, off, ok)
				}
			case err := <-pc.Errors():
				t.Fatal(err)
			case <-timeout:
				t.Fatalf("sarama read %d of %d messages", n, len(offsets))
			}
		}
	})

	t.Run("renewed certificate", func(t *testing.T) {
		served := func() (*big.Int, error) {
			tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", sslAddrs[0], clientTLS)
			if err != nil {
				return nil, err
			}
			defer tc.Close()
			return tc.ConnectionState().PeerCertificates[0].SerialNumber, nil
		}
		before, err := served()
		if err != nil {
			t.Fatal(err)
		}
		if want := fileSerial(t, srv.CertFile); before.Cmp(want) != 0 {
			t.Fatalf("served serial %v, file's %v", before, want)
		}
		if _, err := ca.Issue("broker", "broker"); err != nil { // the same files, renewed
			t.Fatal(err)
		}
		renewed := fileSerial(t, srv.CertFile)
		testutil.Eventually(t, 30*time.Second, "the renewed certificate served", func() bool {
			s, err := served()
			return err == nil && s.Cmp(renewed) == 0
		})
		// Clients keep working over the renewed certificate.
		cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddrs[0]), kgo.DialTLSConfig(clientTLS), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctxFor(t, 60*time.Second), &kgo.Record{Topic: "tls-franz", Partition: 0, Value: []byte("after renewal")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})
}

func fileSerial(t *testing.T, certFile string) *big.Int {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", certFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber
}
