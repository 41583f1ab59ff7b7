package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	"github.com/weir-io/weir/security/token"
)

// TestSecureConnections: a cluster with every internal connection secured — the controller API
// over TLS with a cluster token (brokers present the token, controllers forward with
// it), broker-to-broker connections authenticated with the token, gossip encrypted — starts,
// keeps its brokers registered (heartbeats accepted), creates topics, takes produces
// directly and through zone proxies (links to the leaders) and serves them back. A
// peer connection to one of its brokers without the token, or with another, is refused;
// the controller API refuses a caller without the token.
func TestSecureConnections(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "cluster.token")
	if err := os.WriteFile(tokFile, []byte("# the cluster's token\nsecure-conns-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("controller", "controller")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := gossip.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, func(cfg *Config) {
		cfg.ControllerConfig = func(cc *controller.Config) {
			cc.TokenFile = tokFile
			// The CA verifies the leader when a follower forwards to it.
			cc.TLS = tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: ca.CAFile}
		}
		cfg.ClientConfig = func(cc *ctlclient.ClientConfig) {
			cc.TokenFile = tokFile // also the brokers' peer token (StartBroker)
			cc.TLS = tlsconf.Files{CAFile: ca.CAFile}
		}
		cfg.GossipConfig = func(g *gossip.Config) { g.SecretKey = keys[0] }
	})
	cl := newClient(t, c)
	if err := createTopic(t, kadm.NewClient(cl), 3, "secure"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "secure")
	want := map[string]int64{}
	for _, mp := range tp.Partitions {
		proxy := mp.Leader%3 + 1 // another broker: the batch goes over a link
		for i, via := range []int32{mp.Leader, proxy} {
			v := fmt.Sprintf("p%d-%d", mp.Index, i)
			r := proxyProduce(t, c, via, "secure", mp.Index, kafkatest.Batch(-1, 0, 0, []byte(v)))
			if r.ErrorCode != 0 {
				t.Fatalf("%s through broker %d (leader %d): %v", v, via, mp.Leader, kerr.ErrorForCode(r.ErrorCode))
			}
			want[v] = r.BaseOffset
		}
	}
	got := consumeAll(t, c, "secure", len(want))
	for v, off := range want {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s: read %v, want offset %d", v, r, off)
		}
	}

	// The brokers stay registered: their heartbeats carry the token.
	leader := c.LeaderController()
	for id := int32(1); id <= 3; id++ {
		if b, ok := leader.View().Broker(id); !ok || !b.Active() {
			t.Fatalf("broker %d: %+v, want active", id, b)
		}
	}
	// Encrypted gossip: every broker sees the other two.
	testutil.Eventually(t, 30*time.Second, "gossip converged", func() bool {
		for i := 0; i < 3; i++ {
			if len(c.Broker(i).Gossip.Members()) != 3 {
				return false
			}
		}
		return true
	})

	// A peer connection to a broker of this cluster: refused without the token or with
	// another one, served with it.
	body := peer.AppendOffsetsRequest(nil, []peer.PartitionRef{{Topic: tp.ID, Partition: 0}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// key is what the connection's HMAC is keyed with: a broker derives it from the token.
	call := func(key []byte) error {
		cfg := peer.DefaultConfig()
		cfg.ClientID, cfg.BrokerID, cfg.Timeout = "weir-broker-99", 99, 5*time.Second
		if key != nil {
			cfg.Token = func() []byte { return key }
		}
		pc := peer.NewClient(c.KafkaAddrs()[0], cfg)
		defer pc.Close()
		resp, err := pc.Call(ctx, body)
		if err == nil {
			_, err = peer.DecodeOffsets(resp, 1)
		}
		return err
	}
	peerKey := func(tok string) []byte { return token.Derive([]byte(tok), token.PurposePeer) }
	if err := call(nil); !errors.Is(err, peer.ErrLost) {
		t.Errorf("peer connection without the token: %v, want refused (connection closed)", err)
	}
	if err := call(peerKey("another-token-0123456789")); !errors.Is(err, peer.ErrAuth) {
		t.Errorf("peer connection with another token: %v, want ErrAuth", err)
	}
	// The raw token, or the controller API's key (what a controller sees), is not the
	// peer key.
	if err := call([]byte("secure-conns-token-0123456789")); !errors.Is(err, peer.ErrAuth) {
		t.Errorf("peer connection keyed with the raw token: %v, want ErrAuth", err)
	}
	if err := call(token.Derive([]byte("secure-conns-token-0123456789"), token.PurposeControllerAPI)); !errors.Is(err, peer.ErrAuth) {
		t.Errorf("peer connection keyed with the controller API key: %v, want ErrAuth", err)
	}
	if err := call(peerKey("secure-conns-token-0123456789")); err != nil {
		t.Errorf("peer connection with the token: %v", err)
	}

	// The controller API: HTTPS only, and a token needed.
	src, err := tlsconf.New(tlsconf.Files{CAFile: ca.CAFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: src.Client()}}
	resp, err := hc.Get("https://" + c.APIAddrs()[0] + "/v1/metadata")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("controller API without a token: HTTP %d, want 401", resp.StatusCode)
	}
}
