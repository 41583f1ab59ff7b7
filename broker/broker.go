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
	"sync/atomic"
	"time"

	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/internal/datamode"
	"github.com/weir-io/weir/internal/slowtrace"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// ErrClosed is returned by operations on a closed broker.
var ErrClosed = errors.New("broker: closed")

// Broker serves the Kafka protocol for the partitions it leads.
type Broker struct {
	cfg    Config
	slow   *slowtrace.Recorder // nil: --trace-slow-requests off
	meta   metadata.Store
	groups *group.Coordinator
	parts  *partlog.Set
	cache  *partlog.Cache
	// recent: batches written here as a zone proxy, read by this zone's replica from
	// memory (recentwrites.go).
	recent  *recentWrites
	front   *kafka.Server
	log     *slog.Logger
	metrics *metrics

	// Set by Start, before anything is served, and read-only afterwards.
	epoch  int64    // the storage epoch: the registration epoch (standalone: local count)
	wal    *wal.WAL // <home>/epoch-<epoch>, fenced
	walDir string   // its directory
	loader *partlog.Loader
	tier   *tier.Tier // nil: the WAL keeps everything

	groupParts  groupParts       // __consumer_offsets partitions: group loads and compaction (groupload.go)
	txns        *txn.Coordinator // nil: transactions off (txnfront.go)
	txnLoads    txnLoads         // __transaction_state partitions loaded (txnload.go)
	share       *kafka.Share     // nil: share groups off (shareconfig.go)
	shareStates shareStates      // __share_group_state partitions served (sharestate.go)

	// starting: Start is loading every partition itself (guarded by the partition
	// set's lock through syncPartitions).
	starting bool
	// synced is what syncPartitions applied last (guarded like starting).
	synced viewSync
	moves  movePrep // a move target's preloads (moveprep.go)

	proxy    *proxy      // zone routing: connections to other brokers and their link senders (proxy.go)
	replicas *replicaSet // zone routing: partitions read here for this zone (replica.go)
	polls    pollSet     // read replicas' long polls of partitions led here

	loads loadTracker // recent traffic per partition, for the controller's balancer

	peerSec peerSecurity // connections to other brokers: cluster token, TLS (peerauth.go)

	loadMu      sync.Mutex
	loadQ       map[*partlog.Partition]loadJob // partitions waiting to be loaded (loadqueue.go)
	loadRunning bool
	loadWake    chan struct{}

	recMu      sync.Mutex
	recovering map[partlog.Key]int32 // partitions being recovered, by the leader epoch

	fenceOnce     sync.Once
	moveBatch     moveBatcher   // hand-offs completed together (movebatch.go)
	fenced        chan struct{} // closed when another process took this broker's WAL over
	storageFailed atomic.Bool   // the WAL failed for good (markStorageFailed)

	nlns []net.Listener  // the named listeners, as cfg.Listeners (listeners.go)
	tls  *tlsconf.Source // certificate of the TLS listeners (nil: none)

	ln     net.Listener
	zlns   []net.Listener // the zone listeners, as cfg.ZoneListeners
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once

	// now is the clock for LogAppendTime and commit timestamps; tests may replace it.
	now func() time.Time
	// replayInfo describes what start-up found in the WAL.
	replayInfo wal.ReplayInfo
}

