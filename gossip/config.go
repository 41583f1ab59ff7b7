package gossip

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults, tuned for fast failure detection on a LAN (one region, several zones). With
// them a crashed or paused broker is declared dead by its peers in about half a second
// (see the package doc for the arithmetic and the measured numbers). Gossip only hints:
// the controllers fence a broker only once a majority of them has not heard its
// heartbeats for their suspect timeout (controller/leases.go), so a false verdict on a
// slow machine costs nothing while the broker heartbeats.
const (
	DefaultBindAddr = "0.0.0.0:7946"
	DefaultCluster  = "weir"

	// DefaultProbeInterval is how often each member probes one other member
	// (round robin). memberlist's LAN default is 1 s.
	DefaultProbeInterval = 100 * time.Millisecond
	// DefaultProbeTimeout is how long a direct probe waits for its ack before indirect
	// probes through other members start. Must be well above the inter-zone RTT
	// (typically < 2 ms). memberlist's LAN default is 500 ms.
	DefaultProbeTimeout = 50 * time.Millisecond
	// DefaultSuspicionMult sets the minimum suspicion timeout: SuspicionMult ×
	// ProbeInterval × max(1, log10(members)) = 400 ms for up to 10 brokers.
	DefaultSuspicionMult = 4
	// DefaultSuspicionMaxTimeoutMult caps the suspicion timeout (Lifeguard) at this
	// multiple of the minimum while no other member confirms the suspicion.
	DefaultSuspicionMaxTimeoutMult = 3
	// DefaultGossipInterval is how often queued broadcasts (alive, suspect, dead) are
	// sent to GossipNodes random members.
	DefaultGossipInterval = 100 * time.Millisecond
	// DefaultGossipNodes is the gossip fan-out.
	DefaultGossipNodes = 3
	// DefaultPushPullInterval is the period of full state syncs over TCP (anti-entropy).
	// Broker clusters are small, so a sync is cheap; a short period heals missed
	// broadcasts, e.g. a broker restarted at a new address before its old self was
	// declared dead.
	DefaultPushPullInterval = 5 * time.Second
	// DefaultJoinRetryInterval is the first delay between attempts to join the seeds;
	// it doubles up to DefaultJoinRetryMax.
	DefaultJoinRetryInterval = 250 * time.Millisecond
	DefaultJoinRetryMax      = 5 * time.Second
)

