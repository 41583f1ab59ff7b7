package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestMemQuorumFailoverSurvivesLeaderChange: the failover plan is part of the fence
// command, so once the fence is committed every replica holds the whole plan; a new
// controller leader, elected between the fence and the completion, accepts the
// completion, and the old leader, back on its stores, ends up with the same state.
// In a synctest bubble: the elections take no real time.
func TestMemQuorumFailoverSurvivesLeaderChange(t *testing.T) {
	synctest.Test(t, testMemQuorumFailoverSurvivesLeaderChange)
}

func testMemQuorumFailoverSurvivesLeaderChange(t *testing.T) {
	mc := newMemCluster(t, 3, nil)
	old := mc.waitLeader()
	c := mc.ctrls[old]
	mustPropose(t, c, &registerBrokerCmd{ID: 1, Host: "h1", Port: 1, Rack: "a"})
	mustPropose(t, c, &registerBrokerCmd{ID: 2, Host: "h2", Port: 2, Rack: "a"})
	mustPropose(t, c, &registerBrokerCmd{ID: 3, Host: "h3", Port: 3, Rack: "b"})
	tid := metadata.NewTopicID()
	mustPropose(t, c, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: tid, Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 2}, {Leader: 3}}}})
	res := mustPropose(t, c, &fenceBrokerCmd{ID: 1, Epoch: 1, Plan: true})
	if fr := res.Value.(fenceResult); fr.FailedOver != 2 {
		t.Fatalf("fence: %+v", fr)
	}
	mc.waitSame(res.Version)

	mc.isolate(old)
	leader := mc.waitLeader(old)
	nc := mc.ctrls[leader]
	for i := int32(0); i < 2; i++ {
		p := nc.View().TopicByID(tid).Partitions[i]
		if p.Leader != 2 || !p.Recovering || p.RecoverEpoch != 1 || p.LeaderEpoch != 1 {
			t.Fatalf("the new leader's t/%d: %+v", i, p)
		}
		cmd := &completeRecoveryCmd{TopicID: tid, Partition: i, Leader: 2, BrokerEpoch: 1, LeaderEpoch: 1, EndOffset: 100 + int64(i)}
		// Safe to retry through an election: the same completion again is a no-op.
		testutil.EventuallyNoError(t, memTimeout, "completing the recovery on the new leader", func() error {
			_, err := mc.ctrls[mc.waitLeader(old)].propose(cmd)
			return err
		})
	}
	version := mc.ctrls[mc.waitLeader(old)].View().Version
	mc.waitSame(version, old)
	mc.stop(old)
	mc.heal(old)
	mc.restart(old)
	mc.waitSame(version)
	for i, ctl := range mc.ctrls {
		for j := int32(0); j < 2; j++ {
			p := ctl.View().TopicByID(tid).Partitions[j]
			want := []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 100 + int64(j)}}
			if p.Recovering || p.Leader != 2 || !reflect.DeepEqual(p.Logs, want) {
				t.Fatalf("controller %d, t/%d: %+v", i+1, j, p)
			}
		}
	}
}

// sumMetric adds up a counter or gauge over every controller sharing reg.
func sumMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	var n float64
	for _, m := range gather(t, reg)[name] {
		if m.GetCounter() != nil {
			n += m.GetCounter().GetValue()
		} else {
			n += m.GetGauge().GetValue()
		}
	}
	return n
}

