package gossip

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/testutil"
)

func TestMembershipMetadataAndEpochUpdate(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) { testMembershipMetadataAndEpochUpdate(t, mn.config) })
}

func testMembershipMetadataAndEpochUpdate(t *testing.T, mk configFunc) {
	nodes := startCluster(t, mk, 3)

	for _, n := range nodes {
		got := n.g.Members()
		var want []Member
		for _, o := range nodes {
			want = append(want, Member{BrokerID: o.cfg.BrokerID, Zone: o.cfg.Zone, KafkaAddr: o.cfg.KafkaAddr, Epoch: 1})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("broker %d Members() = %v, want %v", n.cfg.BrokerID, got, want)
		}
		if m, ok := n.g.Lookup(2); !ok || m.Zone != nodes[1].cfg.Zone {
			t.Fatalf("broker %d Lookup(2) = %v, %v", n.cfg.BrokerID, m, ok)
		}
		if _, ok := n.g.Lookup(42); ok {
			t.Fatalf("Lookup(42) found a member")
		}
	}
	// OnJoin fired for every peer with its metadata, never for the member itself.
	for _, n := range nodes {
		for _, o := range nodes {
			ev, ok := n.rec.find(byID(o.cfg.BrokerID), "join")
			if o == n {
				if ok {
					t.Fatalf("broker %d got OnJoin for itself", n.cfg.BrokerID)
				}
				continue
			}
			if !ok {
				testutil.Eventually(t, convergeTimeout, "OnJoin delivered", func() bool {
					ev, ok = n.rec.find(byID(o.cfg.BrokerID), "join")
					return ok
				})
			}
			if ev.m.KafkaAddr != o.cfg.KafkaAddr || ev.m.Zone != o.cfg.Zone || ev.m.Epoch != 1 {
				t.Fatalf("broker %d OnJoin(%v), want %s/%s epoch 1", n.cfg.BrokerID, ev.m, o.cfg.Zone, o.cfg.KafkaAddr)
			}
		}
	}
	if v := metricValue(t, nodes[0].reg, "weir_gossip_members_alive"); v != 3 {
		t.Fatalf("members_alive = %v, want 3", v)
	}

	// UpdateEpoch propagates as OnUpdate.
	if err := nodes[1].g.UpdateEpoch(7); err != nil {
		t.Fatal(err)
	}
	if got := nodes[1].g.Self().Epoch; got != 7 {
		t.Fatalf("Self().Epoch = %d", got)
	}
	for _, n := range []*testNode{nodes[0], nodes[2]} {
		testutil.Eventually(t, convergeTimeout, "epoch 7 of broker 2 reaches the others", func() bool {
			m, ok := n.g.Lookup(2)
			_, ev := n.rec.find(byIDEpoch(2, 7), "update")
			return ok && m.Epoch == 7 && ev
		})
	}
	if m, _ := nodes[1].g.Lookup(2); m.Epoch != 7 {
		t.Fatalf("local view of self has epoch %d", m.Epoch)
	}
}

// TestGracefulLeave: the peers fire OnLeave as soon as one of the leaving member's next
// gossip rounds reaches them (the first one unless its random targets miss a peer; see
// TestCrashDetection): within 3 GossipIntervals of fake time, before the failure
// detector could declare anything (500 ms).
func TestGracefulLeave(t *testing.T) {
	simulate(t, testGracefulLeave)
}