// New returns a broker ready to Start; meta must already be open. Start registers it,
// opens its WAL and loads its partitions.
func New(cfg Config, meta metadata.Store) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	peerSec, err := newPeerSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	tlsSrc, err := cfg.newTLSSource(log)
	if err != nil {
		return nil, err
	}
	slow, err := slowtrace.Start(cfg.SlowTrace, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		slow:       slow,
		peerSec:    peerSec,
		tls:        tlsSrc,
		cfg:        cfg,
		meta:       meta,
		parts:      partlog.NewSet(),
		cache:      partlog.NewCache(cfg.TailCacheBytes),
		recent:     newRecentWrites(cfg.TailCacheBytes / 8),
		log:        log.With("broker", cfg.NodeID),
		metrics:    newMetrics(cfg.Registerer, cfg.NodeID),
		recovering: map[partlog.Key]int32{},
		loadWake:   make(chan struct{}, 1),
		fenced:     make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
		now:        time.Now,
	}
	b.proxy = newProxy(b)
	b.replicas = newReplicaSet(b)
	gcfg := cfg.Group
	gcfg.Status, gcfg.Loading = b.groupStatus, b.groupsLoading
	gcfg.Transactions = cfg.Transactions
	b.groups = group.New(gcfg, offsetStore{b}, topicChecker{b})
	var txnFrontEnd kafka.TxnCoordinator // nil interface: transactions off
	if cfg.Transactions {
		tcfg := cfg.Txn
		tcfg.Log = b.log.With("component", "txn")
		b.txns, err = txn.New(tcfg, txn.Deps{Store: txnStore{b}, Markers: txnMarkers{b}, ProducerIDs: meta, OffsetsPartition: b.offsetsPartitionOf})
		if err != nil {
			cancel()
			return nil, err
		}
		b.txnLoads = txnLoads{served: map[int32]*partlog.Partition{}, kick: make(chan struct{}, 1)}
		txnFrontEnd = txnFront{b}
	}
	if cfg.Share.Enabled {
		b.share = b.newShare()
	}
	b.front = kafka.NewServer(kafka.Config{
		NodeID:            cfg.NodeID,
		MaxRequestBytes:   cfg.MaxRequestBytes,
		MaxInFlight:       cfg.MaxInFlight,
		IdleTimeout:       cfg.IdleTimeout,
		Limits:            cfg.Limits,
		FetchSessions:     cfg.FetchSessions,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		BrokerConfigs:     cfg.staticConfigs(),
		ZoneRouting:       cfg.ZoneRouting,
		Zone:              cfg.Rack,
		Routing:           cfg.Routing,
		Traffic:           cfg.Traffic,
		SASL:              cfg.SASL,
		Authorizer:        cfg.ACL.New(),
		PrincipalRules:    cfg.ACL.PrincipalRules(),
		SlowRequests:      slow,
		Transactions:      cfg.Transactions,
		// KIP-890 part 1: txnFront is the TxnVerifier (txnverify.go).
		VerifyTxnPartitions: cfg.Transactions && cfg.TxnVerify,
	}, kafka.Deps{Meta: meta, Backend: backend{b}, Groups: b.groups, Txn: txnFrontEnd, Share: b.share, Internal: peerServer{b},
		PeerAuth: peerHandshake{tokens: b.peerTokens}, Registerer: cfg.Registerer, Logger: b.log, Now: b.clock})
	return b, nil
}

// Start binds the Kafka listeners (the main, zone and named ones), registers the
// broker (a new epoch, with the listeners' advertised addresses), opens the WAL of that
// epoch, loads every partition it leads and then serves. Clients that connect while it
// loads wait in the listen queue.
func (b *Broker) Start() error {
	if err := b.checkStore(); err != nil {
		return err
	}
	if err := b.checkControllerAuth(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", b.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("broker: listen %s: %w", b.cfg.ListenAddr, err)
	}
	b.ln = ln
	// Messages (the WAL) and, single-node, SCRAM keys (metadata.json) live here.
	datamode.Check(b.log, "broker data", b.cfg.DataDir, b.cfg.WAL.Dir, b.cfg.WALRoot)
	for _, zl := range b.cfg.ZoneListeners {
		zln, err := net.Listen("tcp", zl.Listen)
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("broker: listen %s (zone %s): %w", zl.Listen, zl.Zone, err)
		}
		b.zlns = append(b.zlns, zln)
	}
	if err := b.bindNamed(); err != nil {
		b.closeListeners()
		return err
	}
	if err := b.open(); err != nil {
		b.closeListeners()
		b.closeStorage()
		return err
	}
	b.metrics.attach(b) // partitions led, consumer groups and lag, read at scrape time
	b.serveListeners()
	if b.txns != nil {
		b.wg.Add(1)
		go b.txnLoadLoop()
	}
	if b.share != nil {
		b.wg.Add(1)
		go b.shareLoadLoop()
	}
	b.wg.Add(4)
	go b.watchMetadata()
	go b.walGCLoop()
	go b.replicas.janitor()
	go b.expireOffsetsLoop()
	if f, ok := b.meta.(metadata.Leaser); ok {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			select {
			case <-f.Fenced():
				b.markFenced("the controller fenced this registration")
			case <-b.ctx.Done():
			}
		}()
	}
	if b.tier != nil {
		b.tier.Start()
		b.wg.Add(1)
		go b.resolveLostLoop()
	}
	b.log.Info("broker serving", "listen", ln.Addr().String(), "advertised", b.Advertised(), "rack", b.cfg.Rack, "epoch", b.epoch)
	return nil
}