// Config configures one broker's gossip member.
type Config struct {
	// Identity announced to the other members in the node metadata.
	BrokerID  int32  // the broker's id, ≥ 0; unique in the cluster
	Zone      string // availability zone (Kafka rack); may be empty
	KafkaAddr string // the advertised Kafka listener, host:port
	Epoch     int64  // broker epoch from the controller (0 before registration)

	// Cluster names the gossip cluster. It is sent as memberlist's label on every
	// packet, so members of different clusters that reach each other do not merge.
	// Empty means no label. Default "weir".
	Cluster string

	// BindAddr is the gossip address, ip:port or hostname:port, for both TCP and
	// UDP. Port 0 picks a free port (tests); the advertised port is then the picked one.
	BindAddr string
	// AdvertiseAddr is the address other members use to reach this one (NAT,
	// containers). Optional: by default the bind address, or the first private IP when
	// binding to 0.0.0.0.
	AdvertiseAddr string
	// Seeds are other members' gossip addresses. Start joins them in the background,
	// retrying (with backoff) until one answers and again whenever this member knows no
	// live peer, so start-up order does not matter and an isolated member rejoins. An entry equal to
	// this member's own address is skipped, so every broker can get the same list.
	Seeds []string

	// Failure detector tuning; zero means the default above.
	ProbeInterval           time.Duration
	ProbeTimeout            time.Duration
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	GossipInterval          time.Duration
	GossipNodes             int
	PushPullInterval        time.Duration

	// JoinRetryInterval and JoinRetryMax bound the backoff between join attempts;
	// zero means the default.
	JoinRetryInterval time.Duration
	JoinRetryMax      time.Duration

	// SecretKey, if set (16, 24 or 32 bytes), encrypts gossip with AES-GCM. All
	// members must share it; memberlist then drops every packet and stream that is not
	// encrypted with a key it holds (GossipVerifyIncoming), so a member without it never
	// joins. OldKeys are further keys accepted from others but not used to send (key
	// rotation: add the new key to OldKeys everywhere, then make it SecretKey
	// everywhere, then drop the old one). --gossip-key-file fills both (LoadKeyFile).
	SecretKey []byte
	OldKeys   [][]byte

	// Logger receives this package's and memberlist's log output (memberlist's
	// [DEBUG]/[INFO]/[WARN]/[ERR] map to slog levels). Nil discards it.
	Logger *slog.Logger
	// Registerer, if set, gets the package's metrics (weir_gossip_*). They are
	// registered by Start and unregistered by Leave/Close.
	Registerer prometheus.Registerer

	// Count, if set, is told every byte gossip sends (out) and receives (!out): each
	// UDP packet and each read or write of a TCP stream, as memberlist puts them on the
	// wire (label, encryption and compression included; IP/UDP/TCP headers not). peerAddr
	// is the other end's host:port: the address a packet went to or came from (a
	// member's gossip address) or a stream was dialed to; for a stream a peer opened it
	// is the stream's remote address, whose port is ephemeral (PeerZone resolves both).
	// It runs on memberlist's I/O paths: it must be quick and must not block or call
	// into this package other than PeerZone. Nil: memberlist's own transport, nothing
	// counted.
	Count func(peerAddr string, out bool, n int)

	// Transport, if set, makes the memberlist transport in place of UDP and TCP sockets
	// bound at BindAddr: tests run members on an in-memory network with it (and fake
	// time, testing/synctest). It gets BindAddr resolved (host an IP, port 0 to pick
	// one) and must listen there; the address members advertise is the one its
	// FinalAdvertiseAddr returns, and for port 0 the one its GetAutoBindPort() int
	// method returns if it has one (memberlist's NetTransport has). Count still sees
	// every byte through it. Start calls it once; memberlist shuts the transport down
	// on Leave or Close. Nil: memberlist's NetTransport.
	Transport func(bindIP string, bindPort int) (memberlist.NodeAwareTransport, error)
}

// DefaultConfig returns a Config with the documented defaults. The broker identity
// (BrokerID, Zone, KafkaAddr, Epoch) must still be filled in.
func DefaultConfig() Config {
	return Config{
		Cluster:                 DefaultCluster,
		BindAddr:                DefaultBindAddr,
		ProbeInterval:           DefaultProbeInterval,
		ProbeTimeout:            DefaultProbeTimeout,
		SuspicionMult:           DefaultSuspicionMult,
		SuspicionMaxTimeoutMult: DefaultSuspicionMaxTimeoutMult,
		GossipInterval:          DefaultGossipInterval,
		GossipNodes:             DefaultGossipNodes,
		PushPullInterval:        DefaultPushPullInterval,
		JoinRetryInterval:       DefaultJoinRetryInterval,
		JoinRetryMax:            DefaultJoinRetryMax,
	}
}

// withDefaults returns c with zero tuning fields replaced by the defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ProbeInterval == 0 {
		c.ProbeInterval = d.ProbeInterval
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = d.ProbeTimeout
	}
	if c.SuspicionMult == 0 {
		c.SuspicionMult = d.SuspicionMult
	}
	if c.SuspicionMaxTimeoutMult == 0 {
		c.SuspicionMaxTimeoutMult = d.SuspicionMaxTimeoutMult
	}
	if c.GossipInterval == 0 {
		c.GossipInterval = d.GossipInterval
	}
	if c.GossipNodes == 0 {
		c.GossipNodes = d.GossipNodes
	}
	if c.PushPullInterval == 0 {
		c.PushPullInterval = d.PushPullInterval
	}
	if c.JoinRetryInterval == 0 {
		c.JoinRetryInterval = d.JoinRetryInterval
	}
	if c.JoinRetryMax == 0 {
		c.JoinRetryMax = d.JoinRetryMax
	}
	return c
}

