// Package broker is Weir's broker: it wires the Kafka front end (broker/kafka), the
// partition logs (broker/partlog), the object tier (broker/tier) and the group
// coordinator (broker/group) to a write-ahead log and a metadata store, keeps the set of
// partitions it leads in step with the metadata (leadership.go: loading, graceful
// hand-off, leases), replays its WAL at start-up (replay.go), and stores committed
// offsets in __consumer_offsets (offsets_topic.go). backend.go is the local
// implementation of the front end's Backend: appends to this broker's WAL and reads from
// the WALs of a partition's chain and from objects.
//
// Lock order: partlog.Set → partlog.Partition (see partlog's doc); the Broker's own
// fields are set before Start and read-only afterwards, except those guarded by the
// packages that own them.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// ErrClosed is returned by operations on a closed broker.
var ErrClosed = errors.New("broker: closed")

// Broker serves the Kafka protocol for the partitions it leads.
type Broker struct {
	cfg     Config
	meta    metadata.Store
	wal     *wal.WAL
	groups  *group.Coordinator
	parts   *partlog.Set
	cache   *partlog.Cache
	loader  *partlog.Loader
	tier    *tier.Tier // nil: the WAL keeps everything
	front   *kafka.Server
	log     *slog.Logger
	metrics *metrics

	groupLoads groupLoads // offsets partitions whose groups are restored (offsets_topic.go)

	// starting: replay in progress; New loads the partitions itself (guarded by the
	// partition set's lock through syncPartitions).
	starting bool

	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once

	// now is the clock for LogAppendTime and commit timestamps; tests may replace it.
	now func() time.Time
	// replayInfo describes what start-up found in the WAL.
	replayInfo wal.ReplayInfo
}

// New opens the broker's WAL, replays it into partition logs, producer state and group
// offsets, and returns a broker ready to Start. meta must already be open.
func New(cfg Config, meta metadata.Store) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg:     cfg,
		meta:    meta,
		parts:   partlog.NewSet(),
		cache:   partlog.NewCache(cfg.TailCacheBytes),
		log:     log.With("broker", cfg.NodeID),
		metrics: newMetrics(cfg.Registerer),
		ctx:     ctx,
		cancel:  cancel,
		now:     time.Now,
	}
	fail := func(err error) (*Broker, error) {
		if b.tier != nil {
			b.tier.Close()
		}
		if b.wal != nil {
			b.wal.Close()
		}
		if b.loader != nil {
			b.loader.Close()
		}
		b.metrics.close()
		cancel()
		return nil, err
	}
	wcfg := cfg.WAL
	if wcfg.Registerer == nil {
		wcfg.Registerer = cfg.Registerer
	}
	if wcfg.Logger == nil {
		wcfg.Logger = b.log
	}
	w, err := wal.Open(wcfg)
	if err != nil {
		return fail(fmt.Errorf("broker: open wal: %w", err))
	}
	b.wal = w
	b.loader = partlog.NewLoader(cfg.NodeID, w, b.walDir)
	if err := b.openTier(); err != nil {
		return fail(err)
	}
	gcfg := cfg.Group
	gcfg.Status, gcfg.Loading = b.groupStatus, b.groupsLoading
	b.groups = group.New(gcfg, offsetStore{b}, topicChecker{b})
	b.starting = true
	b.syncPartitions(meta.View())
	err = b.replay()
	b.parts.Update(func(partlog.SetTx) { b.starting = false })
	if err != nil {
		b.groups.Close()
		return fail(err)
	}
	b.metrics.attach(b) // partitions led, consumer groups and lag, read at scrape time
	b.front = kafka.NewServer(kafka.Config{
		NodeID:            cfg.NodeID,
		MaxRequestBytes:   cfg.MaxRequestBytes,
		MaxInFlight:       cfg.MaxInFlight,
		IdleTimeout:       cfg.IdleTimeout,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		BrokerConfigs:     cfg.staticConfigs(),
	}, kafka.Deps{Meta: meta, Backend: backend{b}, Groups: b.groups, Registerer: cfg.Registerer, Logger: b.log, Now: b.clock})
	return b, nil
}

