package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/objectstore/storeconfig"
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
	c, err := cluster.Start(cluster.Config{
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
	})
	if err != nil {
		return err
	}
	p.ready.Store(true)
	first := c.KafkaAddrs()[0]
	fmt.Printf("weir dev is ready: %d controllers, %d brokers in zones %s. Kafka bootstrap %s  (try: kcat -b %s -L)\n",
		*controllers, *brokers, *zones, first, first)
	fmt.Printf("brokers %s; controllers %s; data in %s; metrics on http://%s/metrics; Ctrl-C stops\n",
		c.Bootstrap(), strings.Join(c.APIAddrs(), ","), *dir, *p.metricsAddr)
	<-ctx.Done()
	p.ready.Store(false)
	p.log.Info("shutting down")
	return c.Close()
}
