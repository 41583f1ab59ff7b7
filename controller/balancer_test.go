package controller

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// balSim runs the balancer's decisions against a real FSM: each round plans on the
// FSM's View, begins the moves with beginMoveCmd (as the leader does) and checks the
// throttle; complete hands every moving partition to its target, as the brokers would.
type balSim struct {
	t        *testing.T
	f        *FSM
	now      time.Time
	recent   []recentMove
	loads    map[partKey]int64
	maxMoves int
	cooldown time.Duration
	target   func(int32) bool
	moves    []ctlwire.BalanceMove // every move begun, in order
}

type simBroker struct {
	id   int32
	rack string
}

// newBalSim registers brokers and creates topic "t" whose partitions are led, in
// order, by leaders.
func newBalSim(t *testing.T, brokers []simBroker, leaders []int32) *balSim {
	t.Helper()
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	for _, b := range brokers {
		mustApply(t, f, &registerBrokerCmd{ID: b.id, Host: "h", Port: 9000 + b.id, Rack: b.rack})
	}
	if len(leaders) > 0 {
		var parts []metadata.Partition
		for _, l := range leaders {
			parts = append(parts, metadata.Partition{Leader: l})
		}
		mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts}})
	}
	return &balSim{t: t, f: f, now: time.Unix(1000, 0), loads: map[partKey]int64{}, maxMoves: 4, cooldown: time.Hour}
}

// layout returns leaders for n[i] partitions on broker ids[i], grouped.
func layout(ids []int32, n []int) []int32 {
	var out []int32
	for i, id := range ids {
		for j := 0; j < n[i]; j++ {
			out = append(out, id)
		}
	}
	return out
}

func (s *balSim) input() balanceInput {
	return balanceInput{view: s.f.View(), loads: s.loads, recent: s.recent, now: s.now, maxMoves: s.maxMoves, cooldown: s.cooldown, target: s.target}
}

// round plans and begins one round's moves; time moves on by a second.
func (s *balSim) round() balancePlan {
	s.t.Helper()
	plan := planBalance(s.input())
	again := planBalance(s.input())
	if fmt.Sprint(plan) != fmt.Sprint(again) {
		s.t.Fatalf("the same input planned differently:\n%v\n%v", plan, again)
	}
	if len(plan.Moves) > max(s.maxMoves-plan.InFlight, plan.CatchUp) {
		s.t.Fatalf("%d moving and %d planned: more than %d in flight, and more than the catch-up %d", plan.InFlight, len(plan.Moves), s.maxMoves, plan.CatchUp)
	}
	for _, m := range plan.Moves {
		p := s.f.View().Topics[m.Topic].Partitions[m.Partition]
		if p.Moving || p.Recovering || p.Leader != m.From {
			s.t.Fatalf("planned a move of %s/%d: %+v", m.Topic, m.Partition, p)
		}
		if b, _ := s.f.View().Broker(m.To); !b.Accepting() {
			s.t.Fatalf("planned a move to broker %+v", b)
		}
		mustApply(s.t, s.f, &beginMoveCmd{TopicID: m.TopicID, Partition: m.Partition, Target: m.To, Gen: true})
		from, _ := s.f.View().Broker(m.From)
		to, _ := s.f.View().Broker(m.To)
		s.recent = append(s.recent, recentMove{key: partKey{m.Topic, m.Partition}, from: m.From, to: m.To, fromEpoch: from.Epoch, toEpoch: to.Epoch, at: s.now})
		s.moves = append(s.moves, m)
	}
	if n := movesInFlight(s.f.View()); n > max(s.maxMoves, plan.InFlight+plan.CatchUp) && len(plan.Moves) > 0 {
		s.t.Fatalf("%d partitions moving, limit %d, catch-up %d", n, s.maxMoves, plan.CatchUp)
	}
	s.now = s.now.Add(time.Second)
	return plan
}

// complete hands every moving partition to its target.
func (s *balSim) complete() {
	s.t.Helper()
	v := s.f.View()
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if !p.Moving {
				continue
			}
			b, _ := v.Broker(p.Leader)
			mustApply(s.t, s.f, &completeMoveCmd{TopicID: t.ID, Partition: p.Index, From: p.Leader, FromEpoch: b.Epoch,
				EndOffset: p.Logs[len(p.Logs)-1].StartOffset, MoveGen: p.MoveGen})
		}
	}
}

