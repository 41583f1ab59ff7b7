package controller

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// memCluster is a quorum whose Raft runs entirely in memory: in-memory transports the
// test wires and cuts, and in-memory log, stable and snapshot stores that outlive a
// controller, so a stopped controller starts again on its Raft state as one does on
// its data dir. No Raft socket and no file: DataDir stays empty. The HTTP API (every
// Controller serves it) listens on an in-memory network (memnet_test.go), which the
// controllers' fence votes use too; the tests propose on the controllers directly.
// Nothing in it touches a socket, so it runs in a testing/synctest bubble on a fake
// clock (synctest_test.go): every test of it does but one, whose real broker client
// needs loopback sockets (newMemClusterTCP).
type memCluster struct {
	t     testing.TB
	net   *memNet // nil: the API listens on loopback sockets
	peers Peers
	trans []*raft.InmemTransport
	logs  []*raft.InmemStore // log and stable store
	snaps []*raft.InmemSnapshotStore
	ctrls []*Controller // nil while stopped
	cut   []bool        // true: the node's connections are cut (isolate)
	tune  func(*Config)
}

// memTimeout bounds every wait: generous, the race detector on 2 cores is slow. In a
// bubble it is fake time, which passes only while everything waits.
const memTimeout = 30 * time.Second

func memAddr(i int) raft.ServerAddress { return raft.ServerAddress(fmt.Sprintf("mem-%d", i+1)) }

// newMemCluster starts n controllers serving their API on an in-memory network. Called
// in a synctest bubble, the network and the controllers belong to it.
func newMemCluster(t testing.TB, n int, tune func(*Config)) *memCluster {
	return newMemClusterOn(t, n, tune, newMemNet())
}

// newMemClusterTCP is newMemCluster with the API on loopback sockets, for a test whose
// real clients (ctlclient) dial it. Socket I/O is not durably blocking: such a test
// cannot run in a synctest bubble and runs in real time.
func newMemClusterTCP(t testing.TB, n int, tune func(*Config)) *memCluster {
	return newMemClusterOn(t, n, tune, nil)
}

func newMemClusterOn(t testing.TB, n int, tune func(*Config), mn *memNet) *memCluster {
	t.Helper()
	mc := &memCluster{t: t, net: mn, tune: tune, ctrls: make([]*Controller, n), trans: make([]*raft.InmemTransport, n), cut: make([]bool, n)}
	apiLns := make([]net.Listener, n)
	for i := 0; i < n; i++ {
		addr := "127.0.0.1:0"
		if mn != nil {
			addr = fmt.Sprintf("api-%d.mem:80", i+1)
		}
		apiLns[i] = mc.listenAPI(addr)
		mc.peers = append(mc.peers, ctlwire.Peer{ID: int32(i + 1), RaftAddr: string(memAddr(i)), APIAddr: apiLns[i].Addr().String()})
		mc.logs = append(mc.logs, raft.NewInmemStore())
		mc.snaps = append(mc.snaps, raft.NewInmemSnapshotStore())
	}
	t.Cleanup(mc.stopAll)
	for i := 0; i < n; i++ {
		mc.startWith(i, apiLns[i])
	}
	return mc
}

// listenAPI binds addr on the cluster's network.
func (mc *memCluster) listenAPI(addr string) net.Listener {
	mc.t.Helper()
	if mc.net == nil {
		return listenLoopback(mc.t, addr)
	}
	ln, err := mc.net.listen(addr)
	if err != nil {
		mc.t.Fatal(err)
	}
	return ln
}

// restart starts a stopped controller again on its in-memory stores.
func (mc *memCluster) restart(i int) {
	mc.t.Helper()
	mc.startWith(i, mc.listenAPI(mc.peers[i].APIAddr))
}

