package controller

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security/tlsconf"
)

// Peers is the static peer list; as a flag.Value it parses
// "1=raftHost:port/apiHost:port,2=raftHost:port/apiHost:port,...".
type Peers []ctlwire.Peer

// ParsePeers parses "1=raftHost:port/apiHost:port,2=...".
func ParsePeers(s string) (Peers, error) {
	var ps Peers
	if err := ps.Set(s); err != nil {
		return nil, err
	}
	return ps, nil
}

// String implements flag.Value.
func (p *Peers) String() string {
	if p == nil {
		return ""
	}
	parts := make([]string, len(*p))
	for i, x := range *p {
		parts[i] = fmt.Sprintf("%d=%s/%s", x.ID, x.RaftAddr, x.APIAddr)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (p *Peers) Set(s string) error {
	var out Peers
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		idStr, addrs, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("peer %q: want id=raftHost:port/apiHost:port", item)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idStr), 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("peer %q: bad id", item)
		}
		raftAddr, apiAddr, ok := strings.Cut(addrs, "/")
		if !ok {
			return fmt.Errorf("peer %q: want id=raftHost:port/apiHost:port", item)
		}
		for _, a := range []string{raftAddr, apiAddr} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("peer %q: address %q: %v", item, a, err)
			}
		}
		out = append(out, ctlwire.Peer{ID: int32(id), RaftAddr: raftAddr, APIAddr: apiAddr})
	}
	*p = out
	return nil
}