// run plays rounds (completing the moves after each) until one makes no move, at most
// limit rounds, and returns how many rounds moved something.
func (s *balSim) run(limit int) int {
	s.t.Helper()
	for i := 0; i < limit; i++ {
		plan := s.round()
		s.complete()
		if len(plan.Moves) == 0 {
			return i
		}
	}
	s.t.Fatalf("still moving after %d rounds: %v", limit, s.counts())
	return limit
}

// steady plays n more rounds and fails on any move.
func (s *balSim) steady(n int) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		if plan := s.round(); len(plan.Moves) > 0 {
			s.t.Fatalf("round %d of a steady state moved %v (leaders %v)", i, plan.Moves, s.counts())
		}
		s.complete()
	}
}

// counts returns the partitions each broker leads.
func (s *balSim) counts() map[int32]int {
	n := map[int32]int{}
	for _, t := range s.f.View().Topics {
		for _, p := range t.Partitions {
			n[p.Leader]++
		}
	}
	return n
}

func (s *balSim) within(lo, hi int, ids ...int32) {
	s.t.Helper()
	c := s.counts()
	for _, id := range ids {
		if c[id] < lo || c[id] > hi {
			s.t.Fatalf("broker %d leads %d, want %d..%d (all: %v)", id, c[id], lo, hi, c)
		}
	}
}

// TestBalancerEvensOutAReturningBroker: three brokers, 300 partitions on two of them
// (the third came back empty after a failover): it is owed its share (the mean, 100),
// and the first round begins half of it (half a share in flight), far more than the
// limit of 4; a round while they move begins nothing more; the round after they are
// done begins the other half, all to the empty broker; then the cluster is even and a
// steady state makes no move. With zones (one broker each) and without (one zone).
// Without the catch-up it would take 25 rounds of 4 moves.
func TestBalancerEvensOutAReturningBroker(t *testing.T) {
	for _, racks := range [][3]string{{"a", "b", "c"}, {"", "", ""}} {
		t.Run(fmt.Sprintf("racks %q", racks), func(t *testing.T) {
			s := newBalSim(t, []simBroker{{1, racks[0]}, {2, racks[1]}, {3, racks[2]}}, layout([]int32{1, 2}, []int{150, 150}))
			plan := s.round()
			if plan.CatchUp != 100 || len(plan.Moves) != 50 {
				t.Fatalf("first round: catch-up %d, %d moves; want 100 (to the mean), 50 of them (half a share)", plan.CatchUp, len(plan.Moves))
			}
			if d := describePlan(plan, "began"); !strings.HasPrefix(d, "began 50 moves: t/") || !strings.HasSuffix(d, "and 42 more (a catch-up of 100)") {
				t.Fatalf("described as %q", d)
			}
			// Still moving: the catch-up counts them at their target, nothing more starts.
			if again := s.round(); len(again.Moves) != 0 || again.CatchUp != 50 || again.InFlight != 50 {
				t.Fatalf("a round while the catch-up moves: %d moves, catch-up %d, %d in flight", len(again.Moves), again.CatchUp, again.InFlight)
			}
			s.complete()
			if second := s.round(); second.CatchUp != 50 || len(second.Moves) != 50 {
				t.Fatalf("second round: catch-up %d, %d moves; want the other 50", second.CatchUp, len(second.Moves))
			}
			s.complete()
			if n := s.run(5); n != 0 {
				t.Fatalf("%d more rounds moved after the catch-up: %v", n, s.counts())
			}
			s.steady(30)
			s.within(100, 100, 1, 2, 3)
			if len(s.moves) != 100 {
				t.Fatalf("%d moves to even out 150/150/0", len(s.moves))
			}
			for _, m := range s.moves {
				if m.To != 3 {
					t.Fatalf("a move not to the empty broker: %+v", m)
				}
			}
		})
	}
}

