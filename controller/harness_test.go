package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
)

// testCluster is an in-process quorum on loopback, each controller with its own
// t.TempDir() data dir and registry.
type testCluster struct {
	t      testing.TB
	peers  Peers
	dirs   []string
	ctrls  []*Controller // nil while stopped
	mutate func(*Config)
}

func testLogger() *slog.Logger {
	if os.Getenv("WEIR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// listenLoopback binds addr, retrying while a restarted controller's old socket on the
// same port is still being torn down.
func listenLoopback(t testing.TB, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	testutil.EventuallyNoError(t, 10*time.Second, "listening on "+addr, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln
}

func newTestCluster(t testing.TB, n int, mutate func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, mutate: mutate, ctrls: make([]*Controller, n)}
	raftLns := make([]net.Listener, n)
	apiLns := make([]net.Listener, n)
	for i := 0; i < n; i++ {
		raftLns[i] = listenLoopback(t, "127.0.0.1:0")
		apiLns[i] = listenLoopback(t, "127.0.0.1:0")
		tc.peers = append(tc.peers, ctlwire.Peer{ID: int32(i + 1), RaftAddr: raftLns[i].Addr().String(), APIAddr: apiLns[i].Addr().String()})
		tc.dirs = append(tc.dirs, t.TempDir())
	}
	t.Cleanup(tc.stopAll)
	for i := 0; i < n; i++ {
		tc.startWith(i, raftLns[i], apiLns[i])
	}
	return tc
}

func (tc *testCluster) config(i int) Config {
	cfg := DefaultConfig()
	cfg.NodeID = int32(i + 1)
	cfg.DataDir = tc.dirs[i]
	cfg.Peers = append(Peers(nil), tc.peers...)
	cfg.Logger = testLogger()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Balance = false // the tests that want balancer moves turn it on
	if tc.mutate != nil {
		tc.mutate(&cfg)
	}
	return cfg
}

func (tc *testCluster) startWith(i int, raftLn, apiLn net.Listener) {
	tc.t.Helper()
	cfg := tc.config(i)
	cfg.RaftListener, cfg.APIListener = raftLn, apiLn
	c, err := New(cfg)
	if err != nil {
		tc.t.Fatalf("controller %d: New: %v", i+1, err)
	}
	if err := c.Start(); err != nil {
		c.Close()
		tc.t.Fatalf("controller %d: Start: %v", i+1, err)
	}
	tc.ctrls[i] = c
}

// restart starts a stopped controller again from its data dir, on its old addresses.
func (tc *testCluster) restart(i int) {
	tc.t.Helper()
	tc.startWith(i, listenLoopback(tc.t, tc.peers[i].RaftAddr), listenLoopback(tc.t, tc.peers[i].APIAddr))
}

func (tc *testCluster) stop(i int) {
	if c := tc.ctrls[i]; c != nil {
		c.Close()
		tc.ctrls[i] = nil
	}
}

func (tc *testCluster) stopAll() {
	for i := range tc.ctrls {
		tc.stop(i)
	}
}

func (tc *testCluster) apiAddrs() []string {
	var out []string
	for _, p := range tc.peers {
		out = append(out, p.APIAddr)
	}
	return out
}

// waitLeader returns the index of the running leader once it has a cluster ID.
func (tc *testCluster) waitLeader() int {
	tc.t.Helper()
	leader := -1
	testutil.Eventually(tc.t, 30*time.Second, "a leader with a cluster ID", func() bool {
		for i, c := range tc.ctrls {
			if c != nil && c.IsLeader() && c.View().ClusterID != "" {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

func (tc *testCluster) follower(leader int) int {
	for i := 1; i < len(tc.ctrls); i++ {
		if j := (leader + i) % len(tc.ctrls); tc.ctrls[j] != nil {
			return j
		}
	}
	tc.t.Fatal("no running follower")
	return -1
}

// client connects a client to the given controllers (all if none).
func (tc *testCluster) client(brokerID int32, mutate func(*ctlclient.ClientConfig), idx ...int) *ctlclient.Client {
	tc.t.Helper()
	cfg := ctlclient.DefaultClientConfig()
	cfg.BrokerID = brokerID
	cfg.Logger = testLogger()
	if len(idx) == 0 {
		cfg.Controllers = tc.apiAddrs()
	}
	for _, i := range idx {
		cfg.Controllers = append(cfg.Controllers, tc.peers[i].APIAddr)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := ctlclient.NewClient(cfg)
	if err != nil {
		tc.t.Fatalf("NewClient: %v", err)
	}
	tc.t.Cleanup(func() { c.Close() })
	return c
}

// post sends one request to the leader as a client would and turns an error answer
// back into its sentinels (ctlwire.APIError.ToError): for requests the Client would not
// send (a stale epoch's).
func (tc *testCluster) post(path string, in, out any) error {
	tc.t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		tc.t.Fatal(err)
	}
	resp, err := http.Post("http://"+tc.peers[tc.waitLeader()].APIAddr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var ae ctlwire.APIError
		if json.Unmarshal(body, &ae) != nil || ae.Code == "" {
			return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
		}
		return ae.ToError()
	}
	return json.Unmarshal(body, out)
}

// leaderFirst lists every controller's index, leader first: a client given them in
// this order talks to the leader first.
func (tc *testCluster) leaderFirst(leader int) []int {
	idx := []int{leader}
	for i := range tc.peers {
		if i != leader {
			idx = append(idx, i)
		}
	}
	return idx
}

// broker returns a registered, heartbeating broker client.
func (tc *testCluster) broker(id int32, rack string) *ctlclient.Client {
	tc.t.Helper()
	c := tc.client(id, func(cfg *ctlclient.ClientConfig) { cfg.Rack = rack })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RegisterBroker(ctx, brokerFor(id, rack)); err != nil {
		tc.t.Fatalf("register broker %d: %v", id, err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
