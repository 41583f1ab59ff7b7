package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/objectstore/storeconfig"
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
	secure := fs.Bool("secure", false, "secure the internal links: a cluster token (<data-dir>/cluster.token, kept), the controller API and Raft over TLS "+
		"(a throw-away CA and certificate in <data-dir>/tls, made at each start), encrypted gossip (<data-dir>/gossip.key, kept); the Kafka listeners stay plaintext")
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
	var secureCfg func(*cluster.Config)
	var adminFlags string
	if *secure {
		if secureCfg, adminFlags, err = devSecurity(*dir); err != nil {
			return err
		}
	}
	ccfg := cluster.Config{
		Objects: objects,
		BrokerConfig: func(b *broker.Config) {
			if noObjects {
				b.Objects = nil
			}
		},
		Dir: *dir, Controllers: *controllers, Brokers: *brokers, Zones: strings.Split(*zones, ","),
		KafkaAddrs: ports(*kafkaPort, *brokers), GossipAddrs: ports(*gossipPort, *brokers),
		RaftAddrs: ports(*raftPort, *controllers), APIAddrs: ports(*apiPort, *controllers),
		Logger: p.log, Registerer: p.reg,
	}
	if secureCfg != nil {
		secureCfg(&ccfg)
	}
	c, err := cluster.Start(ccfg)
	if err != nil {
		return err
	}
	p.ready.Store(true)
	first := c.KafkaAddrs()[0]
	fmt.Printf("weir dev is ready: %d controllers, %d brokers in zones %s. Kafka bootstrap %s  (try: kcat -b %s -L)\n",
		*controllers, *brokers, *zones, first, first)
	fmt.Printf("brokers %s; controllers %s; data in %s; metrics on http://%s/metrics; Ctrl-C stops\n",
		c.Bootstrap(), strings.Join(c.APIAddrs(), ","), *dir, *p.metricsAddr)
	if adminFlags != "" {
		fmt.Printf("internal links secured; administer with: weir admin status %s\n", adminFlags)
	}
	<-ctx.Done()
	p.ready.Store(false)
	p.log.Info("shutting down")
	return c.Close()
}

// devSecurity prepares `weir dev --secure` under dir: the cluster token and gossip key
// (made once, kept across restarts) and a CA with a controller certificate (made at each
// start: tlstest keeps no CA key on disk). It returns the cluster configuration's
// adjustment and the flags `weir admin` needs.
func devSecurity(dir string) (func(*cluster.Config), string, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, "", err
	}
	tokFile := filepath.Join(dir, "cluster.token")
	keyFile := filepath.Join(dir, "gossip.key")
	if err := writeIfMissing(tokFile, token.Generate()+"\n"); err != nil {
		return nil, "", err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, "", err
	}
	if err := writeIfMissing(keyFile, base64.StdEncoding.EncodeToString(key)+"\n"); err != nil {
		return nil, "", err
	}
	keys, err := gossip.LoadKeyFile(keyFile)
	if err != nil {
		return nil, "", err
	}
	ca, err := tlstest.NewCA(tlsDir)
	if err != nil {
		return nil, "", err
	}
	pair, err := ca.Issue("controller", "weir-controller")
	if err != nil {
		return nil, "", err
	}
	apply := func(c *cluster.Config) {
		c.ControllerConfig = func(cc *controller.Config) {
			cc.TokenFile = tokFile
			cc.TLS = tlsconf.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: ca.CAFile}
			cc.RaftTLS = true
		}
		c.ClientConfig = func(cc *controller.ClientConfig) {
			cc.TokenFile = tokFile
			cc.TLS = tlsconf.Files{CAFile: ca.CAFile}
		}
		c.GossipConfig = func(g *gossip.Config) { g.SecretKey, g.OldKeys = keys[0], keys[1:] }
	}
	return apply, fmt.Sprintf("--cluster-token-file %s --controller-tls-ca %s", tokFile, ca.CAFile), nil
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
