package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/storeconfig"
)

// runBroker runs one broker: with --controllers it joins a cluster (metadata from the Raft
// controllers, WAL under --wal-root, gossip); without, it runs alone with its metadata in
// a local file.
func runBroker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("weir broker", flag.ContinueOnError)
	cfg := broker.DefaultConfig()
	cfg.BindFlags(fs)
	gcfg := gossip.DefaultConfig()
	gcfg.BindAddr = ""
	gcfg.BindFlags(fs)
	scfg := storeconfig.DefaultConfig("")
	scfg.BindFlags(fs)
	controllers := fs.String("controllers", "", "comma-separated controller API addresses; empty runs a standalone broker with local metadata")
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.BindSecurityFlags(fs) // the cluster token also authenticates connections to other brokers
	drainTimeout := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, move this broker's partitions to other brokers (graceful hand-offs) for at most this long before exiting; 0 exits at once (the partitions then fail over)")
	p := newProcess(fs, "info", "127.0.0.1:9644", "address for /metrics, /healthz and /readyz (empty: off)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: weir broker [flags]\n\nRuns one Weir broker. Every acked record is fdatasync'ed to the broker's WAL first.\n"+
			"Standalone (no --controllers): metadata in <data-dir>/metadata.json, WAL in <data-dir>/wal.\n"+
			"Cluster: --controllers, --node-id, --rack and --wal-root (the shared file system); --gossip-addr enables gossip.\n"+
			"Object storage (where WAL data moves): --object-store=localfs with --object-dir (default <data-dir>/objects\n"+
			"standalone, <wal-root>/objects in a cluster: every broker must share it), or --object-store=s3 with --s3-*.\n\n")
		fs.PrintDefaults()
	}
	if ok, err := p.parse(fs, args); !ok {
		return err
	}
	defer p.stop()
	logger, reg := p.log, p.reg
	cfg.Logger, cfg.Registerer = logger, reg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	if scfg.Kind == storeconfig.KindLocal && scfg.Dir == "" {
		scfg.Dir = filepath.Join(cfg.DataDir, "objects")
		if *controllers != "" {
			scfg.Dir = filepath.Join(cfg.WALRoot, "objects") // shared, like the WALs
		}
	}
	var err error
	if cfg.Objects, err = scfg.Open(ctx); err != nil {
		return err
	}

	if *controllers == "" {
		if err := cfg.Validate(); err != nil {
			return err
		}
		meta, err := metadata.OpenLocal(metadata.LocalConfig{
			Path:              filepath.Join(cfg.DataDir, "metadata.json"),
			Self:              metadata.Broker{ID: cfg.NodeID, Rack: cfg.Rack},
			DefaultPartitions: cfg.DefaultPartitions,
		})
		if err != nil {
			return err
		}
		// A WAL that failed for good (a failed fdatasync) is left behind in this process:
		// the broker starts again on a new WAL directory, which seals the old one and
		// loads what it durably holds.
		for started := false; ; started = true {
			b, err := broker.New(cfg, meta)
			if err == nil {
				if err = b.Start(); err != nil {
					b.Close()
				}
			}
			if err != nil {
				if retry, stop := startAgainLater(ctx, logger, started, err); !retry {
					return stop
				}
				continue
			}
			p.ready.Store(true)
			announce(cfg.NodeID, b)
			select {
			case <-ctx.Done():
				p.ready.Store(false)
				logger.Info("shutting down")
				return b.Close()
			case <-b.Fenced():
				p.ready.Store(false)
				b.Close()
				if !b.StorageFailed() {
					// Another process opened this data directory and sealed our WAL.
					return errors.New("another process took this broker's WAL over; exiting")
				}
				logger.Warn("the WAL failed for good; starting the broker again on a new WAL directory")
			}
		}
	}
	if cfg.WALRoot == "" {
		return errors.New("--wal-root is required with --controllers: brokers read each other's WALs there")
	}
	ccfg.Controllers = strings.Split(*controllers, ",")
	// A fenced broker (its partitions were taken over while it was cut off or stalled)
	// starts again in this process: a new registration and a WAL of its own.
	for started := false; ; started = true {
		n, err := cluster.StartBroker(cluster.BrokerOptions{Broker: cfg, Client: ccfg, Gossip: gcfg, Logger: logger, Registerer: reg})
		if err != nil {
			if retry, stop := startAgainLater(ctx, logger, started, err); !retry {
				return stop
			}
			continue
		}
		p.ready.Store(true)
		announce(cfg.NodeID, n.Broker)
		select {
		case <-ctx.Done():
			p.ready.Store(false)
			if *drainTimeout > 0 {
				// SIGTERM (or Ctrl-C) drains first: the partitions move to other brokers
				// by graceful hand-offs, so producers see no more than a retriable error.
				logger.Info("draining before shutting down", "timeout", *drainTimeout)
				dctx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
				if err := n.Drain(dctx); err != nil {
					logger.Warn("drain incomplete; the rest fails over", "err", err)
				}
				cancel()
			}
			logger.Info("shutting down")
			return n.Close()
		case <-n.Fenced():
			p.ready.Store(false)
			logger.Warn("this broker was fenced; starting it again with a new registration")
			n.Close()
		}
	}
}

// startAgainLater decides after a failed start: the first start's error is final; a
// restart (after a fence or a failed WAL) is retried a second later until ctx ends, so a
// broker whose storage or controllers are down for a while comes back by itself. retry
// false: return stop.
func startAgainLater(ctx context.Context, logger *slog.Logger, started bool, err error) (retry bool, stop error) {
	if !started || ctx.Err() != nil {
		return false, err
	}
	logger.Error("starting the broker again failed; retrying", "err", err)
	select {
	case <-time.After(time.Second):
		return true, nil
	case <-ctx.Done():
		return false, nil
	}
}

func announce(id int32, b *broker.Broker) {
	addr := b.Advertised()
	bootstrap := net.JoinHostPort(addr.Host, fmt.Sprint(addr.Port))
	fmt.Printf("weir broker %d is ready: Kafka bootstrap %s  (try: kcat -b %s -L)\n", id, bootstrap, bootstrap)
}
