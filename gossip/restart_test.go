package gossip

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// waitEpochSeen waits until every member of nodes lists broker id with epoch and has
// had OnJoin or OnUpdate for it; it returns the fake time that took from start, the
// latest of the members' callbacks.
func waitEpochSeen(t *testing.T, nodes []*testNode, id int32, epoch int64, start time.Time) time.Duration {
	t.Helper()
	var latest time.Duration
	for _, n := range nodes {
		var ev recEvent
		testutil.Eventually(t, convergeTimeout, "the restarted member's new epoch visible", func() bool {
			m, ok := n.g.Lookup(id)
			var seen bool
			ev, seen = n.rec.find(byIDEpoch(id, epoch), "join", "update")
			return ok && m.Epoch == epoch && seen
		})
		latest = max(latest, ev.at.Sub(start))
	}
	return latest
}

// A crashed member restarted with the same id and a new epoch at a new address (port
// 0) rejoins at once once its old incarnation has been declared dead.
func TestRestartAfterDetectionNewAddress(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) {
		nodes := startCluster(t, mn.config, 3)
		oldAddr := nodes[2].g.Addr()
		if err := nodes[2].g.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes[:2] {
			testutil.Eventually(t, detectTimeout, "OnLeave for broker 3", func() bool {
				_, ok := n.rec.find(byID(3), "leave")
				return ok
			})
		}
		start := time.Now()
		restarted := startNode(t, mn.config(3, 2, "127.0.0.1:0", nodes[0].g.Addr()))
		if restarted.g.Addr() == oldAddr {
			t.Fatalf("restarted member got the old address %s", oldAddr)
		}
		took := waitEpochSeen(t, nodes[:2], 3, 2, start)
		t.Logf("restarted broker 3 seen by both peers after %v", took)
		if limit := 3 * DefaultGossipInterval; took > limit {
			t.Fatalf("restarted member seen after %v, want ≤ %v (its join and gossip rounds)", took, limit)
		}
		waitConverged(t, []*testNode{nodes[0], nodes[1], restarted}, 3)
		if m, ok := restarted.g.Lookup(1); !ok || m.Epoch != 1 {
			t.Fatalf("restarted member's view of broker 1: %v %v", m, ok)
		}
	})
}

// A member restarted at the same address before the others noticed the crash (a
// process supervisor restarting it at once) takes over its old identity by refuting,
// and the others see the new epoch, without OnLeave.
func TestFastRestartSameAddress(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) {
		nodes := startCluster(t, mn.config, 3)
		addr := nodes[2].g.Addr()
		if err := nodes[2].g.Close(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		restarted := startNode(t, mn.config(3, 5, addr, nodes[0].g.Addr(), nodes[1].g.Addr()))
		took := waitEpochSeen(t, nodes[:2], 3, 5, start)
		t.Logf("restarted broker 3 seen by both peers after %v", took)
		if limit := 3 * DefaultGossipInterval; took > limit {
			t.Fatalf("restarted member seen after %v, want ≤ %v (its join and gossip rounds)", took, limit)
		}
		waitConverged(t, []*testNode{nodes[0], nodes[1], restarted}, 3)
		for _, n := range nodes[:2] {
			if e, ok := n.rec.find(byID(3), "leave"); ok {
				t.Fatalf("broker %d saw %s of %v", n.cfg.BrokerID, e.kind, e.m)
			}
		}
	})
}

// A member restarted at a new address before the others noticed the crash (e.g. a
// rescheduled pod) conflicts with its old incarnation until that one is declared dead
// (OnLeave with the old epoch); then its next push/pull sync lets it take over the
// broker id (OnJoin with the new epoch). memberlist staggers a member's first sync by
// up to a PushPullInterval and then waits one, so that takes up to two.
func TestFastRestartNewAddress(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) {
		nodes := startCluster(t, mn.config, 3)
		if err := nodes[2].g.Close(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		restarted := startNode(t, mn.config(3, 5, "127.0.0.1:0", nodes[0].g.Addr()))
		took := waitEpochSeen(t, nodes[:2], 3, 5, start)
		t.Logf("restarted broker 3 seen by both peers after %v (name conflicts logged: %v, %v)", took,
			metricValue(t, nodes[0].reg, "weir_gossip_name_conflicts_total"), metricValue(t, nodes[1].reg, "weir_gossip_name_conflicts_total"))
		// The first sync reaches one peer, gossip the other.
		if limit := 2*DefaultPushPullInterval + 2*DefaultGossipInterval; took > limit {
			t.Fatalf("restarted member seen after %v, want ≤ %v", took, limit)
		}
		for _, n := range nodes[:2] {
			evs := n.rec.all()
			left := slices.IndexFunc(evs, func(e recEvent) bool { return e.kind == "leave" && byIDEpoch(3, 1)(e.m) })
			joined := slices.IndexFunc(evs, func(e recEvent) bool { return e.kind != "leave" && byIDEpoch(3, 5)(e.m) })
			if left < 0 || left > joined {
				t.Fatalf("broker %d saw %v: want OnLeave of epoch 1 before OnJoin of epoch 5", n.cfg.BrokerID, evs)
			}
		}
		waitConverged(t, []*testNode{nodes[0], nodes[1], restarted}, 3)
	})
}