// TestBalancerThrottlesWithoutCatchUp: with partition counts even and traffic uneven
// (broker 1's partitions turned hot) no broker is short of partitions: no catch-up, and
// the throttle holds moves back (never more than the limit in flight; the moves
// complete only every other round here) until the costs are within the threshold.
func TestBalancerThrottlesWithoutCatchUp(t *testing.T) {
	s := newBalSim(t, []simBroker{{1, ""}, {2, ""}, {3, ""}}, layout([]int32{1, 2, 3}, []int{30, 30, 30}))
	for i := int32(0); i < 30; i++ {
		s.loads[partKey{"t", i}] = 100
	}
	throttled := 0
	for i := 0; i < 60; i++ {
		plan := s.round()
		if plan.CatchUp != 0 {
			t.Fatalf("round %d: catch-up %d with even counts", i, plan.CatchUp)
		}
		if plan.InFlight == s.maxMoves && len(plan.Moves) == 0 {
			throttled++
		}
		if i%2 == 1 {
			s.complete()
		}
		if len(plan.Moves) == 0 && plan.InFlight == 0 {
			break
		}
	}
	s.complete()
	s.steady(30)
	if throttled == 0 || len(s.moves) <= s.maxMoves {
		t.Fatalf("the throttle never held a move back (%d moves)", len(s.moves))
	}
	for _, m := range s.moves {
		if m.From != 1 {
			t.Fatalf("a move not from the hot broker: %+v", m)
		}
	}
}

// TestBalancerSteadyUnderNoisyLoads: a balanced cluster whose partitions' rates jitter
// (each ±30 % around the same mean, drawn anew every round) makes no move in 200 rounds,
// with a cooldown and without one: the thresholds are the hysteresis, and the catch-up
// (counts) never starts on noise.
func TestBalancerSteadyUnderNoisyLoads(t *testing.T) {
	for _, cooldown := range []time.Duration{time.Hour, 0} {
		s := newBalSim(t, []simBroker{{1, "a"}, {2, "b"}, {3, "c"}}, layout([]int32{1, 2, 3}, []int{100, 100, 100}))
		s.cooldown = cooldown
		rng := rand.New(rand.NewSource(7))
		for i := 0; i < 200; i++ {
			for p := int32(0); p < 300; p++ {
				s.loads[partKey{"t", p}] = int64(1000 * (0.7 + 0.6*rng.Float64()))
			}
			if plan := s.round(); len(plan.Moves) > 0 || plan.CatchUp != 0 {
				t.Fatalf("cooldown %v, round %d: %d moves, catch-up %d on noise: %+v", cooldown, i, len(plan.Moves), plan.CatchUp, plan.Brokers)
			}
		}
	}
}

