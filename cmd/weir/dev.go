package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/storeconfig"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
	"github.com/weir-io/weir/security/token"
)

// runDev runs a whole cluster in this process on the embedded defaults: controllers,
// brokers in several zones, the shared WAL root and the object store directory under
// one data directory, Kafka on 127.0.0.1:9092 and up.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("weir dev", flag.ContinueOnError)
	dir := fs.String("data-dir", "data", "directory for everything: controller-N/, broker-N/, wal/ (shared WAL root), objects/")
	controllers := fs.Int("controllers", 3, "Raft controllers (3 or 5 for a real quorum)")
	brokers := fs.Int("brokers", 3, "brokers; broker i is in zone zones[i mod len]")
	zones := fs.String("zones", "a,b,c", "comma-separated zones (racks)")
	host := fs.String("host", "127.0.0.1", "address every listener binds and advertises")
	kafkaPort := fs.Int("kafka-port", 9092, "Kafka port of the first broker; the others follow")
	raftPort := fs.Int("raft-port", 9301, "Raft port of the first controller; the others follow")
	apiPort := fs.Int("api-port", 9401, "controller API port of the first controller; the others follow")
	gossipPort := fs.Int("gossip-port", 9501, "gossip port of the first broker; the others follow")
	secure := fs.Bool("secure", false, "a secure deployment: Kafka listeners SASL_SSL with ACLs enforced (super user admin, password in <data-dir>/admin.password, "+
		"client settings in <data-dir>/client.properties), a cluster token (<data-dir>/cluster.token), the controller API and Raft over TLS and authenticated "+
		"(a throw-away CA in <data-dir>/tls, made at each start), encrypted gossip (<data-dir>/gossip.key); the files but the CA are kept across restarts")
	// Kafka's own development config sets group.initial.rebalance.delay.ms to 0 so a local
	// group settles at once; production brokers (weir broker) keep 3 s.
	rebalanceDelay := fs.Duration("group-initial-rebalance-delay", 0,
		"wait this long for more members before the first rebalance of an empty group (weir broker's default: 3s)")
	scfg := storeconfig.DefaultConfig("")
	scfg.BindFlags(fs)
	p := newProcess(fs, "warn", "127.0.0.1:9644", "address for /metrics (every node, labelled), /healthz and /readyz (empty: off)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: weir dev [flags]\n\nRuns a local Weir cluster in one process: 3 Raft controllers and 3 brokers in zones a, b\n"+
			"and c, sharing a WAL root and an object-store directory under ./data. Kafka clients bootstrap\n"+
			"from 127.0.0.1:9092. Ctrl-C stops it cleanly; the next start continues from ./data.\n\n")
		fs.PrintDefaults()
	}
	if ok, err := p.parse(fs, args); !ok {
		return err
	}
	defer p.stop()
	ports := func(first, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s:%d", *host, first+i)
		}
		return out
	}
	if scfg.Kind == storeconfig.KindLocal && scfg.Dir == "" {
		scfg.Dir = filepath.Join(*dir, "objects")
	}
	objects, err := scfg.Open(ctx)
	if err != nil {
		return err
	}
	noObjects := objects == nil
	var sec *devSecure
	if *secure {
		if sec, err = devSecurity(*dir, *host); err != nil {
			return err
		}
	}
	ccfg := cluster.Config{
		Objects: objects,
		BrokerConfig: func(b *broker.Config) {
			if noObjects {
				b.Objects = nil
			}
			b.Group.InitialRebalanceDelay = *rebalanceDelay
		},
		Dir: *dir, Controllers: *controllers, Brokers: *brokers, Zones: strings.Split(*zones, ","),
		KafkaAddrs: ports(*kafkaPort, *brokers), GossipAddrs: ports(*gossipPort, *brokers),
		RaftAddrs: ports(*raftPort, *controllers), APIAddrs: ports(*apiPort, *controllers),
		Logger: p.log, Registerer: p.reg,
	}
	if sec != nil {
		sec.apply(&ccfg)
	}
	c, err := cluster.Start(ccfg)
	if err != nil {
		return err
	}
	first := c.KafkaAddrs()[0]
	if sec != nil {
		if err := sec.bootstrap(ctx, c, *brokers, c.Bootstrap()); err != nil {
			c.Close()
			return err
		}
	}
	p.ready.Store(true)
	fmt.Printf("weir dev is ready: %d controllers, %d brokers in zones %s. Kafka bootstrap %s  (try: kcat -b %s -L)\n",
		*controllers, *brokers, *zones, first, first)
	fmt.Printf("brokers %s; controllers %s; data in %s; metrics on http://%s/metrics; Ctrl-C stops\n",
		c.Bootstrap(), strings.Join(c.APIAddrs(), ","), *dir, *p.metricsAddr)
	if sec != nil {
		fmt.Print(sec.recipe(c.Bootstrap()))
		fmt.Printf("administer with: weir admin status %s\n", sec.adminFlags)
	}
	<-ctx.Done()
	p.ready.Store(false)
	p.log.Info("shutting down")
	return c.Close()
}