// startWith starts controller i with a fresh transport, connected to every node whose
// connections are not cut (a stopped node's old transport was closed by raft's shutdown).
func (mc *memCluster) startWith(i int, apiLn net.Listener) {
	mc.t.Helper()
	_, tr := raft.NewInmemTransport(memAddr(i))
	mc.trans[i] = tr
	mc.wire()
	cfg := DefaultConfig()
	cfg.NodeID = int32(i + 1)
	cfg.DataDir = ""
	cfg.Peers = append(Peers(nil), mc.peers...)
	cfg.Logger = testLogger()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.APIListener = apiLn
	cfg.RaftTransport = tr
	cfg.LogStore, cfg.StableStore, cfg.SnapshotStore = mc.logs[i], mc.logs[i], mc.snaps[i]
	// No broker heartbeats here: fencing brokers would change the state the tests
	// compare between replicas.
	cfg.LeaseTimeout = time.Hour
	// Nor balancer moves (the balancer tests turn it on).
	cfg.Balance = false
	if mc.tune != nil {
		mc.tune(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		mc.t.Fatalf("controller %d: New: %v", i+1, err)
	}
	if mc.net != nil {
		// Controller to controller (fence votes, forwarded writes) on the same network.
		c.fwd.Transport.(*http.Transport).DialContext = mc.net.dial
	}
	if err := c.Start(); err != nil {
		c.Close()
		mc.t.Fatalf("controller %d: Start: %v", i+1, err)
	}
	if got := c.RaftAddr().String(); got != string(memAddr(i)) {
		mc.t.Fatalf("controller %d: raft address %s, want %s", i+1, got, memAddr(i))
	}
	mc.ctrls[i] = c
}

// wire connects every pair of transports whose connections are not cut, both ways
// (ConnectAll for transports that come and go).
func (mc *memCluster) wire() {
	for i, a := range mc.trans {
		for j, b := range mc.trans {
			if i != j && a != nil && b != nil && !mc.cut[i] && !mc.cut[j] {
				a.Connect(memAddr(j), b)
			}
		}
	}
}

// isolate cuts node i off: it reaches no one and no one reaches it.
func (mc *memCluster) isolate(i int) {
	mc.cut[i] = true
	if mc.trans[i] != nil {
		mc.trans[i].DisconnectAll()
	}
	for j, tr := range mc.trans {
		if j != i && tr != nil {
			tr.Disconnect(memAddr(i))
		}
	}
}

// heal gives node i its connections back.
func (mc *memCluster) heal(i int) {
	mc.cut[i] = false
	mc.wire()
}

func (mc *memCluster) stop(i int) {
	if c := mc.ctrls[i]; c != nil {
		c.Close()
		mc.ctrls[i] = nil
	}
}

func (mc *memCluster) stopAll() {
	for i := range mc.ctrls {
		mc.stop(i)
	}
}

// waitLeader returns the leader the running controllers outside skip agree on, once it
// has a cluster ID (agreedLeader).
func (mc *memCluster) waitLeader(skip ...int) int {
	mc.t.Helper()
	leader := -1
	testutil.Eventually(mc.t, memTimeout, "a leader the others follow", func() bool {
		leader = mc.agreedLeader(skip...)
		return leader >= 0
	})
	return leader
}

// agreedLeader returns the leader the running controllers outside skip agree on now,
// or -1: it is Leader and has a cluster ID, and every other one of them follows it.
// skip holds cut-off or doomed nodes, which may still believe in an old leader
// (themselves).
func (mc *memCluster) agreedLeader(skip ...int) int {
	skipped := map[int]bool{}
	for _, i := range skip {
		skipped[i] = true
	}
	leader := -1
	for i, c := range mc.ctrls {
		if c != nil && !skipped[i] && c.IsLeader() && c.View().ClusterID != "" {
			leader = i
		}
	}
	if leader < 0 {
		return -1
	}
	for i, c := range mc.ctrls {
		if c == nil || skipped[i] || i == leader {
			continue
		}
		if id, _, ok := c.leader(); !ok || id != int32(leader+1) || c.IsLeader() {
			return -1
		}
	}
	return leader
}

// mustPropose proposes cmd on the leader c and fails the test if it is not applied.
func mustPropose(t testing.TB, c *Controller, cmd command) *applyResult {
	t.Helper()
	res, err := c.propose(cmd)
	if err != nil {
		t.Fatalf("%T: %v", cmd, err)
	}
	return res
}

// topicCmd creates a one-partition topic. With a fixed ID it is idempotent (the same
// ID again succeeds without change), so a write whose outcome is unknown can be retried.
func topicCmd(name string, id metadata.TopicID) *createTopicCmd {
	return &createTopicCmd{Topic: metadata.Topic{Name: name, ID: id, Partitions: []metadata.Partition{{Leader: 1}}}}
}

// write commits the creation of topic name through whichever node (outside skip) is
// leader, retrying through elections, and returns the version it left the leader at.
func (mc *memCluster) write(name string, skip ...int) uint64 {
	mc.t.Helper()
	cmd := topicCmd(name, metadata.NewTopicID())
	var version uint64
	testutil.EventuallyNoError(mc.t, memTimeout, "committing topic "+name, func() error {
		c := mc.ctrls[mc.waitLeader(skip...)]
		if _, err := c.propose(cmd); err != nil {
			return err
		}
		version = c.View().Version
		return nil
	})
	return version
}

// waitSame waits until the running controllers outside skip have applied at least
// version and hold byte-identical states, and returns that state.
func (mc *memCluster) waitSame(version uint64, skip ...int) string {
	mc.t.Helper()
	skipped := map[int]bool{}
	for _, i := range skip {
		skipped[i] = true
	}
	var want string
	testutil.Eventually(mc.t, memTimeout, fmt.Sprintf("every replica at version %d with the same state", version), func() bool {
		want = ""
		for i, c := range mc.ctrls {
			if c == nil || skipped[i] {
				continue
			}
			if c.View().Version < version {
				return false
			}
			got := stateOf(mc.t, c)
			if want == "" {
				want = got
			} else if got != want {
				return false
			}
		}
		return true
	})
	return want
}

// TestMemQuorumElectsAndReplicates: three controllers over in-memory transports elect
// one leader that the other two follow, the leader's first write (the cluster ID)
// reaches all three FSMs, and so do later writes, in the same order (equal states at
// equal versions). A follower does not accept writes itself. On the fake clock the
// election takes what Raft's timeouts say: the first follower to miss a heartbeat (at
// a random time in [HeartbeatTimeout, 2×HeartbeatTimeout)) stands, and with messages
// taking no time wins at once.
func TestMemQuorumElectsAndReplicates(t *testing.T) {
	synctest.Test(t, testMemQuorumElectsAndReplicates)
}

func testMemQuorumElectsAndReplicates(t *testing.T) {
	mc := newMemCluster(t, 3, nil)
	leader := -1
	took := untilFake(t, memTimeout, time.Millisecond, "a leader with a cluster ID the others follow", func() bool {
		leader = mc.agreedLeader()
		return leader >= 0
	})
	hb := mc.ctrls[leader].cfg.HeartbeatTimeout
	t.Logf("leader with a cluster ID %v after the start (fake clock)", took)
	if took < hb || took >= 2*hb {
		t.Fatalf("leader with a cluster ID %v after the start, want in [%v, %v): one heartbeat timeout, no split vote", took, hb, 2*hb)
	}
	term := mc.ctrls[leader].Status().Term
	for i, c := range mc.ctrls {
		if st := c.Status(); st.Term != term || st.LeaderID != int32(leader+1) {
			t.Fatalf("controller %d: term %d leader %d, want term %d leader %d", i+1, st.Term, st.LeaderID, term, leader+1)
		}
	}
	var version uint64
	for i := 0; i < 5; i++ {
		version = mc.write(fmt.Sprintf("replicated-%d", i))
	}
	state := mc.waitSame(version)
	for i, c := range mc.ctrls {
		v := c.View()
		if v.ClusterID != mc.ctrls[leader].View().ClusterID || len(v.Topics) != 5 {
			t.Fatalf("controller %d: cluster ID %q, %d topics; state %s", i+1, v.ClusterID, len(v.Topics), state)
		}
	}
	follower := (leader + 1) % 3
	if _, err := mc.ctrls[follower].propose(topicCmd("on-a-follower", metadata.NewTopicID())); !errors.Is(err, ctlwire.ErrNotLeader) {
		t.Fatalf("propose on a follower: %v, want ErrNotLeader", err)
	}
}

// TestMemQuorumLeaderFailover: the leader is cut off, then shut down; it steps down
// once a LeaderLeaseTimeout passed without a quorum's contact, and the other two elect
// a new leader in a later term, once one of them missed the leader's heartbeats for a
// HeartbeatTimeout, that holds every committed write and commits new ones; the old
// leader, started again on its stores, catches up to the same state.
func TestMemQuorumLeaderFailover(t *testing.T) { synctest.Test(t, testMemQuorumLeaderFailover) }

func testMemQuorumLeaderFailover(t *testing.T) {
	mc := newMemCluster(t, 3, nil)
	old := mc.waitLeader()
	oldTerm := mc.ctrls[old].Status().Term
	var version uint64
	for i := 0; i < 5; i++ {
		version = mc.write(fmt.Sprintf("before-%d", i))
	}
	before := mc.waitSame(version)

	cfg := mc.ctrls[old].cfg
	// Raft's leader heartbeats at random intervals in [HeartbeatTimeout/10,
	// HeartbeatTimeout/5): the last contact before the cut was at most that long ago.
	beat := cfg.HeartbeatTimeout / 5
	cut := time.Now()
	mc.isolate(old)
	// Raft looks at the lease again when it would run out and steps down at the next
	// look, 10 ms later, when no quorum was heard from meanwhile.
	stepDown := untilFake(t, memTimeout, time.Millisecond, "the cut-off leader stepping down", func() bool { return !mc.ctrls[old].IsLeader() })
	if stepDown < cfg.LeaderLeaseTimeout-beat || stepDown > cfg.LeaderLeaseTimeout+20*time.Millisecond {
		t.Fatalf("the cut-off leader stepped down %v after the cut, want about its LeaderLeaseTimeout %v", stepDown, cfg.LeaderLeaseTimeout)
	}
	leader := -1
	// A follower stands when its heartbeat timer, random in [HeartbeatTimeout,
	// 2×HeartbeatTimeout) and re-armed each time, finds no contact for a HeartbeatTimeout:
	// by 3×HeartbeatTimeout at the latest; it wins at once, messages take no time.
	untilFake(t, memTimeout, time.Millisecond, "a new leader the other follows", func() bool {
		leader = mc.agreedLeader(old)
		return leader >= 0
	})
	took := time.Since(cut)
	t.Logf("after the cut: the old leader stepped down in %v, a new one was elected in %v (fake clock)", stepDown, took)
	if took < cfg.HeartbeatTimeout-beat || took >= 3*cfg.HeartbeatTimeout {
		t.Fatalf("a new leader %v after the cut, want within [%v, %v)", took, cfg.HeartbeatTimeout-beat, 3*cfg.HeartbeatTimeout)
	}
	if leader == old {
		t.Fatal("the cut-off controller is still the leader the others follow")
	}
	if term := mc.ctrls[leader].Status().Term; term <= oldTerm {
		t.Fatalf("new leader in term %d, the old one was in term %d", term, oldTerm)
	}
	if got := stateOf(t, mc.ctrls[leader]); got != before {
		t.Fatalf("the new leader's state differs from the committed one:\n got %s\nwant %s", got, before)
	}
	mc.stop(old)
	for i := 0; i < 3; i++ {
		version = mc.write(fmt.Sprintf("after-%d", i), old)
	}
	after := mc.waitSame(version, old)
	if v := mc.ctrls[leader].View(); len(v.Topics) != 8 {
		t.Fatalf("after failover: %d topics, want 8", len(v.Topics))
	}

	// No bound on the catch-up's time: the leader retries a follower it failed to reach
	// with a backoff of Raft's own, up to seconds.
	mc.heal(old)
	mc.restart(old)
	if got := mc.waitSame(version); got != after {
		t.Fatalf("the restarted old leader caught up to a different state:\n got %s\nwant %s", got, after)
	}
	if mc.ctrls[old].fsm.restores.Load() != 0 {
		t.Fatal("the restarted controller needed a snapshot; its log was in its store")
	}
}

// TestMemQuorumMinorityCannotCommit: a leader cut off from the other two is a minority.
// A write proposed on it fails once it steps down, a LeaderLeaseTimeout after the cut
// (it never reaches a quorum), and is applied nowhere; meanwhile the majority elects a
// leader and commits. Once the connection is back the old leader drops its uncommitted
// entry and takes the majority's state. A cut-off follower misses writes (and cannot
// become leader to make its own, however many election timeouts pass) until it is
// back, then catches up through a snapshot the majority took meanwhile. Each part runs
// on a quorum of its own, in a bubble of its own (T.Run cannot be called in a bubble).
func TestMemQuorumMinorityCannotCommit(t *testing.T) {
	t.Run("cut-off leader", func(t *testing.T) { synctest.Test(t, testMinorityCutOffLeader) })
	t.Run("cut-off follower", func(t *testing.T) { synctest.Test(t, testMinorityCutOffFollower) })
}

// minorityCluster is the quorum of TestMemQuorumMinorityCannotCommit, with one write
// every replica applied.
func minorityCluster(t *testing.T) *memCluster {
	mc := newMemCluster(t, 3, func(c *Config) {
		// The cut-off leader keeps believing it leads for up to LeaderLeaseTimeout.
		c.HeartbeatTimeout = time.Second
		c.ElectionTimeout = time.Second
		c.LeaderLeaseTimeout = time.Second
		c.SuspectTimeout = 2 * time.Second // keeps the granted lease positive (Config.GrantedLease)
		c.SnapshotThreshold = 8
		c.SnapshotInterval = 50 * time.Millisecond
		c.TrailingLogs = 2
	})
	mc.waitSame(mc.write("before"))
	return mc
}

func testMinorityCutOffLeader(t *testing.T) {
	mc := minorityCluster(t)
	old := mc.waitLeader()
	c := mc.ctrls[old]
	last := c.r.Load().LastIndex()
	mc.isolate(old)
	// No time passes between the cut and the proposal: the entry enters the leader's
	// log, and the proposal fails when the leader steps down.
	start := time.Now()
	_, err := c.propose(topicCmd("minority", metadata.NewTopicID()))
	took := time.Since(start)
	if !errors.Is(err, ctlwire.ErrUnavailable) {
		t.Fatalf("a write on the cut-off leader: %v, want ctlwire.ErrUnavailable (leadership lost while committing)", err)
	}
	lastAfter, commit := c.r.Load().LastIndex(), c.r.Load().CommitIndex()
	t.Logf("minority write: %v after %v of the fake clock (log %d → %d, commit %d)", err, took, last, lastAfter, commit)
	if lastAfter <= last || commit >= lastAfter {
		t.Fatalf("the write was lost while committing, yet no uncommitted entry is in the log (log %d → %d, commit %d)", last, lastAfter, commit)
	}
	// Raft steps down at the look at the lease after it ran out (10 ms later): a write
	// on a cut-off leader fails then, it does not wait for ApplyTimeout or longer.
	if lease := c.cfg.LeaderLeaseTimeout; took < lease-c.cfg.HeartbeatTimeout/5 || took > lease+20*time.Millisecond {
		t.Fatalf("the minority write failed %v after the cut, want about the LeaderLeaseTimeout %v", took, lease)
	}
	if c.View().Topics["minority"] != nil {
		t.Fatal("the cut-off leader applied a write no quorum accepted")
	}
	leader := mc.waitLeader(old)
	version := mc.write("majority", old)
	mc.waitSame(version, old)
	if mc.ctrls[leader].View().Topics["minority"] != nil {
		t.Fatal("the majority has the minority's write")
	}

	mc.heal(old)
	// One more write after the heal: once every replica has applied it, everything
	// committed before it was applied too, the minority write included if it had been.
	version = mc.write("healed")
	state := mc.waitSame(version)
	for i, c := range mc.ctrls {
		if v := c.View(); v.Topics["minority"] != nil || v.Topics["majority"] == nil {
			t.Fatalf("controller %d after the heal: %s", i+1, state)
		}
	}
}

func testMinorityCutOffFollower(t *testing.T) {
	mc := minorityCluster(t)
	leader := mc.waitLeader()
	follower := (leader + 1) % 3
	f := mc.ctrls[follower]
	before := f.View().Version
	mc.isolate(follower)
	if _, err := f.propose(topicCmd("on-the-cut-off-follower", metadata.NewTopicID())); !errors.Is(err, ctlwire.ErrNotLeader) {
		t.Fatalf("a write on the cut-off follower: %v, want ErrNotLeader", err)
	}
	var version uint64
	for i := 0; i < 20; i++ { // past SnapshotThreshold: the leader snapshots and trims its log
		version = mc.write(fmt.Sprintf("missed-%d", i), follower)
	}
	mc.waitSame(version, follower)
	// The leader keeps TrailingLogs (2) entries below its snapshot: 3 past the
	// follower's last entry, the next one it must send is gone from its log.
	testutil.Eventually(t, memTimeout, "the majority to compact the follower's next entry away", func() bool {
		st := mc.ctrls[mc.waitLeader(follower)].Status()
		return st.LastSnapshotIndex >= f.r.Load().LastIndex()+3
	})
	// The writes took no time on the fake clock: the cut-off follower now stays cut off
	// for five election timeouts, standing again and again without a vote.
	settle(5 * f.cfg.ElectionTimeout)
	if got := f.View().Version; got != before || f.IsLeader() {
		t.Fatalf("the cut-off follower moved on alone: version %d → %d, leader %v", before, got, f.IsLeader())
	}

	mc.heal(follower)
	state := mc.waitSame(version)
	if f.fsm.restores.Load() == 0 {
		t.Fatal("the follower caught up without the snapshot its missing entries were compacted into")
	}
	if f.View().Topics["missed-19"] == nil || f.View().Topics["on-the-cut-off-follower"] != nil {
		t.Fatalf("the follower after the heal: %s", state)
	}
}
