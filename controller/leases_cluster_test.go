package controller

import (
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// TestLeaderCannotFenceABrokerTheOthersHear: the broker heartbeats only the two
// followers (the leader is cut off from it). The leader, silent about the broker for
// longer than LeaseTimeout+LeaseGrace, asks for a fence, but the followers vote no,
// so the broker stays registered and keeps a valid lease, acknowledged by a majority
// without the leader. Without the votes the leader fenced a broker that held a lease.
func TestLeaderCannotFenceABrokerTheOthersHear(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.LeaseTimeout, c.LeaseGrace = 500*time.Millisecond, 0 })
	leader := tc.waitLeader()
	var fs []int
	for i := range tc.ctrls {
		if i != leader {
			fs = append(fs, i)
		}
	}
	ctx := ctxT(t)
	b := tc.client(1, nil, fs...)
	if err := b.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a lease from the two followers", func() bool { return b.LeaseValid(time.Now()) })
	// Four times the leader's silent-broker timeout: it proposes the fence every 25 ms.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if br, _ := tc.ctrls[leader].View().Broker(1); !br.Active() {
			t.Fatalf("the leader fenced a broker a majority of controllers heard from: %+v", br)
		}
		time.Sleep(50 * time.Millisecond) // sampling the leader's View
	}
	if b.Epoch() != 1 {
		t.Fatalf("broker epoch %d", b.Epoch())
	}
	testutil.Eventually(t, 10*time.Second, "the lease still valid", func() bool { return b.LeaseValid(time.Now()) })

	// Now the broker stops: the followers' silence reaches the suspect timeout, they
	// vote yes, and the fence goes through.
	b.PauseHeartbeats(true)
	testutil.Eventually(t, 30*time.Second, "broker 1 fenced once silent everywhere", func() bool {
		br, _ := tc.ctrls[leader].View().Broker(1)
		return br.State == metadata.BrokerFenced
	})
	if b.LeaseValid(time.Now()) {
		t.Fatal("fenced while the broker's lease looked valid")
	}
	// A follower that voted yes refuses the registration's heartbeats from then on.
	b.PauseHeartbeats(false)
	fenced := b.Fenced()
	testutil.Eventually(t, 30*time.Second, "the broker told it is fenced", func() bool { return isClosed(fenced) })
}

// TestLeaseHoldsWithoutALeader: brokers' leases need no Raft leader. With the leader
// stopped and the two others unable to elect one (their Raft connections cut), a broker
// heartbeating them keeps a valid lease long after any lease granted by the old
// leader ran out, and is fenced by nobody. In real time, not in a synctest bubble like
// the other memCluster tests: the broker is a real ctlclient.Client, which dials the
// API over loopback sockets (socket I/O is not durably blocking, so the fake clock
// would not move while it waits) and measures its lease on CLOCK_BOOTTIME, which the
// fake clock does not move either (a lease would never look expired).
func TestLeaseHoldsWithoutALeader(t *testing.T) {
	mc := newMemClusterTCP(t, 3, func(c *Config) { c.LeaseTimeout = 2 * time.Second })
	leader := mc.waitLeader()
	ctx := ctxT(t)
	var addrs []string
	for _, p := range mc.peers {
		addrs = append(addrs, p.APIAddr)
	}
	cfg := ctlclient.DefaultClientConfig()
	cfg.BrokerID, cfg.Controllers, cfg.Logger = 1, addrs, testLogger()
	b, err := ctlclient.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a lease", func() bool { return b.LeaseValid(time.Now()) })

	mc.stop(leader)
	other := (leader + 1) % 3
	mc.isolate(other) // the last two cannot elect a leader: no vote from each other
	noLeader := func() bool {
		for _, c := range mc.ctrls {
			if c != nil && c.IsLeader() {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, 10*time.Second, "no leader", noLeader)
	since := time.Now()
	// Well past the 300 ms lease and any answer the old leader gave.
	time.Sleep(1500 * time.Millisecond) // letting leases granted before the stop run out
	testutil.Eventually(t, 10*time.Second, "a lease held with no leader", func() bool { return b.LeaseValid(time.Now()) })
	if !noLeader() {
		t.Fatal("a leader was elected after all: the test proves nothing")
	}
	t.Logf("lease valid %v after the last leader stopped, with no leader since", time.Since(since).Round(time.Millisecond))
}

// TestClosedHeartbeatConnectionHintsDeath: when the connections a broker heartbeats on
// close (its process died: the kernel closes them), the leader fences it once it has
// been silent for the suspect timeout, without waiting for the long silent-broker
// timeout (an hour here) or for gossip.
func TestClosedHeartbeatConnectionHintsDeath(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.LeaseTimeout = time.Hour })
	leader := tc.waitLeader()
	ctx := ctxT(t)
	b := tc.client(1, nil)
	if err := b.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a lease", func() bool { return b.LeaseValid(time.Now()) })
	// The leader must have a heartbeat connection of the broker's to see close: the
	// lease may come from the registration and a follower's heartbeat first.
	testutil.Eventually(t, 10*time.Second, "a heartbeat connection at the leader", func() bool {
		n := 0
		tc.ctrls[leader].hbConns.Range(func(_, id any) bool {
			if id.(int32) == 1 {
				n++
			}
			return true
		})
		return n > 0
	})
	b.Close() // closes the heartbeat connections, as the kernel does for a dead process
	testutil.Eventually(t, 20*time.Second, "broker 1 fenced after its connections closed", func() bool {
		br, _ := tc.ctrls[leader].View().Broker(1)
		return br.State == metadata.BrokerFenced
	})
}
