package gossip

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/testutil"
)

// Deadlines are generous (the race detector on 2 cores is slow); tests poll and never
// assert on elapsed wall-clock time. Inside simulate they are fake time: nothing waits
// that long unless the test is about to fail.
const (
	convergeTimeout = 20 * time.Second
	detectTimeout   = 20 * time.Second
)

// drainTime is the fake time memberlist's goroutines get, once every member is
// closed, to finish what they were doing (a probe waiting for its timeout, a stream
// handler its 3 s deadline) before a simulate bubble ends.
const drainTime = 10 * time.Second

// simulate runs f in a testing/synctest bubble, with members on an in-memory network
// (memNetwork, through Config.Transport; configs from mn.config). Time in the bubble
// is fake: it advances only when every goroutine of the bubble waits, so timings
// follow the configured intervals exactly however loaded the machine is, and a
// second of gossip costs microseconds. startNode's cleanups close the members when
// f returns; then memberlist's goroutines drain.
func simulate(t *testing.T, f func(t *testing.T, mn *memNetwork)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		mn := newMemNetwork()
		t.Cleanup(func() { time.Sleep(drainTime) }) // runs last
		f(t, mn)
	})
}

// configFunc makes a member's config: testConfig (loopback sockets) or mn.config.
type configFunc func(id int32, epoch int64, bind string, seeds ...string) Config

// config is testConfig on the in-memory network.
func (n *memNetwork) config(id int32, epoch int64, bind string, seeds ...string) Config {
	cfg := testConfig(id, epoch, bind, seeds...)
	cfg.Transport = n.transport
	return cfg
}

// testLogger discards logs unless WEIR_GOSSIP_TEST_LOG is set (memberlist goroutines
// may log after a test ends, so t.Log cannot be used).
func testLogger() *slog.Logger {
	if os.Getenv("WEIR_GOSSIP_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type recEvent struct {
	kind string
	m    Member
	at   time.Time
}

func (e recEvent) String() string {
	return fmt.Sprintf("%s(broker %d, epoch %d)", e.kind, e.m.BrokerID, e.m.Epoch)
}

// recorder collects the events a member's callbacks receive.
type recorder struct {
	mu     sync.Mutex
	events []recEvent
}

func (r *recorder) add(kind string, m Member) {
	r.mu.Lock()
	r.events = append(r.events, recEvent{kind: kind, m: m, at: time.Now()})
	r.mu.Unlock()
}

func (r *recorder) callbacks() Events {
	return Events{
		OnJoin:   func(m Member) { r.add("join", m) },
		OnUpdate: func(m Member) { r.add("update", m) },
		OnLeave:  func(m Member) { r.add("leave", m) },
	}
}

// find returns the first event of one of kinds that matches pred.
func (r *recorder) find(pred func(Member) bool, kinds ...string) (recEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		for _, k := range kinds {
			if e.kind == k && pred(e.m) {
				return e, true
			}
		}
	}
	return recEvent{}, false
}

func (r *recorder) all() []recEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recEvent(nil), r.events...)
}

func byID(id int32) func(Member) bool { return func(m Member) bool { return m.BrokerID == id } }

func byIDEpoch(id int32, epoch int64) func(Member) bool {
	return func(m Member) bool { return m.BrokerID == id && m.Epoch == epoch }
}

type testNode struct {
	g   *Gossip
	rec *recorder
	reg *prometheus.Registry
	cfg Config
}

func testConfig(id int32, epoch int64, bind string, seeds ...string) Config {
	cfg := DefaultConfig()
	cfg.BrokerID = id
	cfg.Zone = fmt.Sprintf("zone-%c", 'a'+rune(id%3))
	cfg.KafkaAddr = "127.0.0.1:" + strconv.Itoa(19090+int(id))
	cfg.Epoch = epoch
	cfg.BindAddr = bind
	cfg.Seeds = seeds
	cfg.Logger = testLogger()
	return cfg
}

// startNode starts a member on loopback; it is closed when the test ends.
func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	n := &testNode{rec: &recorder{}, reg: prometheus.NewRegistry(), cfg: cfg}
	cfg.Registerer = n.reg
	g, err := New(cfg, n.rec.callbacks())
	if err != nil {
		t.Fatalf("New(broker %d): %v", cfg.BrokerID, err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start(broker %d): %v", cfg.BrokerID, err)
	}
	t.Cleanup(func() { _ = g.Close() })
	n.g = g
	return n
}

// startCluster starts n members (ids 1..n, epoch 1, configs from mk) chained by seeds
// and waits until every member sees all of them.
func startCluster(t testing.TB, mk configFunc, n int) []*testNode {
	t.Helper()
	return startClusterStaggered(t, mk, n, 0)
}

// startClusterStaggered is startCluster waiting a random time below stagger before
// starting each member. In fake time, members started together tick in phase (their
// probes all fall on the same instants); staggering them explores other phases.
func startClusterStaggered(t testing.TB, mk configFunc, n int, stagger time.Duration) []*testNode {
	t.Helper()
	nodes := make([]*testNode, 0, n)
	for i := 1; i <= n; i++ {
		if stagger > 0 {
			time.Sleep(rand.N(stagger)) // on purpose: a random phase (fake time in a bubble)
		}
		var seeds []string
		if i > 1 {
			seeds = []string{nodes[i-2].g.Addr()}
		}
		nodes = append(nodes, startNode(t, mk(int32(i), 1, "127.0.0.1:0", seeds...)))
	}
	waitConverged(t, nodes, n)
	return nodes
}

func waitConverged(t testing.TB, nodes []*testNode, want int) {
	t.Helper()
	testutil.Eventually(t, convergeTimeout, fmt.Sprintf("%d members see each other", want), func() bool {
		for _, n := range nodes {
			if len(n.g.Members()) != want {
				return false
			}
		}
		return true
	})
}

// metricValue reads a counter or gauge from reg (0 if absent).
func metricValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
		}
	}
	return 0
}