// open registers, opens this epoch's WAL and loads the partitions led here.
func (b *Broker) open() error {
	fsys := b.walFS()
	home := b.cfg.WAL.Dir
	if r, ok := b.meta.(metadata.Registrar); ok {
		if err := r.RegisterBroker(b.ctx, b.Advertised()); err != nil {
			return fmt.Errorf("broker: register: %w", err)
		}
	}
	if e, ok := b.meta.(metadata.Epocher); ok && e.Epoch() > 0 {
		b.epoch = e.Epoch()
	} else {
		// No registration epochs (the single-node store): one more than any WAL here.
		n, err := walhome.NextLocalEpoch(fsys, home)
		if err != nil {
			return err
		}
		b.epoch = n
	}
	srcs, err := walhome.List(fsys, home)
	if err != nil {
		return err
	}
	if n := len(srcs); n > 0 && srcs[n-1].Epoch >= b.epoch {
		return fmt.Errorf("broker: %s already has a WAL of epoch %d, this registration is epoch %d: refusing to write under another process's epoch",
			home, srcs[n-1].Epoch, b.epoch)
	}
	wcfg := b.cfg.WAL
	wcfg.FS = b.countingFS(fsys)
	wcfg.Dir = walhome.EpochDir(home, b.epoch)
	wcfg.Fence = true
	wcfg.EpochFence, wcfg.Epoch = walhome.TokenPath(home), b.epoch
	wcfg.AcceptCorruption = b.cfg.AcceptWALLoss
	var why string
	wcfg.NoZeroFill, why = b.cfg.noZeroFill(wcfg.Dir)
	b.log.Info("WAL segments", "zero_fill", !wcfg.NoZeroFill, "why", why)
	wcfg.Owner = fmt.Sprintf("broker-%d epoch %d", b.cfg.NodeID, b.epoch)
	if wcfg.Registerer == nil {
		wcfg.Registerer = b.cfg.Registerer
	}
	if wcfg.Logger == nil {
		wcfg.Logger = b.log
	}
	w, err := wal.Open(wcfg)
	if err != nil {
		return fmt.Errorf("broker: open wal: %w", err)
	}
	b.wal, b.walDir = w, wcfg.Dir
	if b.replayInfo, err = w.Replay(nil); err != nil {
		return fmt.Errorf("broker: replay %s: %w", wcfg.Dir, err)
	}
	b.loader = partlog.NewLoader(b.countingFS(fsys), b.loaderSources, b.metrics.walRead)
	if err := b.openTier(); err != nil {
		return err
	}
	// Earlier processes of this broker may still be alive (hung in I/O, a pod that was
	// force-deleted): seal their WALs before reading them to their end.
	if err := b.sealUpTo(b.cfg.NodeID, b.epoch-1); err != nil {
		return err
	}
	b.parts.Update(func(partlog.SetTx) { b.starting = true })
	b.syncPartitions(b.meta.View())
	err = b.loadAtStart()
	b.parts.Update(func(partlog.SetTx) { b.starting = false })
	return err
}

// closeListeners closes the listeners Start bound (a failed Start; once served, the
// front end closes them).
func (b *Broker) closeListeners() {
	if b.ln != nil {
		b.ln.Close()
	}
	for _, zln := range b.zlns {
		zln.Close()
	}
	for _, ln := range b.nlns {
		ln.Close()
	}
}

// closeStorage releases what open acquired (a failed Start).
func (b *Broker) closeStorage() {
	if b.tier != nil {
		b.tier.Close()
	}
	if b.wal != nil {
		b.wal.Close()
	}
	if b.loader != nil {
		b.loader.Close()
	}
}

// Fenced is closed when this broker learned that another process took its WAL over (the
// storage fence), the controller fenced its registration, or its WAL failed for good (a
// failed fdatasync: StorageFailed): it acks nothing from then on and must be restarted
// (a new registration with a WAL of its own, which seals this one and loads what it holds).
func (b *Broker) Fenced() <-chan struct{} { return b.fenced }

// StorageFailed reports whether the broker must restart because its WAL failed for good
// (rather than because it was fenced).
func (b *Broker) StorageFailed() bool { return b.storageFailed.Load() }

func (b *Broker) markFenced(why string) {
	b.fenceOnce.Do(func() {
		b.log.Error("this broker was fenced; it acks nothing more and must restart", "why", why, "epoch", b.epoch)
		close(b.fenced)
	})
}

