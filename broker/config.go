package broker

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/internal/mountcheck"
	"github.com/weir-io/weir/internal/slowtrace"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/sasl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/wal"
)

// Config configures one broker. Use DefaultConfig and adjust; Validate before use.
type Config struct {
	NodeID int32
	// Rack is the broker's zone; clients see it as the broker's rack.
	Rack string
	// ListenAddr is the Kafka listener, host:port.
	ListenAddr string
	// AdvertisedAddr is what Metadata tells clients; defaults to the listener's address.
	AdvertisedAddr string
	// ZoneListeners are extra Kafka listeners, at most one per zone (zone routing): a
	// client that connects to one is a client of its zone, and Metadata,
	// FindCoordinator and DescribeCluster answered there name every broker's listener
	// of that zone (or its main address when it has none), so the client stays on
	// that zone's listeners.
	ZoneListeners []ZoneListener

	// Security protocols and TLS of the Kafka listeners (listeners.go).
	// ListenProtocol is the main listener's: PLAINTEXT ("" too), SSL, SASL_PLAINTEXT or
	// SASL_SSL. Listeners are extra named listeners, each with its own protocol (Kafka's
	// listeners=NAME://host:port). TLS is the certificate and key of every SSL and
	// SASL_SSL listener (reloaded when the files change) and the CA of client
	// certificates (mutual TLS: the principal is User:<CN>).
	ListenProtocol string
	Listeners      []NamedListener
	TLS            tlsconf.Files
	// DataDir holds the WAL (DataDir/wal, unless WALRoot is set) and, for a single
	// broker, the metadata file.
	DataDir string
	// WALRoot is the shared WAL directory of a cluster (the FSx ONTAP NFS mount in
	// production): each broker writes WALRoot/broker-<id> and reads the others' to take
	// over partitions without copying data.
	WALRoot string
	// WALMountUnsafeOK starts the broker although the file system under WALRoot (or
	// the WAL directory) has mount options that break the storage fence's argument
	// (internal/mountcheck: nocto, NFS below v4, lookupcache=all). For emergencies and
	// labs; such a cluster may ack records a failover then loses.
	WALMountUnsafeOK bool
	// WALZeroFill: whether a preallocated WAL segment is zero-filled before use (wal.Config
	// NoZeroFill): "on", "off", or "auto" (the default): on for a local file system, where
	// it shortens fdatasync, off on NFS and FUSE, where it doubles the bytes written to the
	// file server (and its provisioned throughput) for no journal to spare.
	WALZeroFill string
	// MountInfo is the mountinfo file the WAL mount check reads ("" =
	// /proc/self/mountinfo; tests point it elsewhere).
	MountInfo string
	// OffsetsTopicPartitions is the partition count of __consumer_offsets when the broker
	// creates it (offsets.topic.num.partitions).
	OffsetsTopicPartitions int32
	// OffsetsCompactBytes: a __consumer_offsets partition led here is compacted (every
	// group's state written again, the older records dropped) once its log holds more
	// than this and more than twice what the last compaction wrote, which bounds how long
	// a new coordinator takes to load it. 0 turns compaction off.
	OffsetsCompactBytes int64
	// OffsetsCompactCheck is how often each such partition is looked at.
	OffsetsCompactCheck time.Duration
	// OffsetsRetentionCheck is how often expired offsets are removed
	// (offsets.retention.check.interval.ms; Group.OffsetsRetention is the retention).
	OffsetsRetentionCheck time.Duration
	// MaxRequestBytes bounds one request frame; larger frames close the connection
	// before anything is allocated for them (Kafka: socket.request.max.bytes).
	MaxRequestBytes int32
	// AutoCreateTopics creates unknown topics on Metadata/Produce (auto.create.topics.enable).
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions for auto-created and -1 partition topics.
	DefaultPartitions int32
	// TailCacheBytes bounds the in-memory copy of recent batches served to tail fetchers.
	TailCacheBytes int64
	// MaxInFlight bounds pipelined requests per connection before the broker stops reading it.
	MaxInFlight int
	// IdleTimeout closes connections that send nothing (connections.max.idle.ms).
	IdleTimeout time.Duration
	// SlowTrace writes an execution trace of the seconds before a request slower than
	// its threshold (off by default; Dir defaults to <data-dir>/traces).
	SlowTrace slowtrace.Config
	// Limits bound what clients can make the broker hold: request bytes in flight,
	// connections overall and per address, fetch sizes (broker/kafka/limits.go).
	Limits kafka.Limits
	// FetchSessions bounds the incremental fetch sessions (KIP-227) kept
	// (broker/kafka/fetch_session.go).
	FetchSessions kafka.FetchSessionConfig

	// AcceptWALLoss is an operator's decision to serve partitions whose WALs lost data
	// (a corrupt record in the middle of a WAL, a segment deleted by hand): the WAL's
	// replay cuts at the damage and partitions serve with a gap in their offsets instead
	// of staying unavailable. Off by default: lost acked data must be noticed.
	AcceptWALLoss bool

	// ZoneRouting lets clients in this broker's zone produce to partitions led in other
	// zones through it (proxy.go): the batch stays in this broker's WAL and only a link
	// crosses zones. Metadata names this broker to them as the leader.
	ZoneRouting bool
	// Routing decides a client's zone (its client.id tag, its Fetch rack, its source
	// network).
	Routing routing.Config
	// LinkGrace paces a zone proxy's resolution of lost link answers: every LinkGrace/6
	// it fences the link sessions they went on and asks the leaders for the log ends
	// that bound them (proxy.go: resolveLostLoop). Nothing is resolved on the grace
	// alone.
	LinkGrace time.Duration
	// Traffic, when set, counts the bytes this broker moves by peer zone and kind:
	// clients', inter-broker connections', and reads of other brokers' WALs.
	Traffic *routing.Traffic

	// ClusterTokenFile (security/token) authenticates the connections between brokers, and
	// PeerTLS makes them TLS when its CAFile or CertFile is set (peerauth.go).
	ClusterTokenFile string
	PeerTLS          tlsconf.Files

	// WAL configures this broker's write-ahead log; WAL.Dir is its WAL home, under
	// which each registration epoch writes a directory of its own.
	WAL   wal.Config
	Group group.Config

	// Transactions turns the transaction coordinator on (Kafka transactions: the
	// transaction API keys, transactional producers, read_committed consumers); off,
	// transactional producers are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	// Txn configures the coordinator (its __transaction_state partition count, timeouts).
	Transactions bool
	Txn          txn.Config
	// Share configures share groups (KIP-932; shareconfig.go), on by default.
	Share ShareConfig
	// TxnVerify makes a partition leader ask a producer's transaction coordinator, before
	// the producer's first transactional batch in the partition, whether the partition
	// is in its transaction (KIP-890 part 1; Kafka's
	// transaction.partition.verification.enable): a late batch of an ended transaction
	// is then refused instead of opening one nobody ends.
	TxnVerify bool

	// Objects is the object store WAL data moves to (shared by the cluster); nil keeps
	// everything in the WAL. The tier also needs a metadata store with object manifests.
	Objects objectstore.Store
	Tier    tier.Config
	// SASL: the mechanisms SASL listeners accept and the KIP-368 session lifetime.
	SASL sasl.Config

	// ACL turns on the authorizer (--authorizer acl) and names the super users.
	ACL acl.Config

	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// ZoneListener is one per-zone Kafka listener.
type ZoneListener struct {
	// Zone is the zone of the clients that connect here (spelled as the brokers'
	// --rack).
	Zone string
	// Listen is the address to bind, host:port.
	Listen string
	// Advertise is the address clients are told (default: the bound address).
	Advertise string
	// Protocol is the listener's security protocol ("" PLAINTEXT; listeners.go).
	Protocol string
}

// String is the --zone-listener form: zone=[protocol://]listen[/advertise].
func (l ZoneListener) String() string {
	s := l.Zone + "="
	if l.Protocol != "" {
		s += l.Protocol + "://"
	}
	s += l.Listen
	if l.Advertise != "" {
		s += "/" + l.Advertise
	}
	return s
}

// ParseZoneListener parses zone=[PROTOCOL://]host:port[/advertised-host:port].
func ParseZoneListener(s string) (ZoneListener, error) {
	zone, addrs, ok := strings.Cut(s, "=")
	if !ok {
		return ZoneListener{}, fmt.Errorf("zone listener %q: want zone=[PROTOCOL://]host:port[/advertised-host:port]", s)
	}
	proto, addrs, err := cutProtocol(addrs)
	if err != nil {
		return ZoneListener{}, fmt.Errorf("zone listener %q: %w", s, err)
	}
	listen, adv, _ := strings.Cut(addrs, "/")
	l := ZoneListener{Zone: zone, Listen: listen, Advertise: adv, Protocol: proto}
	return l, l.validate()
}

func (l ZoneListener) validate() error {
	if !routing.ValidZone(l.Zone) {
		return fmt.Errorf("zone listener %q: invalid zone %q", l, l.Zone)
	}
	if _, _, err := net.SplitHostPort(l.Listen); err != nil {
		return fmt.Errorf("zone listener %q: listen address %q: %w", l, l.Listen, err)
	}
	if l.Advertise != "" {
		if h, p, err := net.SplitHostPort(l.Advertise); err != nil || h == "" || p == "0" {
			return fmt.Errorf("zone listener %q: advertised address %q must be host:port", l, l.Advertise)
		}
	}
	return nil
}

// zoneListenersFlag is the repeatable --zone-listener.
type zoneListenersFlag struct{ c *Config }

func (f zoneListenersFlag) String() string {
	if f.c == nil {
		return ""
	}
	s := make([]string, len(f.c.ZoneListeners))
	for i, l := range f.c.ZoneListeners {
		s[i] = l.String()
	}
	return strings.Join(s, ",")
}

func (f zoneListenersFlag) Set(s string) error {
	l, err := ParseZoneListener(s)
	if err != nil {
		return err
	}
	f.c.ZoneListeners = append(f.c.ZoneListeners, l)
	return nil
}

// DefaultConfig returns a single broker on 127.0.0.1:9092 with data under ./data.
func DefaultConfig() Config {
	return Config{
		NodeID:                 0,
		ListenAddr:             "127.0.0.1:9092",
		DataDir:                "data",
		MaxRequestBytes:        100 << 20,
		AutoCreateTopics:       true,
		DefaultPartitions:      1,
		OffsetsTopicPartitions: 16,
		OffsetsCompactBytes:    16 << 20,
		OffsetsCompactCheck:    5 * time.Second,
		OffsetsRetentionCheck:  10 * time.Minute,
		TailCacheBytes:         256 << 20,
		MaxInFlight:            256,
		SlowTrace:              slowtrace.DefaultConfig(),
		IdleTimeout:            10 * time.Minute,
		Limits:                 kafka.DefaultLimits(),
		FetchSessions:          kafka.DefaultFetchSessionConfig(),
		ZoneRouting:            true,
		Routing:                routing.DefaultConfig(),
		LinkGrace:              30 * time.Second,
		WAL:                    wal.DefaultConfig(""),
		Group:                  group.DefaultConfig(),
		Transactions:           true,
		Share:                  DefaultShareConfig(),
		Txn:                    txn.DefaultConfig(),
		TxnVerify:              true,
		Tier:                   tier.DefaultConfig(),
		SASL:                   sasl.DefaultConfig(),
		ACL:                    acl.DefaultConfig(),
	}
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("broker: node id must be >= 0, got %d", c.NodeID)
	}
	if c.LinkGrace <= 0 {
		c.LinkGrace = 30 * time.Second
	}
	switch c.WALZeroFill {
	case "", "auto", "on", "off":
	default:
		return fmt.Errorf("broker: --wal-zero-fill is %q: want auto, on or off", c.WALZeroFill)
	}
	if err := c.SASL.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if c.Transactions {
		if err := c.Txn.Validate(); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	if err := c.Routing.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := c.Share.validate(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		return fmt.Errorf("broker: listen address %q: %w", c.ListenAddr, err)
	}
	if c.AdvertisedAddr != "" {
		if _, p, err := net.SplitHostPort(c.AdvertisedAddr); err != nil || p == "0" {
			return fmt.Errorf("broker: advertised address %q must be host:port", c.AdvertisedAddr)
		}
	}
	if len(c.ZoneListeners) > metadata.MaxListeners {
		return fmt.Errorf("broker: %d zone listeners, at most %d", len(c.ZoneListeners), metadata.MaxListeners)
	}
	zones := map[string]bool{}
	for _, l := range c.ZoneListeners {
		if err := l.validate(); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		if zones[l.Zone] {
			return fmt.Errorf("broker: two zone listeners for zone %q", l.Zone)
		}
		zones[l.Zone] = true
	}
	if err := c.validateListeners(); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("broker: data dir is required")
	}
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("broker: max request bytes %d is too small", c.MaxRequestBytes)
	}
	if c.DefaultPartitions < 1 {
		return fmt.Errorf("broker: default partitions must be >= 1")
	}
	if c.MaxInFlight < 1 {
		return fmt.Errorf("broker: max in-flight must be >= 1")
	}
	if c.SlowTrace.Threshold > 0 && c.SlowTrace.Dir == "" {
		c.SlowTrace.Dir = filepath.Join(c.DataDir, "traces")
	}
	if err := c.SlowTrace.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := c.Limits.Validate(c.MaxRequestBytes); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := c.FetchSessions.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if c.OffsetsTopicPartitions < 1 {
		return fmt.Errorf("broker: offsets topic partitions must be >= 1")
	}
	if c.OffsetsCompactBytes < 0 || c.OffsetsCompactCheck <= 0 || c.OffsetsRetentionCheck <= 0 {
		return fmt.Errorf("broker: --offsets-compact-bytes must be >= 0 and the offsets check intervals > 0")
	}
	if c.WAL.Dir == "" {
		c.WAL.Dir = filepath.Join(c.DataDir, "wal")
		if c.WALRoot != "" {
			c.WAL.Dir = filepath.Join(c.WALRoot, fmt.Sprintf("broker-%d", c.NodeID))
		}
	}
	if err := c.WAL.Validate(); err != nil {
		return err
	}
	if err := c.checkWALMount(); err != nil {
		return err
	}
	if err := c.Tier.Validate(); err != nil {
		return err
	}
	if err := c.ACL.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return c.Group.Validate()
}