// Config configures one controller.
type Config struct {
	// NodeID is this controller's ID; it must appear in Peers.
	NodeID int32
	// RaftAddr and APIAddr are the bind addresses; empty means this node's Peers entry.
	// The Peers entry is what the others dial (the advertised address).
	RaftAddr string
	APIAddr  string
	// DataDir holds raft.db (bolt: log and stable store) and snapshots/. It may be empty
	// when LogStore, StableStore and SnapshotStore are all injected.
	DataDir string
	// Peers is the static quorum (3 or 5 voters), identical on every controller. A
	// controller without Raft state bootstraps the cluster with it; one with state ignores it
	// for Raft membership and uses it only to find the others' API addresses.
	Peers Peers

	// Raft timing: fast defaults for a LAN.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot trigger the next
	// one (checked every SnapshotInterval); TrailingLogs stay in the log after it.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// ApplyTimeout bounds how long a proposal may wait to be enqueued.
	ApplyTimeout time.Duration

	// The leader proposes to fence a broker whose last heartbeat arrived more than
	// LeaseTimeout+LeaseGrace ago, more than SuspectTimeout ago when its heartbeat
	// connection closed since, or more than ReportedTimeout ago when gossip reported it
	// dead since; the fence
	// needs the votes of a majority of controllers, each silent about the broker for
	// SuspectTimeout (leases.go). The lease every controller grants brokers
	// (GrantedLease, in every register and heartbeat answer) is SuspectTimeout -
	// LeaseSafetyMargin, counted by the broker from the send time of the heartbeat a
	// majority acknowledged. Defaults (DefaultConfig, DESIGN.md "Leases"): LeaseTimeout
	// 2 s + LeaseGrace 250 ms (2.25 s of silence with no other evidence), SuspectTimeout
	// 400 ms, so a granted lease of 400 - 100 = 300 ms, ReportedTimeout 800 ms, looked
	// for every LeaseCheckInterval (25 ms): a killed broker is fenced 300 to 400 ms after
	// it died (plus a vote round and a Raft commit), a paused one once gossip reports it
	// (about 0.6 s) and 800 ms after its last heartbeat.
	LeaseTimeout   time.Duration
	LeaseGrace     time.Duration
	SuspectTimeout time.Duration
	// ReportedTimeout is the silence after which the leader proposes to fence a broker
	// gossip reported dead (default 800 ms): longer than SuspectTimeout, since a
	// process starved of CPU fails its gossip probes as a dead one does, and a fence
	// costs a restart. It is used clamped to [SuspectTimeout, LeaseTimeout+LeaseGrace]
	// (fenceAfter).
	ReportedTimeout time.Duration
	// LeaseCheckInterval is how often the leader looks for expired leases (default 25 ms).
	LeaseCheckInterval time.Duration
	// LeaderWaitTimeout is how long a follower holds a write while no leader is known
	// (during an election) before answering not_leader.
	LeaderWaitTimeout time.Duration

	// DefaultPartitions is used for CreateTopics with -1 partitions; MaxPartitions bounds
	// a topic.
	DefaultPartitions int32
	MaxPartitions     int32
	// MaxBodyBytes bounds a request body; MaxWatchWait bounds a metadata long poll.
	MaxBodyBytes int64
	MaxWatchWait time.Duration

	// The balancer (leader only, balancer.go) spreads partition leadership over the
	// accepting brokers and zones by graceful moves, and moves what a draining broker
	// still leads: one decision round every BalanceInterval, at most BalanceMaxMoves
	// partitions moving at a time (moves of every cause count) but for a catch-up (a
	// broker short of its share of partitions, one that joined or returned, gets it
	// half a share at a time: balancer.go), a partition it moved left alone for
	// BalanceCooldown, and no move between two brokers within BalanceCooldown of one it
	// made the other way (both remembered only while the brokers keep their
	// registrations). Balance false turns it off (flags --balance, --balance-max-moves,
	// --balance-interval, --balance-cooldown).
	Balance         bool
	BalanceMaxMoves int
	BalanceInterval time.Duration
	BalanceCooldown time.Duration

	// TokenFile names the cluster token file (security/token, --cluster-token-file):
	// when set, API callers must send one of its tokens as a bearer token (auth.go).
	// TLS serves the API over TLS when CertFile is set (--controller-tls-*); with
	// ClientAuth request or require a verified client certificate authenticates too.
	TokenFile string
	TLS       tlsconf.Files
	// Authorizer "acl" says the brokers enforce ACLs (--authorizer acl): the API then
	// must authenticate its callers (a token file or client certificates), or anyone who
	// reaches it could grant themselves ALL and read the SCRAM keys.
	Authorizer string
	// InsecurePlaintextToken allows a token file without TLS on the API: the token then
	// crosses the network in the clear (--insecure-plaintext-token).
	InsecurePlaintextToken bool
	// CertPrincipals are the client-certificate principals (the subject DN mapped by
	// PrincipalRules, tlsconf) the API accepts as callers: a certificate of the CA alone
	// is not enough, since the same CA may sign the brokers' Kafka client certificates
	// (--controller-tls-principals, --controller-tls-principal-mapping-rules).
	CertPrincipals []string
	PrincipalRules string
	// RaftPrincipals pin the principals of the controllers' certificates on Raft's
	// mutual TLS (raft_tls.go, --raft-tls-principals); empty: any certificate of the CA.
	RaftPrincipals []string
	// RaftTLS runs Raft between controllers over mutual TLS with the TLS files
	// (raft_tls.go, --raft-tls).
	RaftTLS bool

	// Logger receives the controller's and raft's logs (nil: discarded).
	Logger *slog.Logger
	// Registerer receives the metrics, labelled controller=<NodeID> (nil: a private
	// registry; never the global one).
	Registerer prometheus.Registerer

	// RaftListener and APIListener, when set, are used instead of binding RaftAddr and
	// APIAddr (tests and embedders bind port 0 first, then build Peers). The Controller
	// owns and closes them.
	RaftListener net.Listener
	APIListener  net.Listener

	// RaftTransport, LogStore, StableStore and SnapshotStore, when set, replace what the
	// controller builds itself: the TCP transport on RaftAddr (or RaftListener), the
	// bolt log and stable store in DataDir/raft.db, the file snapshots in
	// DataDir/snapshots. Nil keeps that default, so `weir controller` never sets them.
	// They exist so tests can run a quorum without sockets or files
	// (raft.NewInmemTransport, NewInmemStore, NewInmemSnapshotStore) and cut its connections
	// at will.
	//
	// The transport's LocalAddr must be this node's RaftAddr in Peers, because the
	// bootstrap configuration names every voter by that address; it cannot be combined
	// with RaftListener. Like the listeners, the Controller closes the transport (if it
	// has a Close method, raft.WithClose). The stores stay the caller's and stay open:
	// a controller started again on the same stores comes back with its Raft state, as
	// one started again on the same DataDir does.
	RaftTransport raft.Transport
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
}

// DefaultConfig returns a configuration with the defaults; NodeID, DataDir and Peers
// must still be set.
func DefaultConfig() Config {
	return Config{
		NodeID:             1,
		DataDir:            "data/controller",
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      10 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		ApplyTimeout:       5 * time.Second,
		LeaseTimeout:       2 * time.Second,
		LeaseGrace:         250 * time.Millisecond,
		SuspectTimeout:     400 * time.Millisecond,
		ReportedTimeout:    800 * time.Millisecond,
		LeaseCheckInterval: 25 * time.Millisecond,
		LeaderWaitTimeout:  5 * time.Second,
		DefaultPartitions:  1,
		MaxPartitions:      100000,
		MaxBodyBytes:       4 << 20,
		MaxWatchWait:       60 * time.Second,
		Balance:            true,
		BalanceMaxMoves:    4,
		BalanceInterval:    3 * time.Second,
		BalanceCooldown:    5 * time.Minute,
	}
}