// TestBalancerForgetsMovesOfPastRegistrations: the cooldown's memory is of moves between
// two registrations; once a broker is fenced and registers again, the balancer's moves
// to or from its earlier registration no longer hold anything back.
func TestBalancerForgetsMovesOfPastRegistrations(t *testing.T) {
	// failOver fences broker 3, its partitions recover on 1 and 2, and 3 registers again.
	failOver := func(s *balSim) {
		t.Helper()
		mustApply(t, s.f, &fenceBrokerCmd{ID: 3, Epoch: 1, Plan: true})
		v := s.f.View()
		for _, tp := range v.Topics {
			for _, p := range tp.Partitions {
				if p.Recovering {
					b, _ := v.Broker(p.Leader)
					mustApply(t, s.f, &completeRecoveryCmd{TopicID: tp.ID, Partition: p.Index, Leader: p.Leader, BrokerEpoch: b.Epoch,
						LeaderEpoch: p.LeaderEpoch, EndOffset: p.Logs[len(p.Logs)-1].StartOffset})
				}
			}
		}
		mustApply(t, s.f, &registerBrokerCmd{ID: 3, Host: "h", Port: 9003})
		if n := s.counts()[3]; n != 0 {
			t.Fatalf("broker 3 leads %d after its return", n)
		}
	}
	// Broker 3 got 10 partitions from 1 and 2; while it is the same registration they
	// stay (hot now, they may not move again). It fails over and returns: within the
	// cooldown the same partitions may go back to it (the failover moved them off, not
	// the balancer; ties go to the first in partition order, as they did).
	t.Run("partitions moved to a past registration", func(t *testing.T) {
		s := newBalSim(t, []simBroker{{1, ""}, {2, ""}, {3, ""}}, layout([]int32{1, 2}, []int{15, 15}))
		s.run(5)
		s.within(9, 11, 1, 2, 3)
		first := map[int32]bool{}
		for _, m := range s.moves {
			first[m.Partition] = true
		}
		for p := range first {
			s.loads[partKey{"t", p}] = 1000
		}
		s.steady(10)
		s.loads = map[partKey]int64{}
		failOver(s)
		before := len(s.moves)
		s.run(5)
		s.steady(10)
		s.within(9, 11, 1, 2, 3)
		again := 0
		for _, m := range s.moves[before:] {
			if first[m.Partition] {
				again++
			}
		}
		if again == 0 {
			t.Fatalf("none of the %d partitions moved to 3's earlier registration went back to it: %+v", len(first), s.moves[before:])
		}
	})
	// Broker 3 led too many and gave partitions to 1 and 2: while it is the same
	// registration nothing moves back from 1 or 2 to it. It fails over and returns empty:
	// 1 and 2 give it its share within the cooldown.
	t.Run("moves back to a returned broker", func(t *testing.T) {
		s := newBalSim(t, []simBroker{{1, ""}, {2, ""}, {3, ""}}, layout([]int32{1, 2, 3}, []int{5, 5, 20}))
		s.run(5)
		s.within(9, 11, 1, 2, 3)
		for _, p := range s.f.View().Topics["t"].Partitions {
			if p.Leader != 3 {
				s.loads[partKey{"t", p.Index}] = 1000 // 1 and 2 turn hot: 3 is the place
			}
		}
		s.steady(10)
		s.loads = map[partKey]int64{}
		failOver(s)
		s.run(5)
		s.steady(10)
		s.within(9, 11, 1, 2, 3)
	})
}

// TestBalancerZones: when zone totals are uneven partitions move across zones (from the
// zone above its share, proportional to its brokers, to the one below); when zones are
// even, moves stay within the zone whose brokers are uneven.
func TestBalancerZones(t *testing.T) {
	zones := []simBroker{{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}}
	t.Run("uneven zones", func(t *testing.T) {
		s := newBalSim(t, zones, layout([]int32{1, 2}, []int{10, 10}))
		s.run(30)
		s.steady(20)
		s.within(4, 6, 1, 2, 3, 4)
		for _, m := range s.moves {
			if m.Reason != reasonZone || (m.From != 1 && m.From != 2) || (m.To != 3 && m.To != 4) {
				t.Fatalf("move %+v: want zone moves from a to b only", m)
			}
		}
	})
	t.Run("even zones", func(t *testing.T) {
		s := newBalSim(t, zones, layout([]int32{1, 3, 4}, []int{10, 5, 5}))
		s.run(30)
		s.steady(20)
		s.within(4, 6, 1, 2, 3, 4)
		for _, m := range s.moves {
			if m.Reason != reasonBroker || m.From != 1 || m.To != 2 {
				t.Fatalf("move %+v: want moves within zone a only", m)
			}
		}
	})
	t.Run("shares follow broker counts", func(t *testing.T) {
		// Zone a has two brokers, b one: a's share is two thirds.
		s := newBalSim(t, []simBroker{{1, "a"}, {2, "a"}, {3, "b"}}, layout([]int32{3}, []int{30}))
		s.run(40)
		s.steady(20)
		s.within(9, 11, 1, 2, 3)
	})
}

