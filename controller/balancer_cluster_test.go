package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// brokerSim plays the brokers of a memCluster: it heartbeats for every live broker on
// the current leader (as their heartbeats would renew their leases), hands every moving
// partition to its target and completes every recovery, and records the most
// partitions it ever saw moving at once.
type brokerSim struct {
	mc      *memCluster
	stop    chan struct{}
	done    sync.WaitGroup
	maxSeen atomic.Int64
}

func startBrokerSim(mc *memCluster) *brokerSim {
	s := &brokerSim{mc: mc, stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			s.step()
		}
	}()
	mc.t.Cleanup(s.close)
	return s
}

func (s *brokerSim) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
}

func (s *brokerSim) step() {
	var c *Controller
	for _, x := range s.mc.ctrls {
		if x != nil && x.IsLeader() {
			c = x
		}
	}
	if c == nil {
		return
	}
	v := c.View()
	now := time.Now()
	for _, b := range v.Brokers {
		if b.Active() {
			c.leases.renew(b.ID, b.Epoch, "", now)
		}
	}
	if n := int64(movesInFlight(v)); n > s.maxSeen.Load() {
		s.maxSeen.Store(n)
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			b, _ := v.Broker(p.Leader)
			switch {
			case p.Moving:
				_, _ = c.propose(&completeMoveCmd{TopicID: t.ID, Partition: p.Index, From: p.Leader, FromEpoch: b.Epoch,
					EndOffset: p.Logs[len(p.Logs)-1].StartOffset, MoveGen: p.MoveGen})
			case p.Recovering && p.Leader >= 0:
				_, _ = c.propose(&completeRecoveryCmd{TopicID: t.ID, Partition: p.Index, Leader: p.Leader, BrokerEpoch: b.Epoch,
					LeaderEpoch: p.LeaderEpoch, EndOffset: p.Logs[len(p.Logs)-1].StartOffset})
			}
		}
	}
}

// evenTopic registers brokers 1, 2 and 3 in zones a, b and c on the leader c and creates
// topic "t" of n partitions, placed evenly over them.
func evenTopic(t *testing.T, c *Controller, n int32) {
	t.Helper()
	for i, rack := range []string{"a", "b", "c"} {
		if _, err := c.propose(&registerBrokerCmd{ID: int32(i + 1), Host: "h", Port: int32(i + 1), Rack: rack}); err != nil {
			t.Fatal(err)
		}
	}
	parts, ok := place(c.View(), nil, 0, n)
	if !ok {
		t.Fatal("no placement")
	}
	if _, err := c.propose(&createTopicCmd{Topic: metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: parts}}); err != nil {
		t.Fatal(err)
	}
}

// leaderCounts returns the partitions each broker leads in v.
func leaderCounts(v *metadata.View) map[int32]int {
	n := map[int32]int{}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			n[p.Leader]++
		}
	}
	return n
}

// TestMemQuorumBalancer: the leader's balancer at work in a quorum, on the fake clock
// of a synctest bubble with the default round interval. Three brokers in three zones
// lead 30 partitions evenly; broker 3 is fenced and its partitions fail over to 1 and
// 2 (Recovering: never moved until recovered); when 3 registers again, empty, just
// after a round, nothing moves until the next round one interval later, which begins
// the catch-up: half a share moving at once, the other half as soon as those are done;
// then each leads 10 and the balancer stops: no more moves over many rounds. A new
// leader carries on, its first round one interval after its first tick as leader.
// Metrics and the status say what it did.
func TestMemQuorumBalancer(t *testing.T) { synctest.Test(t, testMemQuorumBalancer) }

