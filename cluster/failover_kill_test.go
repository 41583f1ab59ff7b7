package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// ledBy lists the partitions of topic the controllers' view gives to broker id.
func ledBy(v *metadata.View, topic string, id int32) []int32 {
	var out []int32
	if t := v.Topics[topic]; t != nil {
		for _, p := range t.Partitions {
			if p.Leader == id {
				out = append(out, p.Index)
			}
		}
	}
	return out
}

// allServed reports whether every partition of topic has an active leader that is not
// recovering, and none is led by one of the dead brokers.
func allServed(v *metadata.View, topic string, dead ...int32) bool {
	t := v.Topics[topic]
	if t == nil {
		return false
	}
	for _, p := range t.Partitions {
		b, ok := v.Broker(p.Leader)
		if !ok || !b.Active() || p.Recovering {
			return false
		}
		for _, d := range dead {
			if p.Leader == d {
				return false
			}
		}
	}
	return true
}

// A broker killed under an idempotent load: its partitions move to the live brokers
// (sealing its WAL and reading its tail, no data copied), producers keep going after a
// short wait, and every acked record reads back at its offset, once.
func TestFailoverKillBrokerUnderLoad(t *testing.T) {
	c := startCluster(t, nil)
	adm := kadm.NewClient(newClient(t, c))
	const parts = 12
	if err := createTopic(t, adm, parts, "fo"); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c, "fo", parts, 3, 5*time.Millisecond)
	testutil.Eventually(t, time.Minute, "load running", func() bool { return l.acks() > 300 })

	const victim = 2
	led := ledBy(c.LeaderController().View(), "fo", victim)
	if len(led) == 0 {
		t.Fatalf("broker %d leads no partition of fo", victim)
	}
	fault := time.Now()
	c.KillBroker(victim - 1)
	testutil.Eventually(t, time.Minute, "the killed broker's partitions served elsewhere", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "fo", victim)
	})
	moved := time.Since(fault)
	before := l.acks()
	testutil.Eventually(t, time.Minute, "producers ack again", func() bool { return l.acks() > before+300 })
	l.finish()

	un := l.unavailability(fault)
	var onVictim []time.Duration
	for _, p := range led {
		onVictim = append(onVictim, un[p])
	}
	t.Logf("partitions of the killed broker writable again after %s; all served after %v", percentiles(onVictim), moved)
	if r := l.verify(c); !r.OK() || r.Failed != 0 {
		t.Fatalf("after failover: %v", r)
	}
}

// Two brokers killed one after the other: the second takes partitions over and dies
// before or after completing; the last broker ends up serving everything, with nothing
// acked lost or duplicated.
func TestFailoverKillTwoBrokers(t *testing.T) {
	// No balancer: it would move partitions back to the returning brokers (catch-up),
	// and the end of the test checks that a return alone takes nothing back.
	c := startCluster(t, func(cfg *Config) {
		cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
	})
	adm := kadm.NewClient(newClient(t, c))
	const parts = 9
	if err := createTopic(t, adm, parts, "fo2"); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c, "fo2", parts, 2, 5*time.Millisecond)
	testutil.Eventually(t, time.Minute, "load running", func() bool { return l.acks() > 200 })
	c.KillBroker(0)
	// The first failover starts (broker 1 is no longer active), not necessarily finishes.
	testutil.Eventually(t, time.Minute, "the controllers to fence broker 1", func() bool {
		i := c.LeaderIndex()
		if i < 0 {
			return false
		}
		b, ok := c.Controller(i).View().Broker(1)
		return !ok || !b.Active()
	})
	c.KillBroker(1)
	testutil.Eventually(t, time.Minute, "broker 3 serves everything", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "fo2", 1, 2)
	})
	before := l.acks()
	testutil.Eventually(t, time.Minute, "producers ack again", func() bool { return l.acks() > before+200 })
	l.finish()
	if r := l.verify(c); !r.OK() || r.Failed != 0 {
		t.Fatalf("after two failovers: %v", r)
	}
	// The dead brokers come back with new epochs and serve nothing of fo2 until moved.
	for i := 0; i < 2; i++ {
		if err := c.StartBroker(i); err != nil {
			t.Fatal(err)
		}
	}
	v := c.LeaderController().View()
	for _, id := range []int32{1, 2} {
		if got := ledBy(v, "fo2", id); len(got) != 0 {
			t.Fatalf("broker %d took partitions %v back on its return", id, got)
		}
	}
}

// After a failover the takers upload the dead broker's tail to objects like any data
// of theirs, and once everything the sealed WAL directory held is in objects the
// directory is deleted: nothing was copied between brokers, and nothing is kept for ever.
func TestFailoverDeadWALUploadedAndDeleted(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.Tier.MaxUploadDelay = 200 * time.Millisecond
			b.Tier.CheckInterval = 20 * time.Millisecond
			b.Tier.RetentionInterval = 100 * time.Millisecond
		}
	})
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 6, "gc"); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c, "gc", 6, 2, 5*time.Millisecond)
	testutil.Eventually(t, time.Minute, "load running", func() bool { return l.acks() > 300 })
	dirs, _ := filepath.Glob(filepath.Join(c.cfg.Dir, "wal", "broker-2", "epoch-*"))
	if len(dirs) != 1 {
		t.Fatalf("broker 2's WAL directories: %v", dirs)
	}
	c.KillBroker(1)
	testutil.Eventually(t, time.Minute, "broker 2's partitions served elsewhere", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "gc", 2)
	})
	// Two minutes: the upload, the seal and the collector's round each wait their turn
	// on a machine running the whole suite (a CI run took over one).
	testutil.Eventually(t, 2*time.Minute, "the dead broker's WAL directory deleted once uploaded", func() bool {
		_, err := os.Stat(dirs[0])
		return os.IsNotExist(err)
	})
	l.finish()
	if r := l.verify(c); !r.OK() || r.Failed != 0 {
		t.Fatalf("after the dead WAL was deleted: %v", r)
	}
}

// The controller leader dies right after it fenced a broker: the plan was in the same
// Raft command as the fence, so the next leader has it, and the takers complete their
// recoveries through it.
func TestFailoverSurvivesControllerLeaderKill(t *testing.T) {
	c := startCluster(t, nil)
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 6, "cl"); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c, "cl", 6, 2, 5*time.Millisecond)
	testutil.Eventually(t, time.Minute, "load running", func() bool { return l.acks() > 200 })
	c.KillBroker(2)
	leader := -1
	testutil.Eventually(t, time.Minute, "broker 3 fenced", func() bool {
		leader = c.LeaderIndex()
		if leader < 0 {
			return false
		}
		b, ok := c.Controller(leader).View().Broker(3)
		return ok && !b.Active()
	})
	if err := c.StopController(leader); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "broker 3's partitions served after the controller leader changed", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && i != leader && allServed(c.Controller(i).View(), "cl", 3)
	})
	if err := c.StartController(leader); err != nil {
		t.Fatal(err)
	}
	before := l.acks()
	testutil.Eventually(t, time.Minute, "producers ack again", func() bool { return l.acks() > before+200 })
	l.finish()
	if r := l.verify(c); !r.OK() || r.Failed != 0 {
		t.Fatalf("after a failover across a controller leader change: %v", r)
	}
}
