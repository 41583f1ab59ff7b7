package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	xscram "github.com/xdg-go/scram"
)

// startSASLBroker runs a broker whose advertised address is a SASL_PLAINTEXT listener
// (so every client connection, after the bootstrap one too, authenticates), with users
// alice (both SCRAM mechanisms) and bob (SCRAM-SHA-256 only), password "pw-<name>".
func startSASLBroker(t *testing.T) (*testBroker, string) {
	t.Helper()
	return startSASLBrokerTLS(t, nil)
}

// startSASLBrokerTLS is startSASLBroker with a SASL_SSL listener when tc is set.
func startSASLBrokerTLS(t *testing.T, tc *tls.Config) (*testBroker, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tb := startBroker(t, t.TempDir(), func(c *Config) { c.AdvertisedAddr = ln.Addr().String() })
	tb.ServeExtraListener(ln, kafka.Listener{SASL: true, TLS: tc})
	for user, mechs := range map[string][]metadata.ScramMechanism{"alice": {metadata.ScramSHA256, metadata.ScramSHA512}, "bob": {metadata.ScramSHA256}} {
		for _, m := range mechs {
			c, err := sasl.NewCredential(m.String(), "pw-"+user, 8192)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tb.meta.AlterScram(context.Background(), []metadata.ScramAlteration{{User: user, Mechanism: m,
				Credential: metadata.ScramCredential{Mechanism: m, Iterations: 8192, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("%v %v", res, err)
			}
		}
	}
	return tb, ln.Addr().String()
}

// TestSASLFranzProduceConsume: franz-go with SCRAM-SHA-256 produces to and consumes
// from a real broker over its SASL listener.
func TestSASLFranzProduceConsume(t *testing.T) {
	_, addr := startSASLBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "bob", Pass: "pw-bob"}.AsSha256Mechanism()),
		kgo.DefaultProduceTopic("franz-sasl"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("franz-sasl"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 10 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "0,1,2,3,4,5,6,7,8,9" {
		t.Fatalf("consumed %v", got)
	}
	bad, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "bob", Pass: "pw-alice"}.AsSha256Mechanism()))
	defer bad.Close()
	if err := bad.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestSASLKcat: librdkafka (kcat) with security.protocol=SASL_PLAINTEXT lists metadata,
// produces and consumes with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, and with SASL_SSL
// (SCRAM-SHA-512 over TLS); a wrong password and an unknown user fail with the broker's
// authentication error.
func TestSASLKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
			t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
		}
		t.Skip("kcat not installed")
	}
	_, addr := startSASLBroker(t)
	run := func(stdin, mech, user, pass string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(testCtx(t), kcat, append([]string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(mech)
			if out, errs, err := run("", mech, "alice", "pw-alice", "-L"); err != nil || !strings.Contains(out, "1 brokers:") {
				t.Fatalf("kcat -L: %v\n%s\n%s", err, out, errs)
			}
			if out, errs, err := run("one\ntwo\nthree\n", mech, "alice", "pw-alice", "-P", "-t", topic, "-X", "acks=all"); err != nil {
				t.Fatalf("kcat -P: %v\n%s\n%s", err, out, errs)
			}
			out, errs, err := run("", mech, "alice", "pw-alice", "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %s\n")
			if err != nil || strings.TrimSpace(out) != "0 one\n1 two\n2 three" {
				t.Fatalf("kcat -C: %v\n%q\n%s", err, out, errs)
			}
		})
	}
	t.Run("SASL_SSL", func(t *testing.T) {
		dir := t.TempDir()
		ca, err := tlstest.NewCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := ca.Issue("broker", "broker", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		src, err := tlsconf.New(tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, saddr := startSASLBrokerTLS(t, src.Server())
		kc := func(stdin string, args ...string) (string, string, error) {
			cmd := exec.CommandContext(testCtx(t), kcat, append([]string{"-b", saddr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca.CAFile,
				"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=pw-alice"}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			return out.String(), errb.String(), err
		}
		if out, errs, err := kc("a\nb\n", "-P", "-t", "kcat-ssl", "-X", "acks=all"); err != nil {
			t.Fatalf("kcat -P over SASL_SSL: %v\n%s\n%s", err, out, errs)
		}
		if out, errs, err := kc("", "-C", "-t", "kcat-ssl", "-o", "beginning", "-e", "-f", "%s\n"); err != nil || strings.TrimSpace(out) != "a\nb" {
			t.Fatalf("kcat -C over SASL_SSL: %v\n%q\n%s", err, out, errs)
		}
	})
	for name, creds := range map[string][2]string{"wrong password": {"alice", "pw-bob"}, "unknown user": {"mallory", "pw-alice"}} {
		t.Run(name, func(t *testing.T) {
			out, errs, err := run("", "SCRAM-SHA-256", creds[0], creds[1], "-L", "-m", "5")
			if err == nil {
				t.Fatalf("kcat -L succeeded:\n%s", out)
			}
			if !strings.Contains(errs, "Authentication failed") {
				t.Fatalf("kcat's error does not carry the broker's message:\n%s", errs)
			}
		})
	}
}

// xdgClient adapts github.com/xdg-go/scram (an implementation independent of ours and
// of franz-go's) to sarama's SCRAMClient.
type xdgClient struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (x *xdgClient) Begin(user, pass, authzID string) error {
	c, err := x.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}
func (x *xdgClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgClient) Done() bool                            { return x.conv.Done() }

func saramaConfig(user, pass string, mech sarama.SASLMechanism) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
	cfg.Net.SASL.Mechanism = mech
	switch mech {
	case sarama.SASLTypeSCRAMSHA256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgClient{hash: xscram.HashGeneratorFcn(sha256.New)} }
	case sarama.SASLTypeSCRAMSHA512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgClient{hash: xscram.HashGeneratorFcn(sha512.New)} }
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Max = 1
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

// TestSASLSarama: sarama with SCRAM-SHA-512 and SCRAM-SHA-256 (xdg-go/scram) produces and
// consumes; a wrong password is refused.
func TestSASLSarama(t *testing.T) {
	_, addr := startSASLBroker(t)
	for _, mech := range []sarama.SASLMechanism{sarama.SASLTypeSCRAMSHA512, sarama.SASLTypeSCRAMSHA256} {
		t.Run(string(mech), func(t *testing.T) {
			topic := "sarama-" + strings.ToLower(string(mech))
			cfg := saramaConfig("alice", "pw-alice", mech)
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			for i := 0; i < 5; i++ {
				if _, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint("m", i))}); err != nil || off != int64(i) {
					t.Fatalf("send %d: offset %d, %v", i, off, err)
				}
			}
			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			for i := 0; i < 5; i++ {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != fmt.Sprint("m", i) {
						t.Fatalf("message %d: %q", i, m.Value)
					}
				case err := <-pc.Errors():
					t.Fatal(err)
				case <-time.After(30 * time.Second):
					t.Fatalf("message %d did not come", i)
				}
			}
		})
	}
	_, err := sarama.NewClient([]string{addr}, saramaConfig("alice", "pw-bob", sarama.SASLTypeSCRAMSHA512))
	if err == nil || !errors.Is(err, sarama.ErrSASLAuthenticationFailed) && !strings.Contains(err.Error(), "SASL") {
		t.Fatalf("wrong password: %v", err)
	}
}
