package controller

import (
	"errors"
	"flag"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

func TestConfigFlagsAndValidate(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("weir controller", flag.ContinueOnError)
	cfg.BindFlags(fs)
	err := fs.Parse([]string{
		"--node-id", "2", "--data-dir", "/tmp/x",
		"--peers", "1=10.0.0.1:7000/10.0.0.1:7001, 2=10.0.0.2:7000/10.0.0.2:7001,3=h3:7000/h3:7001",
		"--lease-timeout", "4s", "--raft-election-timeout", "800ms", "--default-partitions", "3",
		"--balance-max-moves", "8", "--balance-interval", "10s", "--balance-cooldown", "1m",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 2 || len(cfg.Peers) != 3 || cfg.RaftAddr != "10.0.0.2:7000" || cfg.APIAddr != "10.0.0.2:7001" ||
		cfg.LeaseTimeout != 4*time.Second || cfg.ElectionTimeout != 800*time.Millisecond || cfg.DefaultPartitions != 3 ||
		!cfg.Balance || cfg.BalanceMaxMoves != 8 || cfg.BalanceInterval != 10*time.Second || cfg.BalanceCooldown != time.Minute {
		t.Fatalf("parsed %+v", cfg)
	}
	// The balancer is on by default; --balance=false turns it off, and then its other
	// settings are not checked.
	off := DefaultConfig()
	fs = flag.NewFlagSet("weir controller", flag.ContinueOnError)
	off.BindFlags(fs)
	if err := fs.Parse([]string{"--balance=false", "--balance-max-moves", "0", "--peers", "1=a:1/a:2"}); err != nil {
		t.Fatal(err)
	}
	if err := off.Validate(); err != nil || off.Balance {
		t.Fatalf("--balance=false: %v, balance %v", err, off.Balance)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.BalanceMaxMoves = 0 },
		func(c *Config) { c.BalanceInterval = time.Millisecond },
		func(c *Config) { c.BalanceCooldown = -time.Second },
	} {
		c := DefaultConfig()
		c.Peers, _ = ParsePeers("1=a:1/a:2")
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("balancer settings %d/%v/%v: %v, want ErrBadConfig", c.BalanceMaxMoves, c.BalanceInterval, c.BalanceCooldown, err)
		}
	}
	if s := cfg.Peers.String(); !strings.HasPrefix(s, "1=10.0.0.1:7000/10.0.0.1:7001,2=") {
		t.Fatalf("peers round trip %q", s)
	}
	for _, bad := range []string{"1=a:1", "x=a:1/b:2", "1=a/b:2", "1=a:1/b:2,1=c:3/d:4"} {
		c := DefaultConfig()
		ps, err := ParsePeers(bad)
		if err == nil {
			c.Peers = ps
			err = c.Validate()
		}
		if err == nil {
			t.Errorf("peers %q accepted", bad)
		}
	}
	c := DefaultConfig()
	c.Peers, _ = ParsePeers("5=a:1/a:2")
	if err := c.Validate(); err == nil {
		t.Error("a node missing from its peer list was accepted")
	}
	c.NodeID = 5
	c.LeaderLeaseTimeout = time.Second
	if err := c.Validate(); err == nil {
		t.Error("leader lease above the heartbeat timeout was accepted")
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestSingleControllerOwnListeners runs the production path: the controller binds its
// own addresses (raft.NewTCPTransport), bootstraps, restarts from its data dir, and
// exports its metrics on the injected registry.
func TestSingleControllerOwnListeners(t *testing.T) {
	dir := t.TempDir()
	raftAddr, apiAddr := freePort(t), freePort(t)
	reg := prometheus.NewRegistry()
	start := func() *Controller {
		cfg := DefaultConfig()
		cfg.NodeID = 1
		cfg.DataDir = dir
		cfg.Peers = Peers{{ID: 1, RaftAddr: raftAddr, APIAddr: apiAddr}}
		cfg.Registerer = reg
		cfg.Logger = testLogger()
		var c *Controller
		// The previous instance's sockets may linger briefly.
		testutil.EventuallyNoError(t, 10*time.Second, "binding the controller's own addresses", func() (err error) {
			c, err = New(cfg)
			return err
		})
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Addr().String() != apiAddr || c.RaftAddr().String() != raftAddr {
			t.Fatalf("bound %s / %s, want %s / %s", c.Addr(), c.RaftAddr(), apiAddr, raftAddr)
		}
		return c
	}
	c := start()
	ctx := ctxT(t)
	cl, err := ctlclient.NewClient(ctlclient.ClientConfig{Controllers: []string{apiAddr}, BrokerID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.RegisterBroker(ctx, brokerFor(7, "z")); err != nil {
		t.Fatal(err)
	}
	top, err := cl.CreateTopic(ctx, metadata.TopicSpec{Name: "solo", Partitions: 2, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	fams := gather(t, reg)
	if h := fams["weir_controller_apply_duration_seconds"]; len(h) != 1 || h[0].GetHistogram().GetSampleCount() < 2 {
		t.Fatalf("apply histogram %v", h)
	}
	if len(fams["weir_controller_raft_state"]) != 4 {
		t.Fatalf("raft state series: %v", fams["weir_controller_raft_state"])
	}
	found := false
	for _, m := range fams["weir_controller_api_requests_total"] {
		if labels(m)["path"] == "POST /v1/topics" && labels(m)["code"] == "200" && labels(m)["controller"] == "1" && m.GetCounter().GetValue() >= 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("api request counter: %v", fams["weir_controller_api_requests_total"])
	}
	for _, m := range fams["weir_controller_brokers"] {
		if want := map[string]float64{"active": 1, "fenced": 0}[labels(m)["state"]]; m.GetGauge().GetValue() != want {
			t.Fatalf("brokers gauge %v", m)
		}
	}
	cl.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start() // same registry: Close unregistered the metrics
	defer c.Close()
	testutil.Eventually(t, 20*time.Second, "the restarted controller to replay", func() bool {
		tt := c.View().Topics["solo"]
		return tt != nil && tt.ID == top.ID && c.IsLeader()
	})
	if b, _ := c.View().Broker(7); b.Epoch != 1 {
		t.Fatalf("broker after restart: %+v", b)
	}

}

func gather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestInjectedRaft checks the rules for an injected transport and stores, and that a
// controller given all of them touches neither the network for Raft nor its DataDir,
// and comes back with its state when started again on the same stores.
func TestInjectedRaft(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.NodeID = 1
		c.Peers = Peers{{ID: 1, RaftAddr: "mem-1", APIAddr: "127.0.0.1:0"}}
		return c
	}
	_, tr := raft.NewInmemTransport("mem-1")
	store := raft.NewInmemStore()

	c := base()
	_, c.RaftTransport = raft.NewInmemTransport("mem-2")
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a transport on another node's address: %v, want ErrBadConfig", err)
	}
	c = base()
	c.RaftTransport = tr
	c.RaftListener = listenLoopback(t, "127.0.0.1:0")
	c.RaftListener.Close()
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a transport and a raft listener: %v, want ErrBadConfig", err)
	}
	c = base()
	c.DataDir = ""
	c.LogStore, c.StableStore = store, store
	if err := c.Validate(); err == nil {
		t.Error("no data dir for the file snapshots was accepted")
	}
	c.SnapshotStore = raft.NewInmemSnapshotStore()
	if err := c.Validate(); err != nil {
		t.Errorf("all stores injected, no data dir: %v", err)
	}

	// A data dir that is set but must stay unused.
	dir := t.TempDir()
	snaps := raft.NewInmemSnapshotStore()
	start := func() *Controller {
		cfg := base()
		cfg.DataDir = dir
		_, cfg.RaftTransport = raft.NewInmemTransport("mem-1")
		cfg.LogStore, cfg.StableStore, cfg.SnapshotStore = store, store, snaps
		cfg.APIListener = listenLoopback(t, "127.0.0.1:0")
		cfg.Logger = testLogger()
		ctl, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := ctl.Start(); err != nil {
			ctl.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { ctl.Close() })
		testutil.Eventually(t, 20*time.Second, "the single controller to lead with a cluster ID", func() bool {
			return ctl.IsLeader() && ctl.View().ClusterID != ""
		})
		return ctl
	}
	ctl := start()
	id := ctl.View().ClusterID
	if err := ctl.Close(); err != nil {
		t.Fatal(err)
	}
	if ctl = start(); ctl.View().ClusterID != id {
		t.Fatalf("cluster ID %q after a restart on the same stores, was %q", ctl.View().ClusterID, id)
	}
	ctl.Close()
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("data dir of a controller with injected stores: %v %v", entries, err)
	}
}

// TestGrantedLeaseAndValidate: the granted lease is the suspect timeout minus the
// margin, 300 ms with the defaults (a controller votes for a fence only after the
// suspect timeout of silence, leases.go); settings whose lease would not hold two
// heartbeats at ctlwire.MinHeartbeatInterval, or whose silent-broker timeout is shorter than
// the suspect timeout, are refused.
func TestGrantedLeaseAndValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Peers, _ = ParsePeers("1=a:1/a:2")
		return c
	}
	c := base()
	if c.LeaseTimeout != 2*time.Second || c.LeaseGrace != 250*time.Millisecond || c.SuspectTimeout != 400*time.Millisecond {
		t.Fatalf("defaults %v %v %v", c.LeaseTimeout, c.LeaseGrace, c.SuspectTimeout)
	}
	if g := c.GrantedLease(); g != 300*time.Millisecond {
		t.Fatalf("default granted lease %v, want 300ms", g)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := ctlclient.DefaultClientConfig(); d.HeartbeatInterval != 100*time.Millisecond || c.GrantedLease() < 2*d.HeartbeatInterval {
		t.Fatalf("the default heartbeat interval %v does not fit twice in the default lease", d.HeartbeatInterval)
	}
	cases := []struct {
		lease, grace, suspect time.Duration
		want                  time.Duration
		ok                    bool
	}{
		{time.Second, 250 * time.Millisecond, time.Second, 900 * time.Millisecond, true},
		{time.Second, 0, 300 * time.Millisecond, 200 * time.Millisecond, true},                       // exactly 2 x 100 ms
		{time.Second, 250 * time.Millisecond, 250 * time.Millisecond, 150 * time.Millisecond, false}, // too short
		{300 * time.Millisecond, 0, time.Second, 900 * time.Millisecond, false},                      // silent path sooner than the hinted one
	}
	for _, tc := range cases {
		c := base()
		c.LeaseTimeout, c.LeaseGrace, c.SuspectTimeout = tc.lease, tc.grace, tc.suspect
		if g := c.GrantedLease(); g != tc.want {
			t.Errorf("%+v: granted %v", tc, g)
		}
		err := c.Validate()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadConfig)) {
			t.Errorf("%+v: Validate %v", tc, err)
		}
	}
	// The flags set the three durations.
	c = base()
	fs := flag.NewFlagSet("weir controller", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--lease-timeout", "2s", "--lease-grace", "1s", "--suspect-timeout", "3s"}); err != nil {
		t.Fatal(err)
	}
	if g := c.GrantedLease(); g != 2900*time.Millisecond || c.LeaseTimeout != 2*time.Second || c.LeaseGrace != time.Second {
		t.Fatalf("granted lease from flags %v", g)
	}
}