// TestBalancerWeighsBytes: a partition's reported bytes make it cost more: two brokers
// leading five partitions each are even by count, but with one hot partition on broker 1
// its idle partitions move to broker 2 (the hot one, costing more than the gap, stays);
// without reports nothing moves.
func TestBalancerWeighsBytes(t *testing.T) {
	s := newBalSim(t, []simBroker{{1, "a"}, {2, "a"}}, []int32{1, 1, 1, 1, 1, 2, 2, 2, 2, 2})
	s.steady(5)
	s.loads[partKey{"t", 0}] = 1000
	s.run(20)
	s.steady(20)
	if c := s.counts(); c[1] != 1 || c[2] != 9 {
		t.Fatalf("leaders with a hot partition on 1: %v, want 1 (the hot one) and 9", c)
	}
	for _, m := range s.moves {
		if m.Partition == 0 {
			t.Fatalf("the hot partition moved: %+v", m)
		}
	}
	plan := planBalance(s.input())
	if plan.Brokers[0].BytesPerSec != 1000 || plan.Brokers[0].Leads != 1 || plan.Brokers[0].Cost != 11 || plan.Brokers[1].Cost != 9 {
		t.Fatalf("the balancer's view of the brokers: %+v", plan.Brokers)
	}

	// Rates on both sides: the hotter broker sheds load until within the threshold.
	s = newBalSim(t, []simBroker{{1, ""}, {2, ""}, {3, ""}}, layout([]int32{1, 2, 3}, []int{6, 6, 6}))
	for i := int32(0); i < 6; i++ {
		s.loads[partKey{"t", i}] = 500 // broker 1's partitions are all busy
	}
	s.run(30)
	s.steady(20)
	plan = planBalance(s.input())
	for _, b := range plan.Brokers {
		mean := 0.0
		for _, x := range plan.Brokers {
			mean += x.Cost / 3
		}
		if b.Cost-mean > balanceThreshold(mean) || mean-b.Cost > balanceThreshold(mean) {
			t.Fatalf("broker %d cost %.2f, mean %.2f: outside the threshold; %+v", b.ID, b.Cost, mean, plan.Brokers)
		}
	}
	if c := s.counts(); c[1] >= 6 {
		t.Fatalf("the busy broker still leads %d of 18: %v", c[1], c)
	}
}

// TestBalancerLeavesRecoveringAndMovingAlone: partitions that are Recovering or moving
// are never planned; moving ones count against the limit (and at their target).
func TestBalancerLeavesRecoveringAndMovingAlone(t *testing.T) {
	brokers := []metadata.Broker{{ID: 1, Epoch: 1}, {ID: 2, Epoch: 1}, {ID: 3, Epoch: 1}}
	var parts []metadata.Partition
	for i := int32(0); i < 12; i++ {
		p := metadata.Partition{Index: i, Leader: 1, MovingTo: -1}
		switch {
		case i < 4:
			p.Recovering, p.RecoverEpoch = true, 1
		case i < 6:
			p.Moving, p.MovingTo, p.MoveGen = true, 2, 7
		}
		parts = append(parts, p)
	}
	v := viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts})
	for _, limit := range []int{4, 20} {
		plan := planBalance(balanceInput{view: v, now: time.Unix(1, 0), maxMoves: limit, cooldown: time.Hour})
		if plan.InFlight != 2 {
			t.Fatalf("in flight %d, want 2", plan.InFlight)
		}
		// Broker 3 leads nothing, 2 has two coming: both short of the mean of 4 less 1,
		// owed 4 and 2 (to the mean).
		if plan.CatchUp != 6 || len(plan.Moves) == 0 || len(plan.Moves) > max(limit-2, plan.CatchUp) {
			t.Fatalf("limit %d: %d moves, catch-up %d", limit, len(plan.Moves), plan.CatchUp)
		}
		for _, m := range plan.Moves {
			if m.Partition < 6 {
				t.Fatalf("moved a recovering or moving partition: %+v", m)
			}
		}
		if plan.Brokers[0].Cost != 10 || plan.Brokers[1].Cost != 2 || plan.Brokers[0].Leads != 12 {
			t.Fatalf("costs %+v: want the moving partitions counted at their target", plan.Brokers)
		}
	}
	// Only recovering partitions on the loaded broker: nothing to move.
	for i := 4; i < 12; i++ {
		parts[i].Recovering, parts[i].Moving, parts[i].MovingTo = true, false, -1
	}
	v = viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts})
	plan := planBalance(balanceInput{view: v, maxMoves: 4})
	if len(plan.Moves) != 0 {
		t.Fatalf("moves of recovering partitions: %+v", plan)
	}
	// Imbalance 200% (12 partitions on one of three brokers) is not "balanced": the
	// note says what holds the moves back.
	if plan.Imbalance != 2 || !strings.HasPrefix(plan.Note, "left uneven: broker 1 (cost 12.0), 2 (cost 0.0), 3 (cost 0.0) beyond 1.0 of the mean cost 4.0") ||
		!strings.Contains(plan.Note, "12 are recovering") {
		t.Fatalf("imbalance %.2f, note %q", plan.Imbalance, plan.Note)
	}
}