func testMemQuorumBalancer(t *testing.T) {
	reg := prometheus.NewRegistry()
	mc := newMemCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceMaxMoves = 3
		c.BalanceCooldown = time.Hour
		c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"test": "x"}, reg)
	})
	leader := mc.waitLeader()
	c := mc.ctrls[leader]
	interval := c.cfg.BalanceInterval
	evenTopic(t, c, 30)
	sim := startBrokerSim(mc)

	// Even already: no move.
	settle(10 * interval)
	if st := c.bal.status(); st.MovesTotal != 0 || time.Since(st.LastRound) >= interval || !strings.HasPrefix(st.LastDecision, "balanced") {
		t.Fatalf("balancer on an even cluster, 10 intervals on: %+v", st)
	}

	res := mustPropose(t, c, &fenceBrokerCmd{ID: 3, Epoch: 1, Plan: true})
	if fr := res.Value.(fenceResult); fr.FailedOver != 10 {
		t.Fatalf("fence: %+v", fr)
	}
	testutil.Eventually(t, memTimeout, "the failed-over partitions recovered", func() bool {
		n, _ := recovering(c.View())
		return n == 0
	})
	if n := leaderCounts(c.View()); n[1]+n[2] != 30 {
		t.Fatalf("after the failover: %v", n)
	}
	// Broker 3 returns right after a round: the next one comes an interval later, not
	// before (all rounds but a catch-up's second half keep to the interval's ticks).
	prev := c.bal.status().LastRound
	untilFake(t, 2*interval, time.Millisecond, "a balancer round", func() bool { return c.bal.status().LastRound.After(prev) })
	returned := time.Now()
	mustPropose(t, c, &registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "c"})
	settle(interval - time.Millisecond)
	if st := c.bal.status(); st.MovesTotal != 0 {
		t.Fatalf("moves %v after broker 3 returned, before the next round: %+v", time.Since(returned), st)
	}
	settle(time.Millisecond)
	if st := c.bal.status(); st.MovesTotal == 0 || !st.LastRound.Equal(returned.Add(interval)) {
		t.Fatalf("no move in the round an interval after broker 3 returned: %+v", st)
	}
	took := untilFake(t, memTimeout, time.Millisecond, "10 partitions each", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[1] == 10 && n[2] == 10 && n[3] == 10
	}) + interval
	// The second half begins at the balancer's next quick look (a tenth of an interval)
	// once the first half's hand-offs are done, which the brokers make within 10 ms.
	if limit := interval + interval/10 + 20*time.Millisecond; took > limit {
		t.Fatalf("broker 3 led its share %v after its return, want within %v: one interval, then a quick look", took, limit)
	}
	total := c.bal.status().MovesTotal
	settle(10 * interval) // ten more rounds in a steady state
	st := c.bal.status()
	if st.MovesTotal != total || st.MovesInFlight != 0 || !strings.HasPrefix(st.LastDecision, "balanced") || !st.Enabled || st.Controller != int32(leader+1) {
		t.Fatalf("a steady state moved on: %d → %d moves; %+v", total, st.MovesTotal, st)
	}
	if total != 10 {
		t.Fatalf("%d moves to bring back 10", total)
	}
	// The limit is 3, but broker 3 came back 10 short of its share: the catch-up moves
	// half of it (5) at once, then the other half.
	if m := sim.maxSeen.Load(); m != 5 {
		t.Fatalf("at most %d partitions moving at once, want 5: limit 3, a catch-up of 10 in two halves", m)
	}
	if n := sumMetric(t, reg, "weir_controller_balancer_moves_total"); n != float64(total) {
		t.Fatalf("moves metric %v, want %d", n, total)
	}
	if n := sumMetric(t, reg, "weir_controller_balancer_enabled"); n != 3 {
		t.Fatalf("enabled on %v controllers, want 3", n)
	}
	if len(st.Brokers) != 3 || st.Brokers[2].Leads != 10 {
		t.Fatalf("status brokers %+v", st.Brokers)
	}

	// A new leader balances too: broker 1 is fenced, its partitions go to 2 and 3;
	// registered again it gets its share back from the new leader, whose first round
	// comes one interval after its first tick as leader (the brokers' loads and leases
	// are known by then), not at that tick.
	mc.isolate(leader)
	nl := -1
	untilFake(t, memTimeout, time.Millisecond, "a new leader", func() bool {
		nl = mc.agreedLeader(leader)
		return nl >= 0
	})
	elected := time.Now()
	c = mc.ctrls[nl]
	b1, _ := c.View().Broker(1)
	mustPropose(t, c, &fenceBrokerCmd{ID: 1, Epoch: b1.Epoch, Plan: true})
	testutil.Eventually(t, memTimeout, "broker 1's partitions recovered elsewhere", func() bool {
		n, _ := recovering(c.View())
		return n == 0 && leaderCounts(c.View())[1] == 0
	})
	mustPropose(t, c, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	untilFake(t, 3*interval, time.Millisecond, "the new leader's first move", func() bool { return c.bal.status().MovesTotal > 0 })
	if first := time.Since(elected); first <= interval || first > 2*interval {
		t.Fatalf("the new leader's first round %v after its election, want in (%v, %v]", first, interval, 2*interval)
	}
	testutil.Eventually(t, memTimeout, "broker 1 leads 10 again", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[1] == 10 && n[2] == 10 && n[3] == 10
	})
	mc.heal(leader)
}