// BindFlags registers the controller's flags on fs.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.Func("node-id", "this controller's ID (must appear in --peers)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("bad node id %q", s)
		}
		c.NodeID = int32(n)
		return nil
	})
	fs.StringVar(&c.RaftAddr, "raft-addr", c.RaftAddr, "Raft bind address (default: this node's --peers entry)")
	fs.StringVar(&c.APIAddr, "api-addr", c.APIAddr, "controller API bind address (default: this node's --peers entry)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the Raft log (raft.db) and snapshots")
	fs.Var(&c.Peers, "peers", `static quorum, the same on every controller: "1=raftHost:port/apiHost:port,2=..."`)
	fs.DurationVar(&c.HeartbeatTimeout, "raft-heartbeat-timeout", c.HeartbeatTimeout, "Raft follower timeout before an election")
	fs.DurationVar(&c.ElectionTimeout, "raft-election-timeout", c.ElectionTimeout, "Raft candidate timeout")
	fs.DurationVar(&c.LeaderLeaseTimeout, "raft-leader-lease-timeout", c.LeaderLeaseTimeout, "Raft leader steps down after this long without a quorum")
	fs.DurationVar(&c.CommitTimeout, "raft-commit-timeout", c.CommitTimeout, "longest a follower waits to learn a commit when the leader is idle")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", c.SnapshotThreshold, "log entries between snapshots")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "how often to check the snapshot threshold")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", c.TrailingLogs, "log entries kept after a snapshot")
	fs.DurationVar(&c.LeaseTimeout, "lease-timeout", c.LeaseTimeout, "a broker silent this long (+ --lease-grace) is fenced and its partitions fail over, even if nothing says it is gone")
	fs.DurationVar(&c.LeaseGrace, "lease-grace", c.LeaseGrace, "extra time before the controller fences a silent broker")
	fs.DurationVar(&c.ReportedTimeout, "reported-timeout", c.ReportedTimeout, "a broker gossip reported dead is fenced when silent this long (between --suspect-timeout and --lease-timeout + --lease-grace)")
	fs.DurationVar(&c.SuspectTimeout, "suspect-timeout", c.SuspectTimeout, "a broker whose heartbeat connection closed (its process died) is fenced when silent this long, "+
		"and a controller votes for a fence only after this long without the broker's heartbeat; brokers are granted a lease of suspect-timeout - 100ms, "+
		"which must be at least 2 x 100ms")
	fs.Func("default-partitions", "partitions for topics created with -1", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return err
		}
		c.DefaultPartitions = int32(n)
		return nil
	})
	fs.Func("max-partitions", "most partitions one topic may have", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return err
		}
		c.MaxPartitions = int32(n)
		return nil
	})
	fs.BoolVar(&c.Balance, "balance", c.Balance, "the leader spreads partition leadership over brokers and zones by graceful moves (and moves what draining brokers still lead)")
	fs.IntVar(&c.BalanceMaxMoves, "balance-max-moves", c.BalanceMaxMoves, "most partitions moving at a time before the balancer starts another move (a catch-up, partitions for a broker short of its share, may have half a share moving)")
	fs.DurationVar(&c.BalanceInterval, "balance-interval", c.BalanceInterval, "time between two balancer decision rounds")
	fs.DurationVar(&c.BalanceCooldown, "balance-cooldown", c.BalanceCooldown, "the balancer leaves a partition it moved alone this long, and makes no move back between two brokers within it")
	c.bindSecurityFlags(fs)
}

