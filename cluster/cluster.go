package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
)

// Config describes a whole cluster in one process.
type Config struct {
	// Dir holds everything: controller-<id>/, broker-<id>/ (local state), wal/ (the shared
	// WAL root) and objects/ (the object store directory).
	Dir         string
	Controllers int      // 3 or 5 (1 works for quick experiments)
	Brokers     int      // brokers get IDs 1..n
	Zones       []string // broker i is in Zones[i % len]; default a, b, c
	// KafkaAddrs, GossipAddrs, RaftAddrs and APIAddrs fix listen addresses; missing
	// entries get a free loopback port.
	KafkaAddrs, GossipAddrs, RaftAddrs, APIAddrs []string
	// NoGossip runs without memberlist (liveness by leases only).
	NoGossip bool
	// ControllerConfig and BrokerConfig adjust each node's configuration.
	ControllerConfig func(*controller.Config)
	BrokerConfig     func(*broker.Config)
	ClientConfig     func(*ctlclient.ClientConfig)
	GossipConfig     func(*gossip.Config)
	Logger           *slog.Logger
	// Registerer receives every node's metrics, labelled by node (nil: none shared).
	Registerer prometheus.Registerer
	// Objects is the object store every broker shares; nil: localfs in Dir/objects. Set
	// broker.Config.Objects to nil in BrokerConfig to run without the object tier.
	Objects objectstore.Store
}

// Cluster is a running in-process cluster.
type Cluster struct {
	cfg   Config
	peers controller.Peers
	log   *slog.Logger

	mu          sync.Mutex
	closing     bool                     // Close began: no restarts
	supervisors sync.WaitGroup           // superviseBroker goroutines; Close waits for them
	controllers []*controller.Controller // nil while stopped
	brokers     []*BrokerNode            // nil while stopped
	kafka       []string                 // "" until the broker first bound its port
	gossipAddrs []string                 // likewise; "off" without gossip
	// listeners bound before the first start of each controller, so no other process
	// can take a port between choosing it and binding it.
	raftLns, apiLns []net.Listener
}