// devSecure is what `weir dev --secure` sets up under its data directory: a secure
// deployment in miniature, every item of docs/SECURITY.md's checklist of a secure deployment.
//
//   - the cluster token (cluster.token, kept across restarts): the controller API's
//     bearer and the peer connections' HMAC key are derived from it (security/token);
//   - TLS from a throw-away CA (tls/, made at each start: tlstest keeps no CA key): the
//     controller API and Raft (mutual TLS), and the brokers' Kafka listeners;
//   - Kafka listeners SASL_SSL: every client authenticates (SCRAM or PLAIN) over TLS;
//   - ACLs enforced (--authorizer acl) with User:admin the super user, and the
//     controllers told so (they refuse to start without authentication);
//   - an admin SCRAM user whose password is admin.password (kept), created through the
//     authenticated controller API at each start, and client.properties (librdkafka's
//     keys: kcat -F) with everything a client needs;
//   - encrypted gossip (gossip.key, kept).
type devSecure struct {
	apply        func(*cluster.Config)
	adminFlags   string // what `weir admin` needs
	dir          string
	caFile       string
	tokenFile    string
	passwordFile string
	password     string
	propsFile    string // librdkafka's keys (kcat -F, confluent-kafka)
	javaFile     string // the Java client's keys (--command-config, Properties)
}

// devAdmin is the super user `weir dev --secure` creates.
const devAdmin = "admin"

func devSecurity(dir, host string) (*devSecure, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	d := &devSecure{dir: dir, tokenFile: filepath.Join(dir, "cluster.token"), passwordFile: filepath.Join(dir, "admin.password"),
		propsFile: filepath.Join(dir, "client.properties"), javaFile: filepath.Join(dir, "java-client.properties")}
	keyFile := filepath.Join(dir, "gossip.key")
	if err := writeIfMissing(d.tokenFile, token.Generate()+"\n"); err != nil {
		return nil, err
	}
	if err := writeIfMissing(d.passwordFile, token.Generate()+"\n"); err != nil {
		return nil, err
	}
	pw, err := os.ReadFile(d.passwordFile)
	if err != nil {
		return nil, err
	}
	d.password = strings.TrimSpace(string(pw))
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := writeIfMissing(keyFile, base64.StdEncoding.EncodeToString(key)+"\n"); err != nil {
		return nil, err
	}
	keys, err := gossip.LoadKeyFile(keyFile)
	if err != nil {
		return nil, err
	}
	ca, err := tlstest.NewCA(tlsDir)
	if err != nil {
		return nil, err
	}
	d.caFile = ca.CAFile
	ctrl, err := ca.Issue("controller", "weir-controller")
	if err != nil {
		return nil, err
	}
	hosts := []string{"localhost", "127.0.0.1"}
	if host != "" && host != "127.0.0.1" && host != "localhost" {
		hosts = append(hosts, host)
	}
	brk, err := ca.Issue("broker", "weir-broker", hosts...)
	if err != nil {
		return nil, err
	}
	d.apply = func(c *cluster.Config) {
		c.ControllerConfig = func(cc *controller.Config) {
			cc.TokenFile = d.tokenFile
			cc.TLS = tlsconf.Files{CertFile: ctrl.CertFile, KeyFile: ctrl.KeyFile, CAFile: ca.CAFile}
			cc.RaftTLS, cc.RaftPrincipals = true, []string{"CN=weir-controller"}
			cc.Authorizer = "acl"
		}
		c.ClientConfig = func(cc *ctlclient.ClientConfig) {
			cc.TokenFile = d.tokenFile
			cc.TLS = tlsconf.Files{CAFile: ca.CAFile}
		}
		inner := c.BrokerConfig
		c.BrokerConfig = func(b *broker.Config) {
			if inner != nil {
				inner(b)
			}
			b.ListenProtocol = "SASL_SSL"
			b.TLS = tlsconf.Files{CertFile: brk.CertFile, KeyFile: brk.KeyFile}
			b.PeerTLS = tlsconf.Files{CAFile: ca.CAFile} // connections to the other brokers' SASL_SSL listeners
			b.ACL = acl.Config{Authorizer: "acl", SuperUsers: []security.Principal{security.User(devAdmin)}}
		}
		c.GossipConfig = func(g *gossip.Config) { g.SecretKey, g.OldKeys = keys[0], keys[1:] }
	}
	d.adminFlags = fmt.Sprintf("--cluster-token-file %s --controller-tls-ca %s", d.tokenFile, ca.CAFile)
	return d, nil
}

