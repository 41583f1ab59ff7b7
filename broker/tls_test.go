package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// testPKI is a CA, the broker's certificate (127.0.0.1, localhost) and a client's.
type testPKI struct {
	ca             *tlstest.CA
	server, client tlstest.Pair
}

func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	ca, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("broker", "broker")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Issue("alice", "alice")
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{ca: ca, server: srv, client: cl}
}

// clientTLS is a client configuration verifying the broker against the CA, presenting
// pair when given.
func (p testPKI) clientTLS(t testing.TB, pair *tlstest.Pair) *tls.Config {
	t.Helper()
	f := tlsconf.Files{CAFile: p.ca.CAFile}
	if pair != nil {
		f.CertFile, f.KeyFile = pair.CertFile, pair.KeyFile
	}
	src, err := tlsconf.New(f, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return src.Client()
}

func tlsClient(t testing.TB, addr string, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A standalone broker with a plaintext main listener and a named SSL one: a TLS client
// that verifies the broker's certificate against the CA bootstraps from the SSL
// listener, is told the SSL listener's address (the local metadata store's own broker
// carries its listeners), produces and reads back; the main listener still names the
// main address; a plaintext client gets nothing from the SSL port.
func TestNamedSSLListenerStandalone(t *testing.T) {
	pki := newTestPKI(t)
	tb := startBroker(t, t.TempDir(), func(c *Config) {
		c.Listeners = []NamedListener{{Name: "SSL", Protocol: "SSL", Listen: "127.0.0.1:0"}}
		c.TLS = tlsconf.Files{CertFile: pki.server.CertFile, KeyFile: pki.server.KeyFile}
	})
	ssl := tb.NamedAddrs()["SSL"].String()
	if adv := tb.Advertised(); len(adv.Listeners) != 1 || adv.Listeners[0].Name != "SSL" || adv.Listeners[0].Protocol != "SSL" {
		t.Fatalf("advertised %+v", adv)
	}
	createTopic(t, tb.admin(t), "tt", 1, nil)

	cl := tlsClient(t, ssl, pki.clientTLS(t, nil), kgo.DefaultProduceTopic("tt"), kgo.ConsumeTopics("tt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	md, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, fmt.Sprint(md.Brokers[0].Port)) != ssl {
		t.Fatalf("SSL listener's Metadata names %+v, want %s", md.Brokers, ssl)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("over TLS")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(testCtx(t))
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "over TLS" {
		t.Fatalf("read back %d records: %v", fs.NumRecords(), err)
	}

	mmd, err := tb.admin(t).BrokerMetadata(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if net.JoinHostPort(mmd.Brokers[0].Host, fmt.Sprint(mmd.Brokers[0].Port)) != tb.addr() {
		t.Fatalf("main listener's Metadata names %+v, want %s", mmd.Brokers, tb.addr())
	}

	plain, err := kgo.NewClient(kgo.SeedBrokers(ssl), kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(plain).BrokerMetadata(ctx); err == nil {
		t.Fatal("a plaintext client was answered on the SSL listener")
	}
}

// With --tls-client-auth require, a client without a certificate is refused at the
// handshake; one with a certificate from the CA produces; one that does not trust the
// broker's CA refuses the broker.
func TestMutualTLSListener(t *testing.T) {
	pki := newTestPKI(t)
	tb := startBroker(t, t.TempDir(), func(c *Config) {
		c.ListenProtocol = "SSL"
		c.TLS = tlsconf.Files{CertFile: pki.server.CertFile, KeyFile: pki.server.KeyFile, CAFile: pki.ca.CAFile, ClientAuth: "require"}
	})
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	anon := tlsClient(t, tb.addr(), pki.clientTLS(t, nil), kgo.RequestRetries(0))
	if _, err := kadm.NewClient(anon).BrokerMetadata(short()); err == nil {
		t.Fatal("a client without a certificate was answered")
	}

	other, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrong := tlsClient(t, tb.addr(), testPKI{ca: other}.clientTLS(t, &pki.client), kgo.RequestRetries(0))
	if _, err := kadm.NewClient(wrong).BrokerMetadata(short()); err == nil {
		t.Fatal("a client trusting another CA accepted the broker")
	}

	cl := tlsClient(t, tb.addr(), pki.clientTLS(t, &pki.client), kgo.DefaultProduceTopic("mt"))
	createTopic(t, kadm.NewClient(cl), "mt", 1, nil)
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
}
