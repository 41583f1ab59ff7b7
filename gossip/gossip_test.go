package gossip

import (
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/weir-io/weir/internal/testutil"
)

func TestMembershipMetadataAndEpochUpdate(t *testing.T) {
	nodes := startCluster(t, 3)

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
			n := n
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
		n := n
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

// TestCrashDetection closes one member without leaving and measures how long the others
// take to fire OnLeave with the default settings.
func TestCrashDetection(t *testing.T) {
	trials := 3
	if s := os.Getenv("WEIR_GOSSIP_DETECT_TRIALS"); s != "" {
		trials, _ = strconv.Atoi(s)
	}
	size := 3
	if s := os.Getenv("WEIR_GOSSIP_DETECT_SIZE"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	var all []time.Duration
	for trial := 1; trial <= trials; trial++ {
		nodes := startCluster(t, size)
		// Not synchronisation (startCluster already waited for convergence): what is
		// measured is how fast a cluster that has been running notices a crash, so a
		// few probe rounds pass first instead of measuring from the join transient,
		// where every member has just reshuffled its probe order. No assertion
		// depends on it.
		time.Sleep(3 * DefaultProbeInterval)
		victim := nodes[len(nodes)-1]
		survivors := nodes[:len(nodes)-1]
		closedAt := time.Now()
		if err := victim.g.Close(); err != nil {
			t.Fatal(err)
		}
		var got []time.Duration
		for _, n := range survivors {
			n := n
			var ev recEvent
			testutil.Eventually(t, detectTimeout, "OnLeave for the crashed member", func() bool {
				var ok bool
				ev, ok = n.rec.find(byID(victim.cfg.BrokerID), "leave")
				return ok
			})
			if ev.m.Epoch != 1 || ev.m.KafkaAddr != victim.cfg.KafkaAddr {
				t.Fatalf("OnLeave(%v): wrong metadata", ev.m)
			}
			if _, ok := n.g.Lookup(victim.cfg.BrokerID); ok {
				t.Fatalf("broker %d still lists the dead member", n.cfg.BrokerID)
			}
			got = append(got, ev.at.Sub(closedAt))
		}
		for _, n := range survivors {
			if v := metricValue(t, n.reg, "weir_gossip_suspect_events_total"); v != 1 {
				t.Fatalf("suspect_events_total = %v, want 1", v)
			}
			if v := metricValue(t, n.reg, "weir_gossip_members_alive"); v != float64(size-1) {
				t.Fatalf("members_alive = %v, want %d", v, size-1)
			}
		}
		t.Logf("trial %d (%d members): Close() → OnLeave on each survivor after %v", trial, size, got)
		all = append(all, got...)
		for _, n := range nodes {
			_ = n.g.Close()
		}
	}
	slices.Sort(all)
	t.Logf("crash detection with defaults (probe %v, probe timeout %v, suspicion mult %d): min %v, median %v, max %v over %d observations",
		DefaultProbeInterval, DefaultProbeTimeout, DefaultSuspicionMult,
		all[0].Round(time.Millisecond), all[len(all)/2].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond), len(all))
}

func TestGracefulLeave(t *testing.T) {
	nodes := startCluster(t, 3)
	leftAt := time.Now()
	if err := nodes[2].g.Leave(5 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	for _, n := range nodes[:2] {
		n := n
		var ev recEvent
		testutil.Eventually(t, detectTimeout, "OnLeave after graceful leave", func() bool {
			var ok bool
			ev, ok = n.rec.find(byID(3), "leave")
			return ok
		})
		t.Logf("broker %d: Leave() → OnLeave after %v", n.cfg.BrokerID, ev.at.Sub(leftAt))
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

// A crashed member restarted with the same id and a new epoch at a new address (port
// 0) rejoins once its old incarnation has been declared dead.
func TestRestartAfterDetectionNewAddress(t *testing.T) {
	nodes := startCluster(t, 3)
	oldAddr := nodes[2].g.Addr()
	if err := nodes[2].g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		n := n
		testutil.Eventually(t, detectTimeout, "OnLeave for broker 3", func() bool {
			_, ok := n.rec.find(byID(3), "leave")
			return ok
		})
	}
	restarted := startNode(t, testConfig(3, 2, "127.0.0.1:0", nodes[0].g.Addr()))
	if restarted.g.Addr() == oldAddr {
		t.Logf("restarted member got the old port again (%s)", oldAddr)
	}
	all := []*testNode{nodes[0], nodes[1], restarted}
	waitConverged(t, all, 3)
	for _, n := range nodes[:2] {
		n := n
		testutil.Eventually(t, convergeTimeout, "OnJoin/OnUpdate with epoch 2", func() bool {
			m, ok := n.g.Lookup(3)
			_, ev := n.rec.find(byIDEpoch(3, 2), "join", "update")
			return ok && m.Epoch == 2 && ev
		})
	}
	if m, ok := restarted.g.Lookup(1); !ok || m.Epoch != 1 {
		t.Fatalf("restarted member's view of broker 1: %v %v", m, ok)
	}
}

// A member restarted at the same address before the others noticed the crash (a
// process supervisor restarting it at once) takes over its old identity by refuting,
// and the others see the new epoch.
func TestFastRestartSameAddress(t *testing.T) {
	nodes := startCluster(t, 3)
	addr := nodes[2].g.Addr()
	if err := nodes[2].g.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := startNode(t, testConfig(3, 5, addr, nodes[0].g.Addr(), nodes[1].g.Addr()))
	all := []*testNode{nodes[0], nodes[1], restarted}
	for _, n := range nodes[:2] {
		n := n
		testutil.Eventually(t, convergeTimeout, "epoch 5 of broker 3 visible", func() bool {
			m, ok := n.g.Lookup(3)
			_, ev := n.rec.find(byIDEpoch(3, 5), "join", "update")
			return ok && m.Epoch == 5 && ev
		})
	}
	waitConverged(t, all, 3)
	for _, n := range nodes[:2] {
		for _, e := range n.rec.all() {
			if e.m.BrokerID == 3 && e.kind != "join" {
				t.Logf("broker %d saw %s of %v", n.cfg.BrokerID, e.kind, e.m)
			}
		}
	}
}

// A member restarted at a new address before the others noticed the crash (e.g. a
// rescheduled pod) conflicts with its old incarnation until that one is declared dead;
// then its refutation or the next push/pull sync lets it take over the broker id.
func TestFastRestartNewAddress(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[2].g.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	restarted := startNode(t, testConfig(3, 5, "127.0.0.1:0", nodes[0].g.Addr()))
	for _, n := range nodes[:2] {
		n := n
		testutil.Eventually(t, convergeTimeout, "epoch 5 of broker 3 visible", func() bool {
			m, ok := n.g.Lookup(3)
			_, ev := n.rec.find(byIDEpoch(3, 5), "join", "update")
			return ok && m.Epoch == 5 && ev
		})
		t.Logf("broker %d sees the restarted broker 3 after %v (name conflicts logged: %v)", n.cfg.BrokerID,
			time.Since(start), metricValue(t, n.reg, "weir_gossip_name_conflicts_total"))
	}
	waitConverged(t, []*testNode{nodes[0], nodes[1], restarted}, 3)
}

// badDelegate announces fixed, possibly malformed, metadata.
type badDelegate struct{ meta []byte }

func (d *badDelegate) NodeMeta(limit int) []byte                  { return d.meta }
func (d *badDelegate) NotifyMsg([]byte)                           {}
func (d *badDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *badDelegate) LocalState(join bool) []byte                { return nil }
func (d *badDelegate) MergeRemoteState(buf []byte, join bool)     {}

// startRawNode starts a plain memberlist node (not this package) that joins seed.
func startRawNode(t *testing.T, name string, d *badDelegate, seed string) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr = "127.0.0.1"
	mc.BindPort = 0
	mc.AdvertisePort = 0
	mc.Label = DefaultCluster
	mc.Delegate = d
	mc.Logger = log.New(io.Discard, "", 0)
	if os.Getenv("WEIR_GOSSIP_TEST_LOG") != "" {
		mc.Logger = log.New(os.Stderr, "raw "+name+" ", 0)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatalf("raw memberlist: %v", err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{seed}); err != nil {
		t.Fatalf("raw join: %v", err)
	}
	return ml
}

func TestMalformedPeerIgnored(t *testing.T) {
	nodes := startCluster(t, 3)
	seed := nodes[0].g.Addr()

	valid8, err := encodeMeta(Member{BrokerID: 8, KafkaAddr: "127.0.0.1:9092", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		meta []byte
	}{
		{"garbage", []byte("definitely not weir metadata \x00\xff")},
		{"broker-4", nil},                               // no metadata at all
		{"broker-5", []byte("{\"id\":5}")},              // JSON, not our format
		{"broker-6", valid8[:len(valid8)-3]},            // truncated
		{"broker-7", valid8},                            // claims another broker id
		{"kafka-8", valid8},                             // name not broker-<id>
		{"broker-9", []byte{'W', 1, 9, 1, 200, 1, 'x'}}, // length beyond the buffer
	}
	var raws []*memberlist.Memberlist
	for _, b := range bad {
		raws = append(raws, startRawNode(t, b.name, &badDelegate{meta: b.meta}, seed))
	}
	// The raw nodes have no Alive filter: once they list all our members, every
	// exchange with the seed has happened.
	for _, r := range raws {
		r := r
		testutil.Eventually(t, convergeTimeout, "raw node learns the cluster", func() bool { return r.NumMembers() >= 4 })
	}
	testutil.Eventually(t, convergeTimeout, "malformed metadata counted on the seed", func() bool {
		return metricValue(t, nodes[0].reg, "weir_gossip_malformed_meta_total") >= float64(len(bad))
	})
	// Not synchronisation: the waits above proved every exchange with the bad nodes
	// happened. What must not happen is a bad node showing up later, so gossip runs
	// with them for several gossip (100 ms) and probe (200 ms) rounds before the
	// members and events are checked.
	time.Sleep(time.Second)
	for _, n := range nodes {
		got := n.g.Members()
		if len(got) != 3 || got[0].BrokerID != 1 || got[1].BrokerID != 2 || got[2].BrokerID != 3 {
			t.Fatalf("broker %d Members() = %v, want brokers 1-3 only", n.cfg.BrokerID, got)
		}
		for _, e := range n.rec.all() {
			if e.m.BrokerID > 3 || e.kind != "join" {
				t.Fatalf("broker %d got unexpected event %s %v", n.cfg.BrokerID, e.kind, e.m)
			}
		}
	}
}

// A peer that starts valid and then announces malformed metadata keeps its last valid
// view; it is neither dropped nor reported.
func TestPeerTurningMalformedKeepsLastValidView(t *testing.T) {
	nodes := startCluster(t, 2)
	good, err := encodeMeta(Member{BrokerID: 9, Zone: "zone-x", KafkaAddr: "127.0.0.1:9099", Epoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	d := &badDelegate{meta: good}
	raw := startRawNode(t, "broker-9", d, nodes[0].g.Addr())
	waitConverged(t, nodes, 3)
	for _, n := range nodes {
		if m, _ := n.g.Lookup(9); m.Zone != "zone-x" || m.Epoch != 4 {
			t.Fatalf("Lookup(9) = %v", m)
		}
	}
	d.meta = []byte("broken")
	if err := raw.UpdateNode(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, convergeTimeout, "malformed update counted", func() bool {
		return metricValue(t, nodes[0].reg, "weir_gossip_malformed_meta_total") >= 1 &&
			metricValue(t, nodes[1].reg, "weir_gossip_malformed_meta_total") >= 1
	})
	for _, n := range nodes {
		if m, ok := n.g.Lookup(9); !ok || m.Epoch != 4 {
			t.Fatalf("broker %d Lookup(9) = %v %v, want the last valid metadata", n.cfg.BrokerID, m, ok)
		}
		if _, ok := n.rec.find(byID(9), "leave", "update"); ok {
			t.Fatalf("broker %d reported the malformed update", n.cfg.BrokerID)
		}
	}
}

// A callback that blocks must not stall memberlist: the view keeps updating and no
// member is suspected.
func TestBlockedCallbackDoesNotBlockGossip(t *testing.T) {
	release := make(chan struct{})
	blocked := make(chan struct{}, 10)
	cfg := testConfig(1, 1, "127.0.0.1:0")
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

	second := startNode(t, testConfig(2, 1, "127.0.0.1:0", g.Addr()))
	<-blocked // the first callback is now stuck
	third := startNode(t, testConfig(3, 1, "127.0.0.1:0", second.g.Addr()))
	waitConverged(t, []*testNode{first, second, third}, 3)
	// Not synchronisation: nothing is expected to happen. If the blocked callback
	// stalled memberlist, a member's probes would go unanswered and it would be
	// suspected and declared dead within a few probe rounds (100 ms) plus the
	// suspicion timeout (400 ms for 3 members); 2 s gives that every chance to show.
	time.Sleep(2 * time.Second)
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
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var nodes []*testNode
	for i, a := range addrs {
		cfg := testConfig(int32(i+1), 1, a, addrs...)
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