// bootstrap creates (or resets) the admin SCRAM user through the controller API, as
// `weir admin user set` does, and writes client.properties for bootstrap.
func (d *devSecure) bootstrap(ctx context.Context, c *cluster.Cluster, nBrokers int, bootstrap string) error {
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers, ccfg.TokenFile, ccfg.TLS = c.APIAddrs(), d.tokenFile, tlsconf.Files{CAFile: d.caFile}
	cl, err := ctlclient.NewClient(ccfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	// One alteration per request: the API refuses a user altered twice in one.
	var last []byte // the SHA-512 credential's StoredKey, to see it reach the brokers
	for _, m := range []metadata.ScramMechanism{metadata.ScramSHA256, metadata.ScramSHA512} {
		cred, err := sasl.NewCredential(m.String(), d.password, 4096)
		if err != nil {
			return err
		}
		res, err := cl.AlterScram(ctx, []metadata.ScramAlteration{{User: devAdmin, Mechanism: m,
			Credential: metadata.ScramCredential{Mechanism: m, Iterations: 4096, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}}})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("creating the admin user (%s): %w", m, err)
		}
		last = cred.StoredKey
	}
	// Ready when every broker knows the new credential: the printed settings work then.
	for known := false; !known; {
		known = true
		for i := 0; i < nBrokers; i++ {
			if n := c.Broker(i); n != nil {
				cred, ok := n.Client.View().Scram.Credential(devAdmin, metadata.ScramSHA512)
				known = known && ok && bytes.Equal(cred.StoredKey, last)
			}
		}
		if !known {
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for the brokers to learn the admin user: %w", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	props := fmt.Sprintf("# weir dev --secure: kcat -F %s -L\nbootstrap.servers=%s\nsecurity.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\n"+
		"sasl.username=%s\nsasl.password=%s\nssl.ca.location=%s\n", d.propsFile, bootstrap, devAdmin, d.password, d.caFile)
	if err := writeFile(d.propsFile, props); err != nil {
		return err
	}
	// The Java client reads a PEM CA as its trust store since Kafka 2.7 (KIP-651).
	java := fmt.Sprintf("# weir dev --secure: kafka-topics.sh --bootstrap-server %s --command-config %s --list\nbootstrap.servers=%s\n"+
		"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location=%s\n", bootstrap, d.javaFile, bootstrap, devAdmin, d.password, d.caFile)
	return writeFile(d.javaFile, java)
}

// recipe is what `weir dev --secure` prints once ready: how each kind of client
// connects (librdkafka's kcat, weir's own franz-go commands, franz-go code, Java).
func (d *devSecure) recipe(bootstrap string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "secured: Kafka SASL_SSL with ACLs; super user %s, password in %s, CA %s\n", devAdmin, d.passwordFile, d.caFile)
	fmt.Fprintf(&b, "  kcat:     kcat -F %s -L\n", d.propsFile)
	fmt.Fprintf(&b, "  weir:     WEIR_SASL_PASSWORD=$(cat %s) weir topic list --bootstrap %s --tls-ca %s --sasl-mechanism SCRAM-SHA-512 --sasl-user %s\n",
		d.passwordFile, bootstrap, d.caFile, devAdmin)
	fmt.Fprintf(&b, "  franz-go: kgo.SeedBrokers(%q), kgo.DialTLSConfig(&tls.Config{RootCAs: <%s>}),\n"+
		"            kgo.SASL(scram.Auth{User: %q, Pass: <%s>}.AsSha512Mechanism())\n", bootstrap, d.caFile, devAdmin, d.passwordFile)
	fmt.Fprintf(&b, "  Java:     kafka-topics.sh --bootstrap-server %s --command-config %s --list (Properties from that file)\n", bootstrap, d.javaFile)
	return b.String()
}

// writeFile replaces path with content, mode 0600 (it holds a password).
func writeFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeIfMissing(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
