package controller

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// TestBalancerNoteExplainsImbalance: a plan that moves nothing never says a bare
// "balanced" beside an imbalance it leaves: one partition over three brokers (200%) is
// balanced within the band and says so with the band; twelve partitions on one broker,
// all moved there by the balancer within the cooldown, or with every other broker
// silent, are "left uneven" with the reason.
func TestBalancerNoteExplainsImbalance(t *testing.T) {
	brokers := []metadata.Broker{{ID: 1, Epoch: 1, Rack: "a"}, {ID: 2, Epoch: 1, Rack: "b"}, {ID: 3, Epoch: 1, Rack: "c", State: metadata.BrokerActive}}
	one := viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Index: 0, Leader: 1, MovingTo: -1}}})
	plan := planBalance(balanceInput{view: one, maxMoves: 4})
	if len(plan.Moves) != 0 || plan.Imbalance != 2 || plan.Note != "balanced: every broker within 1.0 of the mean cost 0.3 (the balancer's band: one partition, or 10% of the mean if more)" {
		t.Fatalf("one partition over three brokers: %d moves, imbalance %.2f, note %q", len(plan.Moves), plan.Imbalance, plan.Note)
	}
	for _, b := range plan.Brokers {
		if b.State != metadata.BrokerActive {
			t.Fatalf("broker %d state %q: want active, the View's state (empty means active)", b.ID, b.State)
		}
	}

	var parts []metadata.Partition
	var recent []recentMove
	now := time.Unix(1000, 0)
	for i := int32(0); i < 12; i++ {
		parts = append(parts, metadata.Partition{Index: i, Leader: 1, MovingTo: -1})
		recent = append(recent, recentMove{key: partKey{"t", i}, from: 2, to: 1, fromEpoch: 1, toEpoch: 1, at: now.Add(-time.Minute)})
	}
	v := viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts})
	plan = planBalance(balanceInput{view: v, maxMoves: 4, recent: recent, now: now, cooldown: time.Hour})
	if len(plan.Moves) != 0 || plan.Imbalance != 2 || !strings.HasPrefix(plan.Note, "left uneven: broker 1 (cost 12.0), 2 (cost 0.0), 3 (cost 0.0) beyond 1.0 of the mean cost 4.0, but ") ||
		!strings.Contains(plan.Note, "12 partitions of the brokers above the mean were moved by the balancer within the cooldown (1h0m0s)") {
		t.Fatalf("cooled: %d moves, imbalance %.2f, note %q", len(plan.Moves), plan.Imbalance, plan.Note)
	}
	plan = planBalance(balanceInput{view: v, maxMoves: 4, now: now, target: func(id int32) bool { return id == 1 }})
	if len(plan.Moves) != 0 || !strings.Contains(plan.Note, "broker 2, 3 may not be given partitions (not heard from within the lease)") {
		t.Fatalf("silent targets: %d moves, note %q", len(plan.Moves), plan.Note)
	}
}

// TestMemBalancerStatusIsCurrent: `weir admin status` showed a broker drained since the
// last round as active (the last round's table) while describe showed it draining. The
// status is now planned from the current View: right after a drain, before any round,
// its broker table says draining, as the View does, and its imbalance and decision come
// from that one plan.
func TestMemBalancerStatusIsCurrent(t *testing.T) { synctest.Test(t, testMemBalancerStatusIsCurrent) }

func testMemBalancerStatusIsCurrent(t *testing.T) {
	mc := newMemCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceCooldown = time.Hour
	})
	c := mc.ctrls[mc.waitLeader()]
	evenTopic(t, c, 3)
	startBrokerSim(mc)
	untilFake(t, 3*c.cfg.BalanceInterval, time.Millisecond, "a balancer round", func() bool { return !c.bal.status().LastRound.IsZero() })
	before := c.bal.status()
	if !strings.HasPrefix(before.LastDecision, "balanced") || !strings.HasPrefix(before.Decision, "balanced") || before.Imbalance != 0 {
		t.Fatalf("an even cluster: %+v", before)
	}
	vb, _ := c.View().Broker(3)
	mustPropose(t, c, &drainBrokerCmd{ID: 3, Epoch: vb.Epoch})
	st := c.bal.status()
	if !st.LastRound.Equal(before.LastRound) {
		t.Fatal("a round ran meanwhile: the test shows nothing")
	}
	vb, _ = c.View().Broker(3)
	if len(st.Brokers) != 3 || st.Brokers[2].ID != 3 || st.Brokers[2].State != metadata.BrokerDraining || ctlwire.StateOf(vb) != st.Brokers[2].State {
		t.Fatalf("status brokers %+v, the View's broker 3 %+v: want both draining", st.Brokers, vb)
	}
	if st.ViewVersion != c.View().Version {
		t.Fatalf("status of view %d, the View is %d", st.ViewVersion, c.View().Version)
	}
	// Broker 3's partition is moving to 1 or 2 (counted there): 2 and 1 over the two
	// accepting brokers, imbalance 33%, within the band of the mean 1.5.
	if st.Imbalance < 0.33 || st.Imbalance > 0.34 || !strings.HasPrefix(st.Decision, "balanced: every broker within 1.0 of the mean cost 1.5") {
		t.Fatalf("after the drain: imbalance %.2f, decision %q", st.Imbalance, st.Decision)
	}
}