// Start starts the controllers, waits for a Raft leader, then starts the brokers.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Controllers < 1 || cfg.Brokers < 1 {
		return nil, errors.New("cluster: need at least one controller and one broker")
	}
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{"a", "b", "c"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, controllers: make([]*controller.Controller, cfg.Controllers), brokers: make([]*BrokerNode, cfg.Brokers)}
	for _, d := range []string{"wal", "objects"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if cfg.Objects == nil {
		st, err := localfs.Open(filepath.Join(cfg.Dir, "objects"))
		if err != nil {
			return nil, err
		}
		c.cfg.Objects = st
	}
	c.raftLns = make([]net.Listener, cfg.Controllers)
	c.apiLns = make([]net.Listener, cfg.Controllers)
	for i := 0; i < cfg.Controllers; i++ {
		raftLn, err := listenAt(cfg.RaftAddrs, i)
		if err != nil {
			c.closeListeners()
			return nil, err
		}
		c.raftLns[i] = raftLn
		apiLn, err := listenAt(cfg.APIAddrs, i)
		if err != nil {
			c.closeListeners()
			return nil, err
		}
		c.apiLns[i] = apiLn
		c.peers = append(c.peers, ctlwire.Peer{ID: int32(i + 1), RaftAddr: raftLn.Addr().String(), APIAddr: apiLn.Addr().String()})
	}
	for i := 0; i < cfg.Brokers; i++ {
		c.kafka = append(c.kafka, at(cfg.KafkaAddrs, i))
		g := at(cfg.GossipAddrs, i)
		if cfg.NoGossip {
			g = "off"
		}
		c.gossipAddrs = append(c.gossipAddrs, g)
	}
	for i := range c.controllers {
		if err := c.StartController(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range c.brokers {
		if err := c.StartBroker(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// at returns addrs[i], or "" (bind a free port at first start).
func at(addrs []string, i int) string {
	if i < len(addrs) {
		return addrs[i]
	}
	return ""
}

// listenAt binds addrs[i], or a free loopback port.
func listenAt(addrs []string, i int) (net.Listener, error) {
	addr := at(addrs, i)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

func (c *Cluster) closeListeners() {
	for i := range c.raftLns {
		if c.raftLns[i] != nil {
			c.raftLns[i].Close()
			c.raftLns[i] = nil
		}
		if c.apiLns[i] != nil {
			c.apiLns[i].Close()
			c.apiLns[i] = nil
		}
	}
}

// StartController starts (or restarts, from its data directory) controller i.
func (c *Cluster) StartController(i int) error {
	cfg := controller.DefaultConfig()
	cfg.NodeID = c.peers[i].ID
	cfg.DataDir = filepath.Join(c.cfg.Dir, fmt.Sprintf("controller-%d", cfg.NodeID))
	cfg.Peers = c.peers
	c.mu.Lock()
	// The first start uses the listeners bound in Start; restarts bind the same addresses.
	cfg.RaftListener, cfg.APIListener = c.raftLns[i], c.apiLns[i]
	c.raftLns[i], c.apiLns[i] = nil, nil
	c.mu.Unlock()
	cfg.Logger = c.log.With("controller", cfg.NodeID)
	if c.cfg.Registerer != nil {
		cfg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprintf("controller-%d", cfg.NodeID)}, c.cfg.Registerer)
	}
	if c.cfg.ControllerConfig != nil {
		c.cfg.ControllerConfig(&cfg)
	}
	ctl, err := controller.New(cfg)
	if err != nil {
		return err
	}
	if err := ctl.Start(); err != nil {
		ctl.Close()
		return err
	}
	c.mu.Lock()
	c.controllers[i] = ctl
	c.mu.Unlock()
	return nil
}

// StopController shuts controller i down (a crash, as far as Raft is concerned).
func (c *Cluster) StopController(i int) error {
	c.mu.Lock()
	ctl := c.controllers[i]
	c.controllers[i] = nil
	c.mu.Unlock()
	if ctl == nil {
		return nil
	}
	return ctl.Close()
}

// Controller returns controller i, or nil while it is stopped.
func (c *Cluster) Controller(i int) *controller.Controller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.controllers[i]
}

// LeaderController returns the controller that is Raft leader, waiting up to 30 s
// for one (an election on a loaded machine), or else the first running one (whose
// View may lag the leader's). Nil only when no controller runs.
func (c *Cluster) LeaderController() *controller.Controller {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if i := c.LeaderIndex(); i >= 0 {
			if ctl := c.Controller(i); ctl != nil {
				return ctl
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling for the end of an election
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ctl := range c.controllers {
		if ctl != nil {
			return ctl
		}
	}
	return nil
}

// LeaderIndex returns the index of the controller that is Raft leader, or -1.
func (c *Cluster) LeaderIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ctl := range c.controllers {
		if ctl != nil && ctl.IsLeader() {
			return i
		}
	}
	return -1
}

// APIAddrs are the controllers' API addresses.
func (c *Cluster) APIAddrs() []string {
	out := make([]string, len(c.peers))
	for i, p := range c.peers {
		out[i] = p.APIAddr
	}
	return out
}

// StartBroker starts (or restarts) broker i (ID i+1, zone Zones[i mod len]).
func (c *Cluster) StartBroker(i int) error {
	id := int32(i + 1)
	bcfg := broker.DefaultConfig()
	bcfg.NodeID = id
	bcfg.Rack = c.cfg.Zones[i%len(c.cfg.Zones)]
	c.mu.Lock()
	bcfg.ListenAddr = c.kafka[i]
	gossipAddr := c.gossipAddrs[i]
	var seeds []string
	for j, a := range c.gossipAddrs {
		if j != i && a != "" && a != "off" {
			seeds = append(seeds, a) // brokers not started yet join us later
		}
	}
	c.mu.Unlock()
	if bcfg.ListenAddr == "" {
		bcfg.ListenAddr = "127.0.0.1:0"
	}
	bcfg.DataDir = filepath.Join(c.cfg.Dir, fmt.Sprintf("broker-%d", id))
	bcfg.WALRoot = filepath.Join(c.cfg.Dir, "wal")
	bcfg.Objects = c.cfg.Objects
	if c.cfg.BrokerConfig != nil {
		c.cfg.BrokerConfig(&bcfg)
	}
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers = c.APIAddrs()
	if c.cfg.ClientConfig != nil {
		c.cfg.ClientConfig(&ccfg)
	}
	gcfg := gossip.DefaultConfig()
	switch gossipAddr {
	case "off":
		gcfg.BindAddr = ""
	case "":
		gcfg.BindAddr = "127.0.0.1:0"
	default:
		gcfg.BindAddr = gossipAddr
	}
	gcfg.Seeds = seeds
	if c.cfg.GossipConfig != nil {
		c.cfg.GossipConfig(&gcfg)
	}
	var reg prometheus.Registerer
	if c.cfg.Registerer != nil {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"node": fmt.Sprintf("broker-%d", id)}, c.cfg.Registerer)
	}
	n, err := StartBroker(BrokerOptions{Broker: bcfg, Client: ccfg, Gossip: gcfg, Logger: c.log.With("broker", id, "zone", bcfg.Rack), Registerer: reg})
	if err != nil {
		return fmt.Errorf("broker %d: %w", id, err)
	}
	c.mu.Lock()
	if c.closing {
		// A supervisor's restart raced Close, which has already passed this slot: a node
		// installed now would outlive Close (and write into the WAL root a test is
		// removing).
		c.mu.Unlock()
		n.Close()
		return fmt.Errorf("broker %d: %w", id, errClosing)
	}
	c.brokers[i] = n
	c.kafka[i] = n.Addr() // restarts come back on the same address
	if n.Gossip != nil {
		c.gossipAddrs[i] = n.Gossip.Addr()
	}
	c.supervisors.Add(1) // under mu, before Close can set closing and Wait
	c.mu.Unlock()
	go func() {
		defer c.supervisors.Done()
		c.superviseBroker(i, n)
	}()
	return nil
}

// errClosing refuses a broker start once Close began.
var errClosing = errors.New("cluster: closing")

// superviseBroker starts broker i again when it was fenced (its registration is over:
// another broker took its partitions over, or the controller fenced it while it was cut
// off): a new registration with a WAL of its own, as a supervisor (systemd, Kubernetes)
// restarts the `weir broker` process. A stopped or killed node is left alone.
func (c *Cluster) superviseBroker(i int, n *BrokerNode) {
	select {
	case <-n.Fenced():
	case <-n.Stopped():
		return
	}
	c.mu.Lock()
	if c.brokers[i] != n || c.closing {
		c.mu.Unlock()
		return
	}
	c.brokers[i] = nil
	c.mu.Unlock()
	c.log.Warn("broker was fenced; restarting it with a new registration", "broker", i+1)
	n.Close()
	delay := 100 * time.Millisecond
	for {
		c.mu.Lock()
		stop := c.closing || c.brokers[i] != nil
		c.mu.Unlock()
		if stop {
			return
		}
		err := c.StartBroker(i)
		if err == nil || errors.Is(err, errClosing) {
			return
		}
		c.log.Warn("restarting a fenced broker failed; retrying", "broker", i+1, "err", err)
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// StopBroker stops broker i gracefully; KillBroker as in a crash (no gossip leave).
func (c *Cluster) StopBroker(i int) error { return c.stopBroker(i, false) }

// KillBroker stops broker i without a graceful leave.
func (c *Cluster) KillBroker(i int) error { return c.stopBroker(i, true) }

func (c *Cluster) stopBroker(i int, kill bool) error {
	c.mu.Lock()
	n := c.brokers[i]
	c.brokers[i] = nil
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	if kill {
		n.Kill()
		return nil
	}
	return n.Close()
}

// Broker returns broker i, or nil while it is stopped.
func (c *Cluster) Broker(i int) *BrokerNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[i]
}

// Bootstrap is a comma-separated list of the brokers' Kafka addresses.
func (c *Cluster) Bootstrap() string { return strings.Join(c.KafkaAddrs(), ",") }

// KafkaAddrs are the brokers' Kafka addresses.
func (c *Cluster) KafkaAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.kafka...)
}

// Close stops every broker, then every controller.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	var errs []error
	for i := range c.brokers {
		errs = append(errs, c.StopBroker(i))
	}
	// A supervisor may be closing a fenced node or starting its successor (which
	// StartBroker then closes): wait, so no broker outlives Close.
	c.supervisors.Wait()
	for i := range c.controllers {
		errs = append(errs, c.StopController(i))
	}
	c.mu.Lock()
	c.closeListeners()
	c.mu.Unlock()
	return errors.Join(errs...)
}

// WaitLeader waits until a controller is Raft leader.
func (c *Cluster) WaitLeader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := c.LeaderIndex(); i >= 0 {
			return i, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1, errors.New("cluster: no controller leader")
}