// markStorageFailed ends this registration after its WAL failed for good: after a failed
// fdatasync the kernel may have dropped the dirty pages (on NFS every write error, a full
// volume's ENOSPC included, surfaces there), so nothing more can be appended to this
// directory. Serving KAFKA_STORAGE_ERROR until someone restarts the process would keep
// every partition led here unavailable; a restart under a new registration (as when
// fenced) seals this directory, loads what it durably holds, and serves again as soon as
// the storage works. Nothing acked is lost: an ack waits for a successful sync.
func (b *Broker) markStorageFailed(err error) {
	b.fenceOnce.Do(func() {
		b.storageFailed.Store(true)
		b.log.Error("the WAL failed for good; this broker acks nothing more and restarts under a new registration", "err", err, "epoch", b.epoch)
		close(b.fenced)
	})
}

// Epoch is the storage epoch of this broker's WAL (0 before Start).
func (b *Broker) Epoch() int64 { return b.epoch }

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
		Led: b.parts.All, Registerer: b.cfg.Registerer, Logger: b.log, Now: b.clock, LeaseOK: b.leaseOK,
	})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.tier = t
	return nil
}

// Addr is the listener's address (useful with port 0 in tests).
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// Advertised returns the host and port clients are told to connect to, and those of
// its zone listeners (each its advertised address, else the bound one once Start bound
// it, else the configured one).
func (b *Broker) Advertised() metadata.Broker {
	host, port := advertised(b.cfg.AdvertisedAddr, b.ln, b.cfg.ListenAddr)
	br := metadata.Broker{ID: b.cfg.NodeID, Host: host, Port: port, Rack: b.cfg.Rack}
	for i, zl := range b.cfg.ZoneListeners {
		var ln net.Listener
		if i < len(b.zlns) {
			ln = b.zlns[i]
		}
		h, p := advertised(zl.Advertise, ln, zl.Listen)
		br.Listeners = append(br.Listeners, metadata.Listener{Name: zl.Zone, Protocol: zl.Protocol, Zone: zl.Zone, Host: h, Port: p})
	}
	br.Listeners = append(br.Listeners, b.namedAdvertised()...)
	return br
}

// advertised is the address to tell clients of a listener: adv if set, else ln's bound
// address, else listen.
func advertised(adv string, ln net.Listener, listen string) (string, int32) {
	addr := adv
	if addr == "" && ln != nil {
		addr = ln.Addr().String()
	}
	if addr == "" {
		addr = listen
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// ZoneAddrs are the bound addresses of the zone listeners, by zone (useful with port 0
// in tests).
func (b *Broker) ZoneAddrs() map[string]net.Addr {
	m := make(map[string]net.Addr, len(b.zlns))
	for i, zln := range b.zlns {
		m[b.cfg.ZoneListeners[i].Zone] = zln.Addr()
	}
	return m
}

// ReplayInfo tells what the WAL replay at start-up found (e.g. where a torn record was).
func (b *Broker) ReplayInfo() wal.ReplayInfo { return b.replayInfo }

// Groups exposes the group coordinator (metrics, tests).
func (b *Broker) Groups() *group.Coordinator { return b.groups }

// WALBytes is the bytes this broker's WAL keeps on disk; with the object tier it shrinks
// as uploaded segments are trimmed.
func (b *Broker) WALBytes() int64 {
	if b.wal == nil {
		return 0
	}
	return int64(b.wal.End() - b.wal.Start())
}

// Close stops accepting, closes every connection, and closes the WAL after in-flight
// appends finish.
func (b *Broker) Close() error {
	var err error
	b.closed.Do(func() {
		b.cancel()
		b.groupParts.mu.Lock() // no group worker starts after this (groupPart)
		b.groupParts.mu.Unlock()
		b.front.Close()
		b.proxy.close()
		b.wg.Wait()
		if b.tier != nil {
			b.tier.Close()
		}
		b.metrics.close()
		b.groups.Close()
		if b.txns != nil {
			b.txns.Close()
		}
		if b.wal != nil {
			err = b.wal.Close()
		}
		if b.loader != nil {
			b.loader.Close()
		}
		b.slow.Close()
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

// TopicInfos is group.TopicCatalog: the topics the consumer group assignors place.
func (t topicChecker) TopicInfos() []group.TopicInfo {
	v := t.b.meta.View()
	out := make([]group.TopicInfo, 0, len(v.Topics))
	for name, tp := range v.Topics {
		out = append(out, group.TopicInfo{Name: name, ID: tp.ID, Partitions: int32(len(tp.Partitions))})
	}
	return out
}

// TopicID is group.TopicIDs: offsets of a deleted topic, or of an earlier topic of the
// same name, are not served.
func (t topicChecker) TopicID(topic string) (string, bool) {
	tp := t.b.meta.View().Topics[topic]
	if tp == nil {
		return "", false
	}
	return tp.ID.String(), true
}
