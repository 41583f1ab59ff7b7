package controller

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// TestRaftMutualTLS: a quorum with --raft-tls elects a leader and replicates to every
// controller; its Raft port speaks TLS and refuses a peer without a certificate of the
// CA (the handshake fails), while one with a certificate gets through.
func TestRaftMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("controller", "controller")
	if err != nil {
		t.Fatal(err)
	}
	files := tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: ca.CAFile}
	tc := newTestCluster(t, 3, func(c *Config) { c.TLS, c.RaftTLS = files, true })
	leader := tc.waitLeader()
	cl := tc.client(-1, func(c *ctlclient.ClientConfig) { c.TLS = tlsconf.Files{CAFile: ca.CAFile} })
	ctx := ctxT(t)
	br := tc.client(1, func(c *ctlclient.ClientConfig) { c.TLS = tlsconf.Files{CAFile: ca.CAFile} })
	if err := br.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, metadata.TopicSpec{Name: "over-raft-tls", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the topic on every controller", func() bool {
		for _, c := range tc.ctrls {
			if c.View().Topics["over-raft-tls"] == nil {
				return false
			}
		}
		return true
	})

	raftAddr := tc.peers[leader].RaftAddr
	dial := func(f tlsconf.Files) error {
		src, err := tlsconf.New(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", raftAddr, src.Client())
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: the server checks the client's certificate after the client's side
		// of the handshake is done; a refusal arrives on the first read.
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // accepted: the server waits for an RPC
		}
		return err
	}
	if err := dial(tlsconf.Files{CAFile: ca.CAFile}); err == nil {
		t.Fatal("the Raft port accepted a TLS peer without a client certificate")
	} else {
		t.Logf("without a certificate: %v", err)
	}
	other, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue("stranger", "stranger")
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(tlsconf.Files{CAFile: ca.CAFile, CertFile: stranger.CertFile, KeyFile: stranger.KeyFile}); err == nil {
		t.Fatal("the Raft port accepted a certificate of another CA")
	}
	if err := dial(files); err != nil {
		t.Fatalf("the Raft port refused a certificate of the CA: %v", err)
	}
}

// TestRaftTLSPinnedPrincipals: with --raft-tls-principals, a certificate of the
// controllers' own CA but another principal (a broker's, a client's) is refused on the
// Raft port; the controllers' own still replicate.
func TestRaftTLSPinnedPrincipals(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("controller", "controller")
	if err != nil {
		t.Fatal(err)
	}
	broker, err := ca.Issue("broker", "broker")
	if err != nil {
		t.Fatal(err)
	}
	files := tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: ca.CAFile}
	tc := newTestCluster(t, 3, func(c *Config) { c.TLS, c.RaftTLS, c.RaftPrincipals = files, true, []string{"CN=controller"} })
	leader := tc.waitLeader()
	cl := tc.client(-1, func(c *ctlclient.ClientConfig) { c.TLS = tlsconf.Files{CAFile: ca.CAFile} })
	br := tc.client(1, func(c *ctlclient.ClientConfig) { c.TLS = tlsconf.Files{CAFile: ca.CAFile} })
	if err := br.RegisterBroker(ctxT(t), brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctxT(t), metadata.TopicSpec{Name: "pinned", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the topic on every controller", func() bool {
		for _, c := range tc.ctrls {
			if c.View().Topics["pinned"] == nil {
				return false
			}
		}
		return true
	})
	dial := func(f tlsconf.Files) error {
		src, err := tlsconf.New(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tc.peers[leader].RaftAddr, src.Client())
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	}
	if err := dial(tlsconf.Files{CAFile: ca.CAFile, CertFile: broker.CertFile, KeyFile: broker.KeyFile}); err == nil {
		t.Fatal("the Raft port accepted a certificate of the CA with another principal")
	}
	if err := dial(files); err != nil {
		t.Fatalf("the Raft port refused the controllers' certificate: %v", err)
	}
}
