package gossip

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// TestCrashDetection closes one member of three without leaving (a crash: its address
// goes away and its streams close) and checks on the fake clock when each survivor
// fires OnLeave, over many trials. With the defaults the verdict takes
//
//	≤ 2 probe rounds until some survivor probes the victim (each survivor probes its
//	  2 peers in turn, one per ProbeInterval, reshuffled every round) +
//	1 failed probe (its ack handler times out after ProbeInterval) +
//	the minimum suspicion timeout (SuspicionMult × ProbeInterval: with 3 members no
//	  other member can confirm, so memberlist does not stretch it) +
//	≤ 2 GossipIntervals for the other survivor to hear the suspicion or the verdict
//	  (one, unless the gossip round misses it: memberlist draws a round's targets
//	  at random, 9 draws among the 3 members, so a peer misses a round 2.6% of the
//	  time; two in a row, and the other's own timer late too, all but never)
//
// so every OnLeave lands in [ProbeInterval + suspicion, 3 ProbeIntervals + suspicion +
// 2 GossipIntervals] = [500 ms, 900 ms] after the crash (observed: 500–790 ms). Fake
// time makes these bounds exact however loaded the machine is. The trials crash the
// victim at random phases of
// the probe rounds, so the best case, a probe right after the crash, shows up too: the
// fastest OnLeave is below 600 ms (in a trial, with probability over one half; in 20
// trials, all but surely). A change to the failure detector's tuning or wiring (probe
// interval, suspicion multiplier, OnLeave) that shifts detection by a probe interval
// crosses one of these bounds.
func TestCrashDetection(t *testing.T) {
	suspicion := time.Duration(DefaultSuspicionMult) * DefaultProbeInterval
	lo := DefaultProbeInterval + suspicion
	hi := 3*DefaultProbeInterval + suspicion + 2*DefaultGossipInterval
	if all := simulatedCrashes(t, 3, 20, lo, hi); len(all) > 0 && all[0] >= lo+DefaultProbeInterval {
		t.Fatalf("fastest OnLeave %v after the crash, want below %v", all[0], lo+DefaultProbeInterval)
	}
}

// TestCrashDetectionLargerCluster: with 5 members the suspicion timeout starts at
// SuspicionMaxTimeoutMult × the minimum and shrinks as other members confirm
// (Lifeguard); the crash is still detected, by every survivor, within the maximum.
func TestCrashDetectionLargerCluster(t *testing.T) {
	suspicion := time.Duration(DefaultSuspicionMult) * DefaultProbeInterval
	// ≤ 2 rounds of 4 peers until probed, the failed probe, the longest suspicion,
	// and gossip rounds to spread the verdict.
	hi := 9*DefaultProbeInterval + DefaultSuspicionMaxTimeoutMult*suspicion + 2*DefaultGossipInterval
	simulatedCrashes(t, 5, 5, DefaultProbeInterval+suspicion, hi)
}

// simulatedCrashes runs crashTrial with size members in trials simulations, checks that
// every OnLeave came within [lo, hi] of the crash and returns the times sorted (none
// if a trial failed).
func simulatedCrashes(t *testing.T, size, trials int, lo, hi time.Duration) []time.Duration {
	t.Helper()
	var all []time.Duration
	for range trials {
		simulate(t, func(t *testing.T, mn *memNetwork) {
			all = append(all, crashTrial(t, mn.config, size, true)...)
		})
		if t.Failed() {
			return nil
		}
	}
	slices.Sort(all)
	t.Logf("crash detection, %d members, fake time: min %v, median %v, max %v over %d observations", size,
		all[0].Round(time.Millisecond), all[len(all)/2].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond), len(all))
	if all[0] < lo || all[len(all)-1] > hi {
		t.Fatalf("OnLeave %v to %v after the crash, want within [%v, %v]", all[0], all[len(all)-1], lo, hi)
	}
	return all
}

// TestCrashDetectionRealNetwork is the crash on loopback UDP and TCP with real timers,
// the production path: it checks only that the crash is detected (within a generous
// deadline), not when nor that nothing else was suspected, and logs how long it took. WEIR_GOSSIP_DETECT_TRIALS and
// WEIR_GOSSIP_DETECT_SIZE repeat it or change the cluster size (measurements for the
// package doc).
func TestCrashDetectionRealNetwork(t *testing.T) {
	trials := 1
	if s := os.Getenv("WEIR_GOSSIP_DETECT_TRIALS"); s != "" {
		trials, _ = strconv.Atoi(s)
	}
	size := 3
	if s := os.Getenv("WEIR_GOSSIP_DETECT_SIZE"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	var all []time.Duration
	for trial := 1; trial <= trials; trial++ {
		got := crashTrial(t, testConfig, size, false)
		t.Logf("trial %d (%d members): Close() → OnLeave on each survivor after %v", trial, size, got)
		all = append(all, got...)
	}
	slices.Sort(all)
	t.Logf("crash detection on loopback with defaults (probe %v, probe timeout %v, suspicion mult %d): min %v, median %v, max %v over %d observations",
		DefaultProbeInterval, DefaultProbeTimeout, DefaultSuspicionMult,
		all[0].Round(time.Millisecond), all[len(all)/2].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond), len(all))
}

// crashTrial starts size members at random instants, lets them run, closes the last
// one without leaving at a random instant and returns how long after Close each
// survivor fired OnLeave for it, having checked the OnLeave's metadata and the
// survivors' views, and with exact their metrics: no other member was suspected.
// Only fake time makes that certain: on a loaded machine, real timers of 50 ms can
// expire before a live member's ack is read. The members are closed when it returns.
func crashTrial(t *testing.T, mk configFunc, size int, exact bool) []time.Duration {
	t.Helper()
	nodes := startClusterStaggered(t, mk, size, DefaultProbeInterval)
	defer func() {
		for _, n := range nodes {
			_ = n.g.Close()
		}
	}()
	// Not synchronisation (startCluster waited for convergence): what is measured is
	// how fast a cluster that has been running notices a crash, so a few probe rounds
	// pass first instead of measuring from the join transient, where every member has
	// just reshuffled its probe order. The random part puts the crash at any phase of
	// the probe rounds.
	time.Sleep(3*DefaultProbeInterval + rand.N(DefaultProbeInterval))
	victim := nodes[len(nodes)-1]
	survivors := nodes[:len(nodes)-1]
	closedAt := time.Now()
	if err := victim.g.Close(); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, n := range survivors {
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
		if !exact {
			break
		}
		if v := metricValue(t, n.reg, "weir_gossip_suspect_events_total"); v != 1 {
			t.Fatalf("suspect_events_total = %v, want 1", v)
		}
		if v := metricValue(t, n.reg, "weir_gossip_members_alive"); v != float64(size-1) {
			t.Fatalf("members_alive = %v, want %d", v, size-1)
		}
	}
	return got
}