// TestMemQuorumBalancerCatchUp: 300 partitions over three brokers in three zones;
// broker 3 is fenced, its partitions fail over to 1 and 2, and it registers again,
// empty, just after a round. The leader's balancer (the default interval of 3 s on the
// fake clock of a synctest bubble, limit 4 in flight) gives it its share (the
// catch-up fills it to 100) in two rounds of half a share: the first at the next
// round, one interval after the return, the second as soon as the first's moves are
// done (the next quick look, a tenth of an interval later): within an interval of the
// return plus a tenth and two hand-offs, inside issue 22's 10 s. Without the catch-up,
// 4 moves a round, it takes 23 rounds to reach the share less the threshold, 90
// (1,000 partitions: 75 rounds, 225 s). A steady state then makes no move.
func TestMemQuorumBalancerCatchUp(t *testing.T) { synctest.Test(t, testMemQuorumBalancerCatchUp) }

func testMemQuorumBalancerCatchUp(t *testing.T) {
	mc := newMemCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceMaxMoves = 4
		c.BalanceCooldown = time.Hour
	})
	c := mc.ctrls[mc.waitLeader()]
	interval := c.cfg.BalanceInterval
	evenTopic(t, c, 300)
	sim := startBrokerSim(mc)
	b3 := leaderCounts(c.View())[3]
	res, err := c.propose(&fenceBrokerCmd{ID: 3, Epoch: 1, Plan: true})
	if err != nil {
		t.Fatal(err)
	}
	if fr := res.Value.(fenceResult); fr.FailedOver != b3 || b3 != 100 {
		t.Fatalf("fence: %+v, broker 3 led %d", fr, b3)
	}
	testutil.Eventually(t, memTimeout, "the failed-over partitions recovered", func() bool {
		n, _ := recovering(c.View())
		return n == 0
	})
	prev := c.bal.status().LastRound
	untilFake(t, 2*interval, time.Millisecond, "a balancer round", func() bool { return c.bal.status().LastRound.After(prev) })
	c.bal.mu.Lock()
	rounds, moves := c.bal.movingRounds, c.bal.total
	c.bal.mu.Unlock()
	if _, err := c.propose(&registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "c"}); err != nil {
		t.Fatal(err)
	}
	settle(interval - time.Millisecond)
	if st := c.bal.status(); st.MovesTotal != moves {
		t.Fatalf("moves before the round an interval after broker 3 returned: %+v", st)
	}
	took := untilFake(t, memTimeout, time.Millisecond, "broker 3 leading its share again", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[3] == 100
	}) + interval - time.Millisecond
	c.bal.mu.Lock()
	rounds, moves = c.bal.movingRounds-rounds, c.bal.total-moves
	c.bal.mu.Unlock()
	t.Logf("broker 3 led its share %v after its return: %d moves in %d rounds, at most %d at once (fake clock)", took, moves, rounds, sim.maxSeen.Load())
	if limit := interval + interval/10 + 20*time.Millisecond; took > limit {
		t.Fatalf("broker 3 led its share %v after its return, want within %v: one interval, then a quick look", took, limit)
	}
	if rounds != 2 || moves != 100 {
		t.Fatalf("%d moves in %d rounds gave broker 3 its share, want 100 in 2 (limit 4 in flight)", moves, rounds)
	}
	if m := sim.maxSeen.Load(); m != 50 {
		t.Fatalf("at most %d moving at once: want the catch-up, half a share (50)", m)
	}
	total := c.bal.status().MovesTotal
	settle(10 * interval) // ten more rounds in a steady state
	if st := c.bal.status(); st.MovesTotal != total || !strings.HasPrefix(st.LastDecision, "balanced") {
		t.Fatalf("a steady state after the catch-up moved on: %d → %d moves, %q", total, st.MovesTotal, st.LastDecision)
	}
}