// TestLeaseExpiryFailover: a broker that stops heartbeating is fenced, and its own lease
// has already run out by then; at the fence its partitions move to a live broker of
// its zone, Recovering; placement skips it. The taker completes each recovery through
// its client (and again, harmlessly); a non-leader and a stale leader epoch are
// refused. The fenced broker learns it from its next heartbeat: Fenced closes, its
// lease stays invalid, and it does not register again by itself. An explicit
// registration gives it a new epoch (OnEpochChange) and a new Fenced channel.
func TestLeaseExpiryFailover(t *testing.T) {
	reg := prometheus.NewRegistry()
	tc := newTestCluster(t, 3, func(c *Config) {
		c.LeaseTimeout = time.Second
		c.LeaseGrace = 300 * time.Millisecond
		c.Registerer = reg
	})
	tc.waitLeader()
	ctx := ctxT(t)
	var epochChanges sync.Map
	b1 := tc.client(1, func(c *ctlclient.ClientConfig) {
		c.OnEpochChange = func(o, n int64) { epochChanges.Store(o, n) }
	})
	if err := b1.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	b2, b3 := tc.broker(2, "a"), tc.broker(3, "b")
	if !b1.LeaseValid(time.Now()) || b1.Epoch() != 1 || isClosed(b1.Fenced()) {
		t.Fatalf("fresh broker: lease valid %v, epoch %d", b1.LeaseValid(time.Now()), b1.Epoch())
	}
	top, err := b2.CreateTopic(ctx, metadata.TopicSpec{Name: "before-fence", Partitions: 6, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	var ofB1 []int32
	for _, p := range top.Partitions {
		if p.Leader == 1 {
			ofB1 = append(ofB1, p.Index)
		}
	}
	if len(ofB1) == 0 {
		t.Fatalf("broker 1 leads nothing: %+v", top.Partitions)
	}
	if err := b2.ReportSuspect(ctx, 1); err != nil { // a live broker: reporting it is harmless
		t.Fatal(err)
	}

	fenced := b1.Fenced()
	b1.PauseHeartbeats(true)
	testutil.Eventually(t, 30*time.Second, "broker 1 to be fenced", func() bool {
		b, ok := b2.View().Broker(1)
		return ok && b.State == metadata.BrokerFenced && b.Epoch == 1
	})
	if b1.LeaseValid(time.Now()) {
		t.Fatal("the controller fenced broker 1 while its own lease still looked valid")
	}
	if b, _ := b2.View().Broker(2); !b.Active() {
		t.Fatal("the heartbeating broker was fenced too")
	}
	// The fence and the plan are one command: the View that shows the fence shows the
	// plan.
	tv := b2.View().TopicByID(top.ID)
	for _, i := range ofB1 {
		if p := tv.Partitions[i]; p.Leader != 2 || !p.Recovering || p.RecoverEpoch != 1 || p.LeaderEpoch != 1 {
			t.Fatalf("partition %d of the fenced broker: %+v, want broker 2 (its zone) recovering epoch 1", i, p)
		}
	}
	for i, p := range tv.Partitions {
		if p.Leader == 1 {
			t.Fatalf("partition %d still led by the fenced broker", i)
		}
	}

	after, err := b2.CreateTopic(ctx, metadata.TopicSpec{Name: "after-fence", Partitions: 6, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := countLeaders(after.Partitions); n[1] != 0 {
		t.Fatalf("placement used the fenced broker: %v", n)
	}

	for _, i := range ofB1 {
		le := tv.Partitions[i].LeaderEpoch
		if err := b3.CompleteRecovery(ctx, top.ID, i, le, 5); !errors.Is(err, metadata.ErrRecoveryRefused) {
			t.Fatalf("CompleteRecovery by a broker that does not lead: %v", err)
		}
		if err := b2.CompleteRecovery(ctx, top.ID, i, le-1, 5); !errors.Is(err, metadata.ErrRecoveryRefused) {
			t.Fatalf("CompleteRecovery of an older leader epoch: %v", err)
		}
		if err := b2.CompleteRecovery(ctx, top.ID, i, le, 5); err != nil {
			t.Fatal(err)
		}
		if err := b2.CompleteRecovery(ctx, top.ID, i, le, 5); err != nil {
			t.Fatalf("the same completion again (a retry): %v", err)
		}
		p := b2.View().TopicByID(top.ID).Partitions[i]
		if p.Recovering || p.RecoverEpoch != 0 || !reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 5}}) {
			t.Fatalf("partition %d after CompleteRecovery: %+v", i, p)
		}
	}
	if got := sumMetric(t, reg, "weir_controller_partitions_failed_over_total"); got != float64(len(ofB1)) {
		t.Errorf("failed over metric %v, want %d", got, len(ofB1))
	}
	if got := sumMetric(t, reg, "weir_controller_recoveries_completed_total"); got != float64(len(ofB1)) {
		t.Errorf("recoveries metric %v, want %d (retries do not count)", got, len(ofB1))
	}
	testutil.Eventually(t, 10*time.Second, "no partition recovering on any controller", func() bool {
		return sumMetric(t, reg, "weir_controller_partitions_recovering") == 0
	})

	b1.PauseHeartbeats(false) // the next heartbeat is answered "fenced"
	testutil.Eventually(t, 30*time.Second, "broker 1 to learn it was fenced", func() bool { return isClosed(fenced) })
	// Let a few heartbeat intervals pass on purpose: the client must not register again.
	time.Sleep(3 * 200 * time.Millisecond)
	if b, _ := b2.View().Broker(1); b.Epoch != 1 || b.Active() || b1.Epoch() != 1 || b1.LeaseValid(time.Now()) {
		t.Fatalf("after the fenced answer: broker %+v, client epoch %d, lease %v", b, b1.Epoch(), b1.LeaseValid(time.Now()))
	}

	// An explicit registration (what the broker does after restarting its storage).
	if err := b1.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	// Epoch 2, or later on a loaded machine: a registration whose answer was lost is
	// sent again, and each registration is a new epoch (the client keeps the last).
	if b, _ := b1.View().Broker(1); b.Epoch < 2 || !b.Active() || b1.Epoch() != b.Epoch {
		t.Fatalf("after registering again: %+v (client epoch %d)", b, b1.Epoch())
	}
	if n, ok := epochChanges.Load(int64(1)); !ok || n.(int64) != b1.Epoch() {
		t.Fatalf("OnEpochChange: %v %v", n, ok)
	}
	// The new registration's lease needs a majority: the leader's answer and a
	// follower's heartbeat, sent at once after registering.
	testutil.Eventually(t, 10*time.Second, "the new registration's lease", func() bool { return b1.LeaseValid(time.Now()) })
	if isClosed(b1.Fenced()) {
		t.Fatal("the new registration is fenced")
	}
	for i, p := range b1.View().TopicByID(top.ID).Partitions {
		if p.Leader == 1 {
			t.Fatalf("partition %d went back to broker 1", i)
		}
	}
	// A heartbeat with a stale epoch is refused.
	var resp ctlwire.LeaseResponse
	if err := tc.post(ctlwire.PathHeartbeat, ctlwire.HeartbeatRequest{ID: 1, Epoch: 1}, &resp); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("stale-epoch heartbeat: %v", err)
	}
}