// TestBalancerNeverTargetsDrainingOrFenced: moves go only to accepting brokers the
// leader heard from; partitions a draining broker still leads (not recovering) move
// first, to its zone; fenced brokers' partitions are the failover plan's.
func TestBalancerNeverTargetsDrainingOrFenced(t *testing.T) {
	brokers := []metadata.Broker{
		{ID: 1, Rack: "a", Epoch: 1},
		{ID: 2, Rack: "a", Epoch: 1, State: metadata.BrokerDraining},
		{ID: 3, Rack: "a", Epoch: 1, State: metadata.BrokerFenced},
		{ID: 4, Rack: "b", Epoch: 1},
		{ID: 5, Rack: "a", Epoch: 1},
		{ID: 6, Rack: "b", Epoch: 1},
	}
	leaders := []int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3}
	var parts []metadata.Partition
	for i, l := range leaders {
		parts = append(parts, metadata.Partition{Index: int32(i), Leader: l, MovingTo: -1, Recovering: i == 14})
	}
	v := viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts})
	silent := func(id int32) bool { return id != 6 } // 6 has not heartbeated lately
	plan := planBalance(balanceInput{view: v, maxMoves: 20, cooldown: time.Hour, target: silent})
	if len(plan.Moves) < 4 || plan.Moves[0].Reason != reasonDrain || plan.Moves[1].Reason != reasonDrain {
		t.Fatalf("plan %+v: want the draining broker's two partitions first", plan.Moves)
	}
	for i, m := range plan.Moves {
		if m.To == 2 || m.To == 3 || m.To == 6 {
			t.Fatalf("move to broker %d: %+v", m.To, m)
		}
		if m.Partition == 14 || m.Partition == 15 {
			t.Fatalf("moved %+v (recovering, or led by a fenced broker)", m)
		}
		if i < 2 && (m.From != 2 || m.To != 5) {
			t.Fatalf("drain move %+v: want 2 → 5 (its zone, the fewest)", m)
		}
	}
	// No accepting broker at all: nothing moves, and the plan says why.
	for i := range brokers {
		if brokers[i].State == "" {
			brokers[i].State = metadata.BrokerDraining
		}
	}
	v = viewWith(brokers, &metadata.Topic{Name: "t", ID: topicID(1), Partitions: parts})
	if plan := planBalance(balanceInput{view: v, maxMoves: 20}); len(plan.Moves) != 0 || plan.Note == "" {
		t.Fatalf("with every broker draining: %+v", plan)
	}
}

// TestBalancerDoesNotOscillate: from random layouts (1 to 3 zones, 2 to 6 brokers, some
// hot partitions) the balancer converges within a bounded number of rounds and then
// makes no move in a steady state; it never moves a partition twice or a partition
// back between two brokers within the cooldown. Without a cooldown the thresholds alone
// still bring it to rest.
func TestBalancerDoesNotOscillate(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		for _, cooldown := range []time.Duration{time.Hour, 0} {
			rng := rand.New(rand.NewSource(seed))
			nb, nz := 2+rng.Intn(5), 1+rng.Intn(3)
			var brokers []simBroker
			var ids []int32
			for i := 0; i < nb; i++ {
				brokers = append(brokers, simBroker{int32(i + 1), string(rune('a' + i%nz))})
				ids = append(ids, int32(i+1))
			}
			var leaders []int32
			for i := 0; i < 10+rng.Intn(60); i++ {
				leaders = append(leaders, ids[rng.Intn(1+rng.Intn(nb))]) // skewed to low IDs
			}
			s := newBalSim(t, brokers, leaders)
			s.cooldown = cooldown
			s.maxMoves = 1 + rng.Intn(6)
			for i := range leaders {
				if rng.Intn(4) == 0 {
					s.loads[partKey{"t", int32(i)}] = int64(rng.ExpFloat64() * 1e6)
				}
			}
			s.run(len(leaders) * 2)
			s.steady(50)
			if cooldown == 0 {
				continue
			}
			moved := map[int32]bool{}
			pairs := map[[2]int32]bool{}
			for _, m := range s.moves {
				if moved[m.Partition] {
					t.Fatalf("seed %d: partition %d moved twice within the cooldown", seed, m.Partition)
				}
				moved[m.Partition] = true
				if pairs[[2]int32{m.To, m.From}] {
					t.Fatalf("seed %d: move %d → %d undoes an earlier one", seed, m.From, m.To)
				}
				pairs[[2]int32{m.From, m.To}] = true
			}
		}
	}
}

