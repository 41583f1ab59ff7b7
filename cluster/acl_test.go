package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	"github.com/weir-io/weir/security/token"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

// secureControllers gives the controllers of cfg (and every controller client) a
// cluster token over TLS and --authorizer acl, as brokers enforcing ACLs require; it
// returns the client configuration an admin uses.
func secureControllers(t *testing.T, cfg *Config) func(*ctlclient.ClientConfig) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "cluster.token")
	if err := os.WriteFile(tokFile, []byte(token.Generate()+"\n"), 0o600); err != nil {
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
	cfg.ControllerConfig = func(cc *controller.Config) {
		cc.TokenFile, cc.Authorizer = tokFile, "acl"
		cc.TLS = tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: ca.CAFile}
	}
	client := func(cc *ctlclient.ClientConfig) {
		cc.TokenFile, cc.TLS = tokFile, tlsconf.Files{CAFile: ca.CAFile}
	}
	cfg.ClientConfig = client
	return client
}

// TestClusterACLs: ACLs live in the Raft controllers' metadata and every broker enforces
// them. The first ACL is created through the controller API (as weir admin acl does,
// with the cluster token: brokers enforcing ACLs refuse open controllers); the rest with
// kadm over Kafka by the principal that first ACL lets manage ACLs. The clients are
// plaintext, so their principal is User:ANONYMOUS.
func TestClusterACLs(t *testing.T) {
	var adminCreds func(*ctlclient.ClientConfig)
	c := startCluster(t, func(cfg *Config) {
		adminCreds = secureControllers(t, cfg)
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.ACL.Authorizer = "acl"
			b.ACL.SuperUsers = []security.Principal{"User:admin"}
		}
	})
	ctx := ctxFor(t, 90*time.Second)
	anon := security.Anonymous
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers = c.APIAddrs()
	adminCreds(&ccfg)
	admin, err := ctlclient.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateACLs(ctx, []acl.Binding{{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral,
		Principal: anon, Host: "*", Operation: acl.OpAll, Permission: acl.Allow}}); err != nil {
		t.Fatal(err)
	}
	// Every broker has applied it before a client relies on it (brokers learn the
	// metadata by their watch, a moment after the controllers commit it).
	testutil.Eventually(t, 30*time.Second, "every broker's view holds the cluster ACL", func() bool {
		for i := range c.brokers {
			if n := c.Broker(i); n == nil || n.Client.View().ACLSet().Len() == 0 {
				return false
			}
		}
		return true
	})

	cl := newClient(t, c)
	adm := kadm.NewClient(cl)
	// Before any topic ACL: the cluster ACL lets ANONYMOUS create topics, not use them.
	if _, err := adm.CreateTopics(ctx, 3, 1, nil, "open", "secret", "hidden"); err != nil {
		t.Fatal(err)
	}
	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs %+v: %v %s", r, r.Err, r.ErrMessage)
			}
		}
	}
	create(kadm.NewACLs().Allow(string(anon)).Topics("open").Operations(kadm.OpAll))
	create(kadm.NewACLs().Allow(string(anon)).Topics("secret").Operations(kadm.OpDescribe))
	create(kadm.NewACLs().Deny(string(anon)).Topics("secret").Operations(kadm.OpWrite))
	create(kadm.NewACLs().Allow(string(anon)).Topics("secret").Operations(kadm.OpWrite)) // the deny wins
	create(kadm.NewACLs().Allow(string(anon)).Groups("*").Operations(kadm.OpRead))

	// Every controller's state has the six bindings.
	testutil.EventuallyNoError(t, 30*time.Second, "the 6 ACLs on every controller", func() error {
		n := 0
		for i := 0; i < 3; i++ {
			if ctl := c.Controller(i); ctl != nil && ctl.View().ACLSet().Len() == 6 {
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d of 3 controllers have them", n)
		}
		return nil
	})

	// Each broker, asked directly: Metadata hides "hidden"; a produce to "secret" is
	// refused before leadership is even looked at; "open" is not refused.
	for i, addr := range c.KafkaAddrs() {
		one, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		// A broker's View may trail the one that created the ACLs.
		testutil.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("broker %d's Metadata to list [open secret]", i+1), func() error {
			resp, err := one.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			if err != nil {
				t.Fatal(err)
			}
			var topics []string
			for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
				topics = append(topics, *mt.Topic)
			}
			slices.Sort(topics)
			if !slices.Equal(topics, []string{"open", "secret"}) {
				return fmt.Errorf("lists %v", topics)
			}
			return nil
		})
		for _, topic := range []string{"open", "secret"} {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := one.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
			if denied := code == kerr.TopicAuthorizationFailed.Code; denied != (topic == "secret") {
				t.Errorf("broker %d: produce to %s answered %v", i+1, topic, kerr.ErrorForCode(code))
			}
		}
	}

	// A real producer and a group consumer on "open" work with the ACLs on.
	acked := produceValues(t, cl, "open", 3, 20, "a")
	got := consumeAll(t, c, "open", len(acked))
	if len(got) != len(acked) {
		t.Fatalf("consumed %d of %d", len(got), len(acked))
	}
	p := newClient(t, c, kgo.DefaultProduceTopic("secret"), kgo.DisableIdempotentWrite())
	if err := p.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Deleting the deny with kadm opens "secret" to writes.
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny(string(anon)).DenyHosts().Topics("secret").Operations(kadm.OpWrite))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %+v %v", del, err)
	}
	testutil.EventuallyNoError(t, 30*time.Second, "a produce to secret after the deny was deleted", func() error {
		return p.ProduceSync(ctx, kgo.StringRecord("y")).FirstErr()
	})
}

// TestACLBrokersRefuseOpenControllers: issue 20's finding was an unauthenticated POST to
// the controller API granting a user ALL while the brokers enforced ACLs. A broker with
// --authorizer acl now refuses to start against controllers whose API is open.
func TestACLBrokersRefuseOpenControllers(t *testing.T) {
	// The broker has a cluster token of its own (else it refuses to start for that
	// reason first: broker.ErrNoClusterToken); the controllers have none.
	tokFile := filepath.Join(t.TempDir(), "cluster.token")
	if err := os.WriteFile(tokFile, []byte(token.Generate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: t.TempDir(), Controllers: 1, Brokers: 1, Logger: testLogger(),
		BrokerConfig: func(b *broker.Config) { b.ACL.Authorizer, b.ClusterTokenFile = "acl", tokFile }}
	c, err := Start(cfg)
	if err == nil {
		c.Close()
		t.Fatal("a broker enforcing ACLs started against an open controller API")
	}
	if !errors.Is(err, broker.ErrOpenControllers) {
		t.Fatalf("Start: %v, want broker.ErrOpenControllers", err)
	}
}
