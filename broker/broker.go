// Package broker is Weir's Kafka broker: the listener and one handler per API key, the
// partition logs kept as indexes into the broker's write-ahead log, idempotent producer
// state, and the wiring to the group coordinator and the metadata store.
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
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objread"
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
	cache   *tailCache
	log     *slog.Logger
	metrics *metrics

	mu       sync.RWMutex
	parts    map[metadata.TopicID]map[int32]*partition // partitions led here
	starting bool                                      // replay in progress: New loads partitions itself

	foreignMu sync.Mutex
	foreign   map[int32]*wal.ReadOnly // read-only views of WALs (others', and our own for scans)

	// object tier (tier.go); manifest is nil when it is off
	objects      objectstore.Store
	manifest     metadata.ObjectManifest
	objReader    *objread.Reader
	instrumented *objectstore.Instrumented
	pinMu        sync.Mutex
	pins         map[partKey]walPin // WAL positions others still need (trim.go)
	upMu         sync.Mutex
	spare        *metadata.Object // prepared by an upload whose PUT failed; reused
	inflight     map[uint64]bool  // prepared objects an upload is using
	// unusedPrepared: own prepared objects unused at the last garbage collection
	unusedPrepared map[uint64]bool
	gcRounds       int // collections run (only the retention goroutine touches it)

	ln      net.Listener
	connsMu sync.Mutex
	conns   map[*conn]struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once

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
		cfg:      cfg,
		meta:     meta,
		cache:    newTailCache(cfg.TailCacheBytes),
		log:      log.With("broker", cfg.NodeID),
		metrics:  newMetrics(cfg.Registerer),
		parts:    map[metadata.TopicID]map[int32]*partition{},
		foreign:  map[int32]*wal.ReadOnly{},
		conns:    map[*conn]struct{}{},
		ctx:      ctx,
		cancel:   cancel,
		now:      time.Now,
		pins:     map[partKey]walPin{},
		inflight: map[uint64]bool{},
	}
	if err := b.openTier(); err != nil {
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
		cancel()
		return nil, fmt.Errorf("broker: open wal: %w", err)
	}
	b.wal = w
	gcfg := cfg.Group
	gcfg.Owns = b.ownsGroup
	b.groups = group.New(gcfg, offsetStore{b}, topicChecker{b})
	b.starting = true
	b.syncPartitions(meta.View())
	err = b.replay()
	b.mu.Lock()
	b.starting = false
	b.mu.Unlock()
	if err != nil {
		w.Close()
		b.closeTier()
		cancel()
		return nil, err
	}
	b.metrics.attach(b) // partitions led, consumer groups and lag, read at scrape time
	return b, nil
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
	b.wg.Add(2)
	go b.acceptLoop()
	go b.watchMetadata()
	if b.tiered() {
		b.wg.Add(2)
		go b.every(b.cfg.Tier.CheckInterval, b.uploadRound)
		go b.every(b.cfg.Tier.RetentionInterval, b.retentionRound)
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

// Close stops accepting, closes every connection, and closes the WAL after in-flight
// appends finish.
func (b *Broker) Close() error {
	var err error
	b.closeMu.Do(func() {
		b.cancel()
		if b.ln != nil {
			b.ln.Close()
		}
		b.connsMu.Lock()
		for c := range b.conns {
			c.nc.Close()
		}
		b.connsMu.Unlock()
		b.wg.Wait()
		b.metrics.close()
		b.closeTier()
		b.groups.Close()
		err = b.wal.Close()
		b.foreignMu.Lock()
		for _, ro := range b.foreign {
			ro.Close()
		}
		b.foreignMu.Unlock()
	})
	return err
}

func (b *Broker) acceptLoop() {
	defer b.wg.Done()
	var delay time.Duration
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			// Out of file descriptors and the like: back off instead of spinning.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			b.log.Warn("accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-b.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		c := newConn(b, nc)
		b.connsMu.Lock()
		if b.ctx.Err() != nil {
			b.connsMu.Unlock()
			nc.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.connsMu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			c.serve()
			b.connsMu.Lock()
			delete(b.conns, c)
			b.connsMu.Unlock()
		}()
	}
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