// TestBalancerCooldown: within the cooldown the balancer neither moves a partition it
// moved nor makes a move back between the same two brokers, even when the load changes
// to ask for it; after the cooldown it may.
func TestBalancerCooldown(t *testing.T) {
	s := newBalSim(t, []simBroker{{1, ""}, {2, ""}}, layout([]int32{1, 2}, []int{8, 2}))
	s.cooldown = time.Minute
	s.run(10)
	if len(s.moves) != 3 || s.moves[0].To != 2 {
		t.Fatalf("moves %+v, want three from 1 to 2 (2 was short: filled to the mean)", s.moves)
	}
	// Broker 2's partitions turn hot: the way to even out is back from 2 to 1.
	for _, p := range s.f.View().Topics["t"].Partitions {
		if p.Leader == 2 {
			s.loads[partKey{"t", p.Index}] = 1000
		}
	}
	s.steady(30) // 30 s of rounds, inside the minute
	s.now = s.now.Add(time.Minute)
	s.run(10)
	var back int
	for _, m := range s.moves[3:] {
		if m.From == 2 && m.To == 1 {
			back++
		}
	}
	if back == 0 {
		t.Fatalf("after the cooldown nothing moved back: %+v", s.moves)
	}
}

// TestLoadTable: a report records the rates of the partitions with traffic; a partition
// the reporter leads and leaves out (or reports at 0) has none; the rate its previous
// leader reported counts until the new leader reports it or it expires; reset forgets.
func TestLoadTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v := viewWith([]metadata.Broker{{ID: 1}, {ID: 2}}, &metadata.Topic{Name: "t", Partitions: []metadata.Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: 1}, {Index: 2, Leader: 2}}})
	l := newLoadTable()
	l.report(v, 1, []metadata.PartitionLoad{{Topic: "t", Partition: 0, BytesPerSec: 10}, {Topic: "t", Partition: 1, BytesPerSec: 20},
		{Topic: "", Partition: 0, BytesPerSec: 5}, {Topic: "t", Partition: -1, BytesPerSec: 5}, {Topic: "t", Partition: 2, BytesPerSec: -5}}, t0)
	if got := l.snapshot(t0); len(got) != 2 || got[partKey{"t", 0}] != 10 || got[partKey{"t", 1}] != 20 {
		t.Fatalf("after the first report: %v", got)
	}
	l.report(v, 1, []metadata.PartitionLoad{{Topic: "t", Partition: 1, BytesPerSec: 30}}, t0.Add(time.Second))
	if got := l.snapshot(t0.Add(time.Second)); len(got) != 1 || got[partKey{"t", 1}] != 30 {
		t.Fatalf("t/0 left out: %v", got)
	}
	// t/1 moves to broker 2: 1's rate stays until 2 reports.
	v2 := viewWith(v.Brokers, &metadata.Topic{Name: "t", Partitions: []metadata.Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: 2}, {Index: 2, Leader: 2}}})
	l.report(v2, 1, nil, t0.Add(2*time.Second))
	l.report(v2, 2, nil, t0.Add(2*time.Second))
	if got := l.snapshot(t0.Add(2 * time.Second)); got[partKey{"t", 1}] != 30 {
		t.Fatalf("the previous leader's rate is gone: %v", got)
	}
	if got := l.snapshot(t0.Add(time.Second + loadTTL + time.Millisecond)); len(got) != 0 {
		t.Fatalf("an expired rate counts: %v", got)
	}
	l.report(v2, 2, []metadata.PartitionLoad{{Topic: "t", Partition: 1, BytesPerSec: 7}}, t0.Add(3*time.Second))
	l.reset()
	if got := l.snapshot(t0.Add(3 * time.Second)); len(got) != 0 {
		t.Fatalf("after reset: %v", got)
	}
}