// Validate reports every problem with c (zero tuning fields count as defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("gossip: "+format, args...)) }

	if err := checkMember(Member{BrokerID: c.BrokerID, Zone: c.Zone, KafkaAddr: c.KafkaAddr, Epoch: c.Epoch}); err != nil {
		errs = append(errs, err)
	}
	if len(c.Cluster) > 255 {
		add("cluster name is longer than 255 bytes")
	}
	if err := checkHostPort(c.BindAddr, true); err != nil {
		add("bind address: %v", err)
	}
	if c.AdvertiseAddr != "" {
		if err := checkHostPort(c.AdvertiseAddr, true); err != nil {
			add("advertise address: %v", err)
		}
	}
	for _, s := range c.Seeds {
		if err := checkHostPort(s, false); err != nil {
			add("seed: %v", err)
		}
	}
	if c.ProbeInterval < 0 || c.ProbeTimeout < 0 || c.GossipInterval < 0 || c.PushPullInterval < 0 ||
		c.JoinRetryInterval < 0 || c.JoinRetryMax < 0 {
		add("durations must not be negative")
	}
	if c.ProbeTimeout >= c.ProbeInterval {
		add("probe timeout %v must be shorter than the probe interval %v", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.SuspicionMult < 1 {
		add("suspicion multiplier %d must be ≥ 1", c.SuspicionMult)
	}
	if c.SuspicionMaxTimeoutMult < 1 {
		add("suspicion max timeout multiplier %d must be ≥ 1", c.SuspicionMaxTimeoutMult)
	}
	if c.GossipNodes < 1 {
		add("gossip fan-out %d must be ≥ 1", c.GossipNodes)
	}
	if c.JoinRetryMax < c.JoinRetryInterval {
		add("join retry max %v is below the join retry interval %v", c.JoinRetryMax, c.JoinRetryInterval)
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		add("secret key must be 16, 24 or 32 bytes, not %d", len(c.SecretKey))
	}
	for _, k := range c.OldKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			add("old secret key must be 16, 24 or 32 bytes, not %d", n)
		}
	}
	if len(c.OldKeys) > 0 && len(c.SecretKey) == 0 {
		add("old secret keys without a secret key")
	}
	return errors.Join(errs...)
}

// BindFlags registers the gossip command-line flags on fs, with c's current values as
// defaults: --gossip-addr, --gossip-advertise-addr and --gossip-seeds (comma list).
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.BindAddr, "gossip-addr", c.BindAddr, "gossip bind address host:port (TCP and UDP)")
	fs.StringVar(&c.AdvertiseAddr, "gossip-advertise-addr", c.AdvertiseAddr, "gossip address other brokers use to reach this one (default: the bind address)")
	fs.Var((*seedList)(&c.Seeds), "gossip-seeds", "comma-separated gossip addresses of other brokers to join")
	fs.Func("gossip-key-file", "file of the gossip encryption key(s), one per line, each 16, 24 or 32 bytes as base64 (e.g. from openssl rand -base64 32): "+
		"gossip is encrypted (AES-GCM) and members without the key are refused; the first key encrypts, every key is accepted (rotation)", func(path string) error {
		keys, err := LoadKeyFile(path)
		if err != nil {
			return err
		}
		c.SecretKey, c.OldKeys = keys[0], keys[1:]
		return nil
	})
}

// LoadKeyFile reads gossip encryption keys: one per line (blank lines and # comments
// skipped), each base64 (standard or URL alphabet, padded or not) of 16, 24 or 32
// bytes. A file holding exactly one raw 16, 24 or 32-byte key is accepted too.
func LoadKeyFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip: key file: %w", err)
	}
	keys, err := parseKeys(b)
	if n := len(b); err != nil && (n == 16 || n == 24 || n == 32) {
		return [][]byte{b}, nil // a raw key
	}
	if err != nil {
		return nil, fmt.Errorf("gossip: key file %s: %w", path, err)
	}
	return keys, nil
}

func parseKeys(b []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := decodeKey(line)
		if err != nil {
			// The line number only: key material must not reach a log.
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in it")
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if n := len(k); n != 16 && n != 24 && n != 32 {
				return nil, fmt.Errorf("a key of %d bytes: want 16, 24 or 32", n)
			}
			return k, nil
		}
	}
	return nil, errors.New("not base64")
}

// seedList is a flag.Value for a comma-separated address list.
type seedList []string

func (s *seedList) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(*s, ",")
}

func (s *seedList) Set(v string) error {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	*s = out
	return nil
}