// ErrNoClusterToken: a broker of a cluster with SASL or an authorizer on and no cluster
// token, whose connections other brokers could not tell from a client's.
var ErrNoClusterToken = errors.New("broker: SASL or an authorizer is on but no cluster token is set")

// ValidateCluster checks what a broker of a cluster needs on top of Validate: with a
// SASL listener or the authorizer on, a cluster token (ClusterTokenFile). Internal
// requests carry no ACL check (kafka/internal.go); without a token to prove, the
// listeners refuse them, so connections between brokers would fail. A standalone broker
// has no peer connections and does not need one.
func (c *Config) ValidateCluster() error {
	if c.ClusterTokenFile != "" {
		return nil
	}
	what := ""
	if c.ACL.Authorizer != "" {
		what = "--authorizer " + c.ACL.Authorizer
	}
	for _, p := range c.protocols() {
		if protocolSASL(p) {
			what = strings.TrimPrefix(what+" and a "+p+" listener", " and ")
			break
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w (%s): other brokers' internal requests bypass ACLs and SASL, so they must prove a shared secret; "+
		"set --cluster-token-file on every broker and controller (generate one with `weir admin token`), or run `weir dev --secure`, which generates the secure setup", ErrNoClusterToken, what)
}

// BindFlags registers the broker's flags on fs, writing into c.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.Func("node-id", "broker id, unique in the cluster (default 0)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		c.NodeID = int32(n)
		return err
	})
	fs.StringVar(&c.Rack, "rack", c.Rack, "zone (rack) of this broker, shown to clients as broker.rack")
	fs.StringVar(&c.ListenAddr, "listen", c.ListenAddr, "Kafka listener address host:port")
	fs.StringVar(&c.AdvertisedAddr, "advertise", c.AdvertisedAddr, "address advertised to clients (default: the listener's)")
	fs.Var(zoneListenersFlag{c}, "zone-listener", "an extra Kafka listener for the clients of one zone, zone=[PROTOCOL://]host:port[/advertised-host:port] (repeatable, one per zone; PROTOCOL as --listen-protocol, default PLAINTEXT): "+
		"a client connecting there is in that zone (zone routing), and Metadata answered there names every broker's listener of that zone (else its main address); "+
		"advertised default: the bound address")
	c.bindListenerFlags(fs)
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the WAL and local state")
	fs.StringVar(&c.WALRoot, "wal-root", c.WALRoot, "shared WAL directory of the cluster (e.g. the FSx ONTAP NFS mount); this broker writes <wal-root>/broker-<id>")
	fs.BoolVar(&c.WALMountUnsafeOK, "wal-root-unsafe-mount-ok", c.WALMountUnsafeOK,
		"start although the NFS mount under --wal-root has options that break the storage fence (nocto, NFS below v4, lookupcache=all: mount with vers=4.1,lookupcache=positive and close-to-open on); "+
			"a failover may then lose acked records. Default: refuse to start, naming the option and why")
	fs.Func("max-request-bytes", "largest request frame accepted; larger ones close the connection (default 104857600)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		c.MaxRequestBytes = int32(n)
		return err
	})
	fs.IntVar(&c.MaxInFlight, "max-in-flight-requests-per-connection", c.MaxInFlight,
		"most requests of one connection read and not yet answered; then the broker stops reading it until an answer is sent (slow handlers and long polls included)")
	c.Limits.BindFlags(fs)
	c.FetchSessions.BindFlags(fs)
	fs.DurationVar(&c.SlowTrace.Threshold, "trace-slow-requests", c.SlowTrace.Threshold,
		"keep a Go execution trace of the last seconds in memory (the runtime's flight recorder, a few % of CPU) and write it to "+
			"--trace-dir when a request takes longer than this (not Fetch, JoinGroup, SyncGroup or internal long polls, which wait by design), at most once per 30s, newest 10 kept; open with go tool trace FILE. 0 = off")
	fs.StringVar(&c.SlowTrace.Dir, "trace-dir", c.SlowTrace.Dir, "directory of --trace-slow-requests traces (default <data-dir>/traces)")
	fs.BoolVar(&c.AutoCreateTopics, "auto-create-topics", c.AutoCreateTopics, "create unknown topics on produce/metadata (auto.create.topics.enable)")
	fs.Func("default-partitions", "partitions of auto-created topics (num.partitions, default 1)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		c.DefaultPartitions = int32(n)
		return err
	})
	fs.Int64Var(&c.TailCacheBytes, "tail-cache-bytes", c.TailCacheBytes, "memory for recent batches served to tail consumers")
	fs.Int64Var(&c.WAL.SegmentSize, "wal-segment-bytes", c.WAL.SegmentSize, "size of one WAL segment file")
	fs.DurationVar(&c.WAL.SegmentMaxAge, "wal-segment-max-age", c.WAL.SegmentMaxAge, "start a new WAL segment at the first append after the active one's first record is this old, so a slow broker's WAL is trimmed by time, not only by --wal-segment-bytes (held: about this plus --upload-max-delay of traffic); 0 = by size only")
	fs.StringVar(&c.WALZeroFill, "wal-zero-fill", "auto", "zero-fill a preallocated WAL segment before use: on (a shorter fdatasync on a local ext4 or xfs), off, or auto: "+
		"on for a local file system, off on NFS and FUSE, where the zeros double the bytes written to the file server and use its provisioned throughput")
	fs.BoolVar(&c.AcceptWALLoss, "accept-wal-loss", c.AcceptWALLoss, "serve partitions whose WAL data is damaged or missing, with a gap in their offsets (default: they stay unavailable and say why)")
	fs.BoolVar(&c.ZoneRouting, "zone-routing", c.ZoneRouting, "route clients of a known zone through brokers of their zone: produce through a same-zone proxy, read from a same-zone replica; only links cross zones (a client's zone: the --zone-listener it connected to, a weir_az=/automq_az=/warpstream_az=/ws_az=/zone= tag in client.id, the rack of its Fetch requests, or --zone-cidrs)")
	c.Routing.BindFlags(fs)
	c.bindPeerFlags(fs)
	c.Tier.BindFlags(fs)
	c.SASL.BindFlags(fs)
	c.ACL.BindFlags(fs)
	c.Share.bindFlags(fs)
	fs.DurationVar(&c.Group.InitialRebalanceDelay, "group-initial-rebalance-delay", c.Group.InitialRebalanceDelay, "wait for more members before the first rebalance of an empty group")
	fs.BoolVar(&c.Group.ConsumerProtocol, "group-consumer-protocol", c.Group.ConsumerProtocol, "serve the KIP-848 consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe; clients' group.protocol=consumer) besides the classic one; =false to refuse it")
	fs.DurationVar(&c.Group.ConsumerSessionTimeout, "group-consumer-session-timeout", c.Group.ConsumerSessionTimeout, "a KIP-848 consumer group member silent this long is removed (group.consumer.session.timeout.ms)")
	fs.DurationVar(&c.Group.ConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", c.Group.ConsumerHeartbeatInterval, "how often KIP-848 consumer group members are told to heartbeat (group.consumer.heartbeat.interval.ms)")
	fs.Var(&c.Group.MigrationPolicy, "group-consumer-migration-policy", "convert a classic group with members to a consumer group when a KIP-848 member joins (upgrade), and back when its last KIP-848 member leaves (downgrade): disabled, upgrade, downgrade or bidirectional (group.consumer.migration.policy)")
	fs.DurationVar(&c.Group.OffsetsRetention, "offsets-retention", c.Group.OffsetsRetention, "keep an empty group's committed offsets this long after it became empty (a group that never had members: after the commit); offsets.retention.minutes. 0 = for ever")
	fs.DurationVar(&c.OffsetsRetentionCheck, "offsets-retention-check-interval", c.OffsetsRetentionCheck, "how often expired offsets, and offsets of deleted topics, are removed")
	fs.BoolVar(&c.Transactions, "transactions", c.Transactions, "run the transaction coordinator: transactional producers (exactly-once), read_committed consumers; off: transactional producers are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	fs.BoolVar(&c.TxnVerify, "txn-partition-verification", c.TxnVerify, "before a producer's first transactional batch in a partition, ask its transaction coordinator whether the partition is in its transaction, and refuse the batch (INVALID_TXN_STATE) if not "+
		"(KIP-890, transaction.partition.verification.enable): a late retry of an ended transaction then cannot hold the partition's last stable offset; costs one coordinator round trip per transaction and partition")
	fs.IntVar(&c.Txn.Partitions, "txn-state-partitions", c.Txn.Partitions, "partitions of __transaction_state (where transaction coordinators keep their state); every broker of a cluster must use the same count")
	fs.DurationVar(&c.Txn.MaxTimeout, "txn-max-timeout", c.Txn.MaxTimeout, "the longest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&c.Txn.IDExpiration, "txn-id-expiration", c.Txn.IDExpiration, "forget a transactional id unused this long (transactional.id.expiration.ms)")
	fs.Int64Var(&c.OffsetsCompactBytes, "offsets-compact-bytes", c.OffsetsCompactBytes, "compact a __consumer_offsets partition (write each group's state again, drop the older records) once its log passes this many bytes and twice its last compaction; bounds a new coordinator's load time. 0 = never")
}

// staticConfigs are the broker settings DescribeConfigs reports (read-only in Weir: they
// are flags).
func (c *Config) staticConfigs() map[string]string {
	return map[string]string{
		"broker.id":                                 strconv.Itoa(int(c.NodeID)),
		"broker.rack":                               c.Rack,
		"num.partitions":                            strconv.Itoa(int(c.DefaultPartitions)),
		"auto.create.topics.enable":                 strconv.FormatBool(c.AutoCreateTopics),
		"socket.request.max.bytes":                  strconv.Itoa(int(c.MaxRequestBytes)),
		"queued.max.request.bytes":                  strconv.FormatInt(c.Limits.QueuedMaxRequestBytes, 10),
		"max.connections":                           strconv.Itoa(c.Limits.MaxConnections),
		"max.connections.per.ip":                    strconv.Itoa(c.Limits.MaxConnectionsPerIP),
		"fetch.max.bytes":                           strconv.Itoa(int(c.Limits.FetchMaxBytes)),
		"max.incremental.fetch.session.cache.slots": strconv.Itoa(c.FetchSessions.Slots),
		"message.max.bytes":                         strconv.Itoa(metadata.DefaultMaxMessageBytes),
		"default.replication.factor":                "1",
		"min.insync.replicas":                       "1",
		"log.dirs":                                  c.WAL.Dir,
		"group.initial.rebalance.delay.ms":          strconv.FormatInt(c.Group.InitialRebalanceDelay.Milliseconds(), 10),
		"group.min.session.timeout.ms":              strconv.FormatInt(c.Group.MinSessionTimeout.Milliseconds(), 10),
		"group.max.session.timeout.ms":              strconv.FormatInt(c.Group.MaxSessionTimeout.Milliseconds(), 10),
		"offsets.retention.minutes":                 strconv.FormatInt(int64(c.Group.OffsetsRetention/time.Minute), 10),
		"offsets.retention.check.interval.ms":       strconv.FormatInt(c.OffsetsRetentionCheck.Milliseconds(), 10),
		"offsets.topic.num.partitions":              strconv.Itoa(int(c.OffsetsTopicPartitions)),
		"group.consumer.session.timeout.ms":         strconv.FormatInt(c.Group.ConsumerSessionTimeout.Milliseconds(), 10),
		"group.consumer.heartbeat.interval.ms":      strconv.FormatInt(c.Group.ConsumerHeartbeatInterval.Milliseconds(), 10),
		"group.consumer.migration.policy":           c.Group.MigrationPolicy.String(),
	}
}

// checkWALMount refuses a shared WAL on a mount whose options break the storage fence's
// argument (internal/mountcheck), unless WALMountUnsafeOK; warnings are logged. Only
// with WALRoot: a WAL under DataDir is read by no other host.
func (c *Config) checkWALMount() error {
	if c.WALRoot == "" {
		return nil
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	info := c.MountInfo
	if info == "" {
		info = mountcheck.DefaultMountInfo
	}
	paths := []string{c.WALRoot}
	if c.WAL.Dir != "" && c.WAL.Dir != c.WALRoot {
		paths = append(paths, c.WAL.Dir)
	}
	for _, path := range paths {
		res, err := mountcheck.CheckPath(path, info)
		if err != nil {
			if c.WALMountUnsafeOK || c.MountInfo == "" && errors.Is(err, os.ErrNotExist) { // no /proc: not Linux
				log.Warn("the WAL mount could not be checked", "path", path, "err", err)
				continue
			}
			return fmt.Errorf("broker: checking the mount of %s (--wal-root-unsafe-mount-ok skips the check): %w", path, err)
		}
		for _, p := range res.Warnings() {
			log.Warn("WAL mount", "path", path, "mount", res.Mount.Point, "option", p.Option, "why", p.Why)
		}
		if err := res.Err(); err != nil {
			if !c.WALMountUnsafeOK {
				return fmt.Errorf("broker: %w (--wal-root-unsafe-mount-ok starts anyway)", err)
			}
			log.Error("starting on an unsafe WAL mount (--wal-root-unsafe-mount-ok)", "err", err)
		}
	}
	return nil
}

// noZeroFill decides wal.Config.NoZeroFill for a WAL in dir (WALZeroFill): auto skips
// the zero-fill on a network or FUSE file system (the mount holding dir), keeps it on a
// local one and where the mount cannot be told.
func (c *Config) noZeroFill(dir string) (skip bool, why string) {
	switch c.WALZeroFill {
	case "on":
		return false, "--wal-zero-fill on"
	case "off":
		return true, "--wal-zero-fill off"
	}
	if c.WAL.NoZeroFill {
		return true, "configured"
	}
	info := c.MountInfo
	if info == "" {
		info = mountcheck.DefaultMountInfo
	}
	res, err := mountcheck.CheckPath(dir, info)
	if err != nil {
		return false, "mount unknown: " + err.Error()
	}
	t := res.Mount.FSType
	if strings.HasPrefix(t, "nfs") || t == "fuse" || strings.HasPrefix(t, "fuse.") || t == "cifs" || t == "smb3" {
		return true, "the WAL is on " + t
	}
	return false, "the WAL is on " + t
}
