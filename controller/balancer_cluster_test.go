package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
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
	parts, ok := place(c.View(), 0, n)
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

// TestMemQuorumBalancer: the leader's balancer at work in a quorum. Three brokers in
// three zones lead 30 partitions evenly; broker 3 is fenced and its partitions fail
// over to 1 and 2 (Recovering: never moved until recovered); when 3 registers again,
// empty, the balancer moves partitions to it until each leads about 10, never more than
// its share (the catch-up) moving at once, and then stops: no more moves over many
// rounds. A new leader carries on. Metrics and the status say what it did.
func TestMemQuorumBalancer(t *testing.T) {
	reg := prometheus.NewRegistry()
	mc := newMemCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceInterval = 30 * time.Millisecond
		c.BalanceMaxMoves = 3
		c.BalanceCooldown = time.Hour
		c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"test": "x"}, reg)
	})
	leader := mc.waitLeader()
	c := mc.ctrls[leader]
	must := func(cmd command) *applyResult {
		t.Helper()
		res, err := c.propose(cmd)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		return res
	}
	evenTopic(t, c, 30)
	sim := startBrokerSim(mc)

	// Even already: no move.
	time.Sleep(300 * time.Millisecond) // on purpose: ten balancer rounds
	if st := c.bal.status(); st.MovesTotal != 0 || st.LastRound.IsZero() || st.LastDecision != "balanced" {
		t.Fatalf("balancer on an even cluster: %+v", st)
	}

	res := must(&fenceBrokerCmd{ID: 3, Epoch: 1, Plan: true})
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
	must(&registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "c"})
	testutil.Eventually(t, memTimeout, "about 10 partitions each", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[3] >= 9 && n[1] <= 11 && n[2] <= 11
	})
	total := c.bal.status().MovesTotal
	time.Sleep(300 * time.Millisecond) // on purpose: ten more rounds in a steady state
	st := c.bal.status()
	if st.MovesTotal != total || st.MovesInFlight != 0 || st.LastDecision != "balanced" || !st.Enabled || st.Controller != int32(leader+1) {
		t.Fatalf("a steady state moved on: %d → %d moves; %+v", total, st.MovesTotal, st)
	}
	if total < 9 || total > 11 {
		t.Fatalf("%d moves to bring back about 10", total)
	}
	// The limit is 3, but broker 3 came back 10 short of its share: the catch-up.
	if m := sim.maxSeen.Load(); m > 10 {
		t.Fatalf("%d partitions moving at once, limit 3, catch-up 10", m)
	}
	if n := sumMetric(t, reg, "weir_controller_balancer_moves_total"); n != float64(total) {
		t.Fatalf("moves metric %v, want %d", n, total)
	}
	if n := sumMetric(t, reg, "weir_controller_balancer_enabled"); n != 3 {
		t.Fatalf("enabled on %v controllers, want 3", n)
	}
	if len(st.Brokers) != 3 || st.Brokers[2].Leads < 9 {
		t.Fatalf("status brokers %+v", st.Brokers)
	}

	// A new leader balances too: broker 1 is fenced, its partitions go to 2 and 3;
	// registered again it gets its share back from the new leader.
	mc.isolate(leader)
	nl := mc.waitLeader(leader)
	c = mc.ctrls[nl]
	testutil.EventuallyNoError(t, memTimeout, "fencing broker 1", func() error {
		b, _ := c.View().Broker(1)
		_, err := c.propose(&fenceBrokerCmd{ID: 1, Epoch: b.Epoch, Plan: true})
		return err
	})
	testutil.Eventually(t, memTimeout, "broker 1's partitions recovered elsewhere", func() bool {
		n, _ := recovering(c.View())
		return n == 0 && leaderCounts(c.View())[1] == 0
	})
	must(&registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	testutil.Eventually(t, memTimeout, "broker 1 leads about 10 again", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[1] >= 9 && n[2] <= 11 && n[3] <= 11
	})
	mc.heal(leader)
}

// TestMemQuorumBalancerCatchUp: 300 partitions over three brokers in three zones;
// broker 3 is fenced, its partitions fail over to 1 and 2, and it registers again,
// empty. The leader's balancer (limit 4 in flight) gives it its share (at least the
// share less the threshold, 90; the catch-up fills it to 100) in two rounds of half a
// share, the second as soon as the first's moves are done (a top-up or two at most):
// with the default round every 3 s that is within an interval of the return plus two
// hand-offs, inside issue 22's 10 s. Without the catch-up, 4 moves a round, it takes 23
// rounds (1,000 partitions: 75 rounds, 225 s). A steady state then makes no move.
func TestMemQuorumBalancerCatchUp(t *testing.T) {
	mc := newMemCluster(t, 3, func(c *Config) {
		c.Balance = true
		c.BalanceInterval = time.Second // the catch-up's rounds come as soon as its moves are done
		c.BalanceMaxMoves = 4
		c.BalanceCooldown = time.Hour
	})
	c := mc.ctrls[mc.waitLeader()]
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
	c.bal.mu.Lock()
	rounds, moves := c.bal.movingRounds, c.bal.total
	c.bal.mu.Unlock()
	if _, err := c.propose(&registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "c"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, memTimeout, "broker 3 leads its share again", func() bool {
		n := leaderCounts(c.View())
		return movesInFlight(c.View()) == 0 && n[3] >= 90
	})
	c.bal.mu.Lock()
	rounds, moves = c.bal.movingRounds-rounds, c.bal.total-moves
	c.bal.mu.Unlock()
	// Two rounds of half a share; a round on the interval's tick while a half is still
	// moving tops it up: four at most, however slow the machine.
	if rounds > 4 || moves < 90 || moves > 110 {
		t.Fatalf("%d moves in %d rounds gave broker 3 its share, want it in at most 4 rounds (limit 4 in flight)", moves, rounds)
	}
	if m := sim.maxSeen.Load(); m < 20 || m > 54 {
		t.Fatalf("at most %d moving at once: want the catch-up, up to half a share (50)", m)
	}
	total := c.bal.status().MovesTotal
	time.Sleep(2500 * time.Millisecond) // on purpose: two more rounds in a steady state
	if st := c.bal.status(); st.MovesTotal != total || st.LastDecision != "balanced" {
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
		if err == nil && st.LastDecision != "balanced" {
			err = fmt.Errorf("last decision %q", st.LastDecision)
		}
		return err
	})
	if st.MovesTotal != 4 || st.ReportedPartitions != 1 || st.Brokers[0].BytesPerSec != 1<<20 || st.LastRound.IsZero() {
		t.Fatalf("status after balancing: %+v", st)
	}
}