// Validate checks the configuration and fills RaftAddr/APIAddr from Peers.
func (c *Config) Validate() error {
	if len(c.Peers) == 0 {
		return errors.New("controller: no peers")
	}
	c.Peers = append(Peers(nil), c.Peers...) // sorted below; never touch the caller's slice
	seen := map[int32]bool{}
	var self *ctlwire.Peer
	for i := range c.Peers {
		p := &c.Peers[i]
		if seen[p.ID] {
			return fmt.Errorf("controller: peer %d listed twice", p.ID)
		}
		seen[p.ID] = true
		if p.RaftAddr == "" || p.APIAddr == "" {
			return fmt.Errorf("controller: peer %d needs a raft and an API address", p.ID)
		}
		if p.ID == c.NodeID {
			self = p
		}
	}
	sort.Slice(c.Peers, func(i, j int) bool { return c.Peers[i].ID < c.Peers[j].ID })
	if self == nil {
		return fmt.Errorf("controller: node id %d is not in the peer list", c.NodeID)
	}
	if c.RaftAddr == "" {
		c.RaftAddr = c.peer(c.NodeID).RaftAddr
	}
	if c.APIAddr == "" {
		c.APIAddr = c.peer(c.NodeID).APIAddr
	}
	if c.DataDir == "" && (c.LogStore == nil || c.StableStore == nil || c.SnapshotStore == nil) {
		return errors.New("controller: no data dir")
	}
	if c.RaftTransport != nil {
		if c.RaftListener != nil {
			return fmt.Errorf("%w: both a raft transport and a raft listener", ErrBadConfig)
		}
		if got, want := string(c.RaftTransport.LocalAddr()), c.peer(c.NodeID).RaftAddr; got != want {
			return fmt.Errorf("%w: the raft transport's address %q is not peer %d's raft address %q", ErrBadConfig, got, c.NodeID, want)
		}
	}
	if c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < c.HeartbeatTimeout {
		return errors.New("controller: need heartbeat timeout >= 5ms and election timeout >= heartbeat timeout")
	}
	if c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return errors.New("controller: need 5ms <= leader lease timeout <= heartbeat timeout")
	}
	if c.CommitTimeout < time.Millisecond {
		return errors.New("controller: commit timeout below 1ms")
	}
	if c.SnapshotThreshold == 0 || c.SnapshotInterval < 5*time.Millisecond {
		return errors.New("controller: need snapshot threshold > 0 and snapshot interval >= 5ms")
	}
	if c.ApplyTimeout <= 0 || c.LeaseTimeout <= 0 || c.LeaseGrace < 0 || c.SuspectTimeout <= 0 || c.LeaseCheckInterval <= 0 || c.LeaderWaitTimeout < 0 {
		return errors.New("controller: apply/lease/suspect timeouts and the lease check interval must be positive")
	}
	if g := c.GrantedLease(); g < 2*ctlwire.MinHeartbeatInterval {
		return fmt.Errorf("%w: the lease granted to brokers, suspect timeout %v - margin %v = %v, "+
			"must be at least 2 x the minimum heartbeat interval %v", ErrBadConfig, c.SuspectTimeout, LeaseSafetyMargin, g, ctlwire.MinHeartbeatInterval)
	}
	if c.LeaseTimeout+c.LeaseGrace < c.SuspectTimeout {
		return fmt.Errorf("%w: lease timeout %v + lease grace %v is below the suspect timeout %v: a broker nothing says is gone would be fenced sooner than one whose connection closed",
			ErrBadConfig, c.LeaseTimeout, c.LeaseGrace, c.SuspectTimeout)
	}
	if c.MaxPartitions <= 0 {
		return errors.New("controller: max partitions must be positive")
	}
	if c.DefaultPartitions <= 0 || c.DefaultPartitions > c.MaxPartitions {
		return fmt.Errorf("controller: default partitions must be 1..%d", c.MaxPartitions)
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.MaxBodyBytes <= 0 || c.MaxWatchWait <= 0 {
		return errors.New("controller: max body bytes and max watch wait must be positive")
	}
	if c.Balance && (c.BalanceMaxMoves < 1 || c.BalanceInterval < 10*time.Millisecond || c.BalanceCooldown < 0) {
		return fmt.Errorf("%w: the balancer needs max moves >= 1 (%d), an interval >= 10ms (%v) and a cooldown >= 0 (%v)",
			ErrBadConfig, c.BalanceMaxMoves, c.BalanceInterval, c.BalanceCooldown)
	}
	return nil
}

// LeaseSafetyMargin is taken off the granted lease for clock-rate differences between
// a broker and the controller and for scheduling delays (GrantedLease).
const LeaseSafetyMargin = 100 * time.Millisecond

// GrantedLease is the lease the controller grants brokers: how long after sending a
// heartbeat (or registration) that a majority of the controllers acknowledged a
// broker may go on acking.
//
// It must end before any fence, whoever proposes it: a fence needs the votes of a
// majority of controllers, and a controller votes only after SuspectTimeout without a
// heartbeat *received* (leases.go has the argument); the broker counts from the
// heartbeat's *send* time, earlier than any receipt, on a clock that keeps running
// while the machine is paused (CLOCK_BOOTTIME), so
//
//	GrantedLease = SuspectTimeout - LeaseSafetyMargin
//
// keeps its deadline earlier than any fence, LeaseSafetyMargin covering clock-rate
// differences. No Raft leader takes part (a deposed one no more than any other
// controller), so leases hold through an election.
func (c *Config) GrantedLease() time.Duration {
	return c.SuspectTimeout - LeaseSafetyMargin
}

// fenceAfter is how long the leader waits, by the evidence that a broker is gone,
// before it proposes a fence (leases.go): the weaker the evidence, the longer.
func (c *Config) fenceAfter() fenceAfter {
	silent := c.LeaseTimeout + c.LeaseGrace
	return fenceAfter{Closed: c.SuspectTimeout, Reported: min(max(c.ReportedTimeout, c.SuspectTimeout), silent), Silent: silent}
}

func (c *Config) peer(id int32) *ctlwire.Peer {
	for i := range c.Peers {
		if c.Peers[i].ID == id {
			return &c.Peers[i]
		}
	}
	return nil
}