// TestBalancerAPI: brokers report their load with heartbeats (ctlclient.ClientConfig.LoadReport);
// the leader's balancer weighs it: of two brokers leading five partitions each, the one
// with a hot partition sheds its idle ones. The brokers' clients complete the moves as
// brokers do. GET /v1/balancer through a follower answers with the leader's state.
func TestBalancerAPI(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceInterval = 100 * time.Millisecond
	})
	leader := tc.waitLeader()
	ctx := ctxT(t)
	var hot atomic.Int64
	loads := func(id int32) func() []metadata.PartitionLoad {
		return func() []metadata.PartitionLoad {
			if id != 1 || hot.Load() == 0 {
				return nil
			}
			return []metadata.PartitionLoad{{Topic: "t", Partition: 0, BytesPerSec: hot.Load()}, {Topic: "t", Partition: 2, BytesPerSec: 0}}
		}
	}
	var clients []*ctlclient.Client
	for id := int32(1); id <= 2; id++ {
		cl := tc.client(id, func(c *ctlclient.ClientConfig) {
			c.LoadReport = loads(id)
			c.LoadReportInterval = 100 * time.Millisecond
		})
		if err := cl.RegisterBroker(ctx, brokerFor(id, "a")); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	if _, err := clients[0].CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 10, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if p := clients[0].View().Topics["t"].Partitions[0]; p.Leader != 1 {
		t.Fatalf("t/0 led by %d, want 1", p.Leader)
	}
	// The brokers hand off what they are asked to move.
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func(cl *ctlclient.Client, self int32) {
			defer wg.Done()
			for hctx.Err() == nil {
				ch := cl.Changed()
				if top := cl.View().Topics["t"]; top != nil {
					for _, p := range top.Partitions {
						if p.Moving && p.Leader == self {
							_ = cl.CompleteMoveGen(hctx, top.ID, p.Index, p.Logs[len(p.Logs)-1].StartOffset, p.MoveGen)
						}
					}
				}
				select {
				case <-ch:
				case <-hctx.Done():
				}
			}
		}(cl, int32(i+1)) // clients[i] is broker i+1
	}
	defer func() { cancel(); wg.Wait() }()

	fc := tc.client(-1, nil, tc.follower(leader))
	st, err := fc.Balancer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Enabled || st.Controller != int32(leader+1) || st.MaxMoves != 4 || st.IntervalMs != 100 {
		t.Fatalf("balancer status through a follower: %+v", st)
	}
	time.Sleep(500 * time.Millisecond) // on purpose: a few rounds without load
	if st, _ := fc.Balancer(ctx); st.MovesTotal != 0 {
		t.Fatalf("moves without load: %+v", st)
	}
	hot.Store(1 << 20)
	testutil.Eventually(t, 30*time.Second, "the hot broker to shed its idle partitions", func() bool {
		v := clients[0].View()
		return movesInFlight(v) == 0 && leaderCounts(v)[1] == 1 && v.Topics["t"].Partitions[0].Leader == 1
	})
	testutil.EventuallyNoError(t, 30*time.Second, "a round after the moves", func() error {
		st, err = fc.Balancer(ctx)
		if err == nil && !strings.HasPrefix(st.LastDecision, "balanced") {
			err = fmt.Errorf("last decision %q", st.LastDecision)
		}
		return err
	})
	if st.MovesTotal != 4 || st.ReportedPartitions != 1 || st.Brokers[0].BytesPerSec != 1<<20 || st.LastRound.IsZero() {
		t.Fatalf("status after balancing: %+v", st)
	}
}