// TestDuplicateBrokerRefused: a second live process with the same broker ID cannot
// register while the first one's lease is fresh (409 duplicate_broker, "in use by a live
// process"); the first one may register again itself; once it stops heartbeating the
// second gets in after the lease lapses (RegisterBroker waits for it), and the first
// learns from its next heartbeat that its registration is over.
func TestDuplicateBrokerRefused(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.waitLeader()
	ctx := ctxT(t)
	a := tc.broker(9, "a")
	b := tc.client(9, nil)
	if a.Incarnation() == b.Incarnation() || a.Incarnation() == "" {
		t.Fatalf("incarnations %q and %q", a.Incarnation(), b.Incarnation())
	}
	sctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	err := b.RegisterBroker(sctx, brokerFor(9, "a"))
	cancel()
	if !errors.Is(err, metadata.ErrDuplicateBroker) || !strings.Contains(err.Error(), "in use by a live process") {
		t.Fatalf("a second process with the same ID: %v", err)
	}
	body, _ := json.Marshal(ctlwire.RegisterRequest{ID: 9, Host: "127.0.0.1", Port: 1, Incarnation: "someone-else"})
	resp, err := http.Post("http://"+tc.peers[0].APIAddr+"/v1/brokers/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ae ctlwire.APIError
	if json.Unmarshal(raw, &ae); resp.StatusCode != http.StatusConflict || ae.Code != "duplicate_broker" || !strings.Contains(ae.Message, "live process") {
		t.Fatalf("raw duplicate registration: %d %s", resp.StatusCode, raw)
	}
	if v, _ := a.View().Broker(9); v.Epoch != 1 || !v.Active() {
		t.Fatalf("the refused registrations changed the broker: %+v", v)
	}
	if err := a.RegisterBroker(ctx, brokerFor(9, "a")); err != nil || a.Epoch() != 2 {
		t.Fatalf("the same process registering again: %v (epoch %d)", err, a.Epoch())
	}

	fenced := a.Fenced()
	a.PauseHeartbeats(true) // the first process hangs (or died)
	start := time.Now()
	if err := b.RegisterBroker(ctx, brokerFor(9, "a")); err != nil {
		t.Fatal(err)
	}
	t.Logf("the second process registered %v after the first one's last heartbeat", time.Since(start))
	if b.Epoch() != 3 {
		t.Fatalf("second process: epoch %d", b.Epoch())
	}
	// The granted lease is 300 ms from the registration's send: on a loaded machine the
	// call and the wait for the view can outlast it, and the next heartbeat renews it.
	testutil.Eventually(t, 10*time.Second, "the second process's lease", func() bool { return b.LeaseValid(time.Now()) })
	if a.LeaseValid(time.Now()) {
		t.Fatal("the second process got in while the first one's lease still held")
	}
	a.PauseHeartbeats(false)
	testutil.Eventually(t, 10*time.Second, "the first process to learn its registration is over", func() bool { return isClosed(fenced) })
	sctx, cancel = context.WithTimeout(ctx, 400*time.Millisecond)
	err = a.RegisterBroker(sctx, brokerFor(9, "a"))
	cancel()
	if !errors.Is(err, metadata.ErrDuplicateBroker) {
		t.Fatalf("the first process registering while the second is live: %v", err)
	}
}

// TestClientRefusesShortLease: a client whose heartbeat interval does not fit twice in
// the granted lease refuses to run (RegisterBroker fails with ctlclient.ErrBadConfig and the
// lease stays invalid); one whose interval fits registers.
func TestClientRefusesShortLease(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) { c.SuspectTimeout = 300 * time.Millisecond }) // granted 200 ms
	tc.waitLeader()
	if g := tc.ctrls[0].cfg.GrantedLease(); g != 200*time.Millisecond {
		t.Fatalf("granted lease %v", g)
	}
	ctx := ctxT(t)
	slow := tc.client(1, func(c *ctlclient.ClientConfig) { c.HeartbeatInterval = 150 * time.Millisecond })
	if err := slow.RegisterBroker(ctx, brokerFor(1, "a")); !errors.Is(err, ctlclient.ErrBadConfig) || slow.LeaseValid(time.Now()) {
		t.Fatalf("heartbeat 150ms, lease 200ms: %v (lease %v)", err, slow.LeaseValid(time.Now()))
	}
	fast := tc.client(2, func(c *ctlclient.ClientConfig) { c.HeartbeatInterval = 50 * time.Millisecond }) // raised to ctlwire.MinHeartbeatInterval
	if err := fast.RegisterBroker(ctx, brokerFor(2, "a")); err != nil {
		t.Fatal(err)
	}
}