// clock is b.now behind a call, so tests may replace b.now after New.
func (b *Broker) clock() time.Time { return b.now() }

// openTier turns the object tier on when both an object store and object manifests exist.
func (b *Broker) openTier() error {
	if b.cfg.Objects == nil {
		return nil
	}
	m, _ := b.meta.(metadata.ObjectManifest)
	if m == nil {
		b.log.Warn("object store configured but the metadata store keeps no object manifests; the WAL keeps everything")
		return nil
	}
	t, err := tier.New(b.cfg.Tier, tier.Deps{
		NodeID: b.cfg.NodeID, Store: b.cfg.Objects, Meta: b.meta, Manifest: m, WAL: b.wal,
		Led: b.parts.All, Registerer: b.cfg.Registerer, Logger: b.log, Now: b.clock,
	})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.tier = t
	return nil
}

// Start opens the Kafka listener and begins serving.
func (b *Broker) Start() error {
	ln, err := net.Listen("tcp", b.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("broker: listen %s: %w", b.cfg.ListenAddr, err)
	}
	b.ln = ln
	if r, ok := b.meta.(metadata.Registrar); ok {
		if err := r.RegisterBroker(b.ctx, b.Advertised()); err != nil {
			ln.Close()
			return fmt.Errorf("broker: register: %w", err)
		}
	}
	b.front.Serve(ln)
	b.wg.Add(1)
	go b.watchMetadata()
	if b.tier != nil {
		b.tier.Start()
	}
	b.log.Info("broker serving", "listen", ln.Addr().String(), "advertised", b.Advertised(), "rack", b.cfg.Rack)
	return nil
}

// Addr is the listener's address (useful with port 0 in tests).
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// Advertised returns the host and port clients are told to connect to.
func (b *Broker) Advertised() metadata.Broker {
	addr := b.cfg.AdvertisedAddr
	if addr == "" && b.ln != nil {
		addr = b.ln.Addr().String()
	}
	if addr == "" {
		addr = b.cfg.ListenAddr
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return metadata.Broker{ID: b.cfg.NodeID, Host: host, Port: int32(p), Rack: b.cfg.Rack}
}

// ReplayInfo tells what the WAL replay at start-up found (e.g. where a torn record was).
func (b *Broker) ReplayInfo() wal.ReplayInfo { return b.replayInfo }

// Groups exposes the group coordinator (metrics, tests).
func (b *Broker) Groups() *group.Coordinator { return b.groups }

// WALBytes is the bytes this broker's WAL keeps on disk; with the object tier it shrinks
// as uploaded segments are trimmed.
func (b *Broker) WALBytes() int64 { return int64(b.wal.End() - b.wal.Start()) }

// Close stops accepting, closes every connection, and closes the WAL after in-flight
// appends finish.
func (b *Broker) Close() error {
	var err error
	b.closed.Do(func() {
		b.cancel()
		b.front.Close()
		b.wg.Wait()
		if b.tier != nil {
			b.tier.Close()
		}
		b.metrics.close()
		b.groups.Close()
		err = b.wal.Close()
		b.loader.Close()
	})
	return err
}

// watchMetadata keeps the partition set in step with the metadata store.
func (b *Broker) watchMetadata() {
	defer b.wg.Done()
	for {
		ch := b.meta.Changed()
		b.syncPartitions(b.meta.View())
		select {
		case <-ch:
		case <-b.ctx.Done():
			return
		}
	}
}

// topicChecker tells the group coordinator which partitions exist.
type topicChecker struct{ b *Broker }

func (t topicChecker) PartitionExists(topic string, partition int32) bool {
	tp := t.b.meta.View().Topics[topic]
	return tp != nil && partition >= 0 && int(partition) < len(tp.Partitions)
}