func testGracefulLeave(t *testing.T, mn *memNetwork) {
	nodes := startCluster(t, mn.config, 3)
	leftAt := time.Now()
	if err := nodes[2].g.Leave(5 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	for _, n := range nodes[:2] {
		var ev recEvent
		testutil.Eventually(t, detectTimeout, "OnLeave after graceful leave", func() bool {
			var ok bool
			ev, ok = n.rec.find(byID(3), "leave")
			return ok
		})
		if d, limit := ev.at.Sub(leftAt), 3*DefaultGossipInterval; d > limit {
			t.Fatalf("broker %d: Leave() → OnLeave after %v, want ≤ %v", n.cfg.BrokerID, d, limit)
		}
	}
	if got := nodes[2].g.Members(); len(got) != 1 || got[0].BrokerID != 3 {
		t.Fatalf("Members() after Leave = %v, want only self", got)
	}
	if err := nodes[2].g.Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if err := nodes[2].g.Close(); err != nil {
		t.Fatalf("Close after Leave: %v", err)
	}
	if err := nodes[2].g.UpdateEpoch(9); err != ErrClosed {
		t.Fatalf("UpdateEpoch after Leave = %v, want ErrClosed", err)
	}
}

// A callback that blocks must not stall memberlist: the view keeps updating and no
// member is suspected.
func TestBlockedCallbackDoesNotBlockGossip(t *testing.T) {
	simulate(t, testBlockedCallbackDoesNotBlockGossip)
}

func testBlockedCallbackDoesNotBlockGossip(t *testing.T, mn *memNetwork) {
	release := make(chan struct{})
	blocked := make(chan struct{}, 10)
	cfg := mn.config(1, 1, "127.0.0.1:0")
	first := &testNode{rec: &recorder{}, cfg: cfg}
	g, err := New(cfg, Events{
		OnJoin: func(m Member) {
			blocked <- struct{}{}
			<-release
			first.rec.add("join", m)
		},
		OnLeave: func(m Member) { first.rec.add("leave", m) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	first.g = g
	defer close(release)

	second := startNode(t, mn.config(2, 1, "127.0.0.1:0", g.Addr()))
	<-blocked // the first callback is now stuck
	third := startNode(t, mn.config(3, 1, "127.0.0.1:0", second.g.Addr()))
	waitConverged(t, []*testNode{first, second, third}, 3)
	// Not synchronisation: nothing is expected to happen. If the blocked callback
	// stalled memberlist, a member's probes would go unanswered and it would be
	// declared dead within 0.8 s (TestCrashDetection); 10 s of fake time, a hundred
	// probe rounds, gives that every chance to show.
	time.Sleep(10 * time.Second)
	for _, n := range []*testNode{second, third} {
		if _, ok := n.rec.find(func(Member) bool { return true }, "leave"); ok {
			t.Fatalf("broker %d saw a leave while broker 1's callback was blocked", n.cfg.BrokerID)
		}
	}
	if got := len(first.g.Members()); got != 3 {
		t.Fatalf("broker 1 view has %d members", got)
	}
}

// Every member gets the same seed list, its own address included, and members start
// one after the other: the first retries in the background until a seed answers.
func TestJoinRetriesUntilSeedAnswers(t *testing.T) {
	simulate(t, testJoinRetriesUntilSeedAnswers)
}

func testJoinRetriesUntilSeedAnswers(t *testing.T, mn *memNetwork) {
	addrs := []string{mn.freeAddr(), mn.freeAddr(), mn.freeAddr()}
	var nodes []*testNode
	for i, a := range addrs {
		cfg := mn.config(int32(i+1), 1, a, addrs...)
		cfg.JoinRetryInterval = 50 * time.Millisecond
		cfg.JoinRetryMax = 200 * time.Millisecond
		n := startNode(t, cfg)
		nodes = append(nodes, n)
		if i == 0 {
			testutil.Eventually(t, convergeTimeout, "join failures counted", func() bool {
				return metricValue(t, n.reg, "weir_gossip_join_failures_total") >= 2
			})
			if got := len(n.g.Members()); got != 1 {
				t.Fatalf("lone member sees %d members", got)
			}
		}
	}
	waitConverged(t, nodes, 3)
}

// A member joined by another before any of its seeds answered still joins its seeds
// once they are up: otherwise the two would stay a cluster of their own.
func TestJoinsSeedsAfterBeingJoined(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) {
		seedAddr := mn.freeAddr() // nothing listens there yet
		second := startNode(t, mn.config(2, 1, "127.0.0.1:0", seedAddr))
		third := startNode(t, mn.config(3, 1, "127.0.0.1:0", second.g.Addr()))
		waitConverged(t, []*testNode{second, third}, 2)
		start := time.Now()
		first := startNode(t, mn.config(1, 1, seedAddr)) // no seeds: it only answers
		waitConverged(t, []*testNode{first, second, third}, 3)
		if took, limit := time.Since(start), DefaultJoinRetryMax; took > limit {
			t.Fatalf("the seed was joined after %v, want ≤ %v (one join retry)", took, limit)
		}
	})
}

func TestLifecycle(t *testing.T) {
	cfg := testConfig(4, 3, "127.0.0.1:0")
	g, err := New(cfg, Events{})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Members(); len(got) != 1 || got[0] != (Member{BrokerID: 4, Zone: cfg.Zone, KafkaAddr: cfg.KafkaAddr, Epoch: 3}) {
		t.Fatalf("Members() before Start = %v", got)
	}
	if g.Addr() != "" {
		t.Fatalf("Addr() before Start = %q", g.Addr())
	}
	if err := g.UpdateEpoch(4); err != nil {
		t.Fatal(err)
	}
	if err := g.UpdateEpoch(-1); err == nil {
		t.Fatal("negative epoch accepted")
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	if g.Start() == nil {
		t.Fatal("second Start succeeded")
	}
	if g.Addr() == "" {
		t.Fatal("no address after Start")
	}
	if got := g.Members(); len(got) != 1 || got[0].Epoch != 4 {
		t.Fatalf("Members() = %v", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != ErrClosed {
		t.Fatalf("Start after Close = %v", err)
	}

	// Close before Start.
	g2, err := New(cfg, Events{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsRegistration(t *testing.T) {
	n := startNode(t, testConfig(1, 1, "127.0.0.1:0"))
	cfg := testConfig(2, 1, "127.0.0.1:0")
	cfg.Registerer = n.reg
	g, err := New(cfg, Events{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err == nil {
		_ = g.Close()
		t.Fatal("Start registered duplicate metrics")
	}
	if err := n.g.Close(); err != nil {
		t.Fatal(err)
	}
	// Close unregistered the first member's metrics: a new member may register.
	if err := g.Start(); err != nil {
		t.Fatalf("Start after the first member closed: %v", err)
	}
	if v := metricValue(t, n.reg, "weir_gossip_members_alive"); v != 1 {
		t.Fatalf("members_alive = %v", v)
	}
	_ = g.Close()
}

// A Config.Transport that fails fails Start, which leaves nothing registered.
func TestTransportErrorFailsStart(t *testing.T) {
	errBind := errors.New("no such network")
	cfg := testConfig(1, 1, "127.0.0.1:0")
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Transport = func(string, int) (memberlist.NodeAwareTransport, error) { return nil, errBind }
	g, err := New(cfg, Events{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); !errors.Is(err, errBind) {
		t.Fatalf("Start = %v, want %v", err, errBind)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Fatalf("after a failed Start the registry holds %d metric families (%v)", len(mfs), err)
	}
}
