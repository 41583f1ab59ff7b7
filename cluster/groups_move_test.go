package cluster

// Consumer groups across coordinator changes (issue 21), tested black-box with real
// clients over TCP: franz-go consumer groups (kgo) and raw group requests (kmsg) where a
// test needs exact control (a zombie's commit, a parked JoinGroup), and kcat (librdkafka)
// as a second client family.
//
// A group's coordinator is the leader of its __consumer_offsets partition (FNV-32a of the
// group mod the partition count), so a test moves the coordinator by moving that
// partition (the controller's graceful move) or by killing its leader (failover).

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

const consumerOffsets = "__consumer_offsets"

// startGroupCluster is startCluster (3 controllers, 3 brokers, 6 offsets partitions, a
// 100 ms initial rebalance delay) with the controller's balancer off: it would move
// partitions on its own and change a group's coordinator behind the test's back.
func startGroupCluster(t *testing.T) *Cluster {
	t.Helper()
	return startCluster(t, func(cfg *Config) {
		cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
	})
}

// offsetsIndex is the __consumer_offsets partition of group (broker/offsets_topic.go).
func offsetsIndex(group string, partitions int) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(partitions))
}

// leaderView is the Raft leader controller's view (nil while there is none).
func leaderView(c *Cluster) *metadata.View {
	i := c.LeaderIndex()
	if i < 0 {
		return nil
	}
	if ctl := c.Controller(i); ctl != nil {
		return ctl.View()
	}
	return nil
}

// liveClient is the controller client of any running broker.
func liveClient(t *testing.T, c *Cluster) *ctlclient.Client {
	t.Helper()
	for i := 0; i < 3; i++ {
		if n := c.Broker(i); n != nil {
			return n.Client
		}
	}
	t.Fatal("no broker running")
	return nil
}

// findCoordinator waits until FindCoordinator answers for group (the first lookup
// creates __consumer_offsets) and returns the coordinator's node ID.
func findCoordinator(t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	var id int32
	testutil.EventuallyNoError(t, 30*time.Second, "FindCoordinator answers for "+group, func() error {
		r := adm.FindGroupCoordinators(ctxFor(t, 10*time.Second), group)[group]
		if r.Err != nil {
			return r.Err
		}
		id = r.NodeID
		return nil
	})
	return id
}

// groupPartition returns __consumer_offsets' topic ID and group's partition in it.
func groupPartition(t *testing.T, c *Cluster, adm *kadm.Client, group string) (metadata.TopicID, int32) {
	t.Helper()
	findCoordinator(t, adm, group)
	var top *metadata.Topic
	testutil.Eventually(t, 30*time.Second, consumerOffsets+" exists", func() bool {
		if v := leaderView(c); v != nil {
			top = v.Topics[consumerOffsets]
		}
		return top != nil && len(top.Partitions) > 0
	})
	return top.ID, offsetsIndex(group, len(top.Partitions))
}

// waitCoordinator waits until the controllers have group's offsets partition served by
// broker to and FindCoordinator names it.
func waitCoordinator(t *testing.T, c *Cluster, adm *kadm.Client, group string, to int32) {
	t.Helper()
	id, idx := groupPartition(t, c, adm, group)
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%d served by broker %d", consumerOffsets, idx, to), func() bool {
		v := leaderView(c)
		if v == nil {
			return false
		}
		top := v.TopicByID(id)
		if top == nil {
			return false
		}
		p := top.Partitions[idx]
		return p.Leader == to && !p.Moving && !p.Recovering
	})
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("FindCoordinator names broker %d for %s", to, group), func() bool {
		r := adm.FindGroupCoordinators(ctxFor(t, 10*time.Second), group)[group]
		return r.Err == nil && r.NodeID == to
	})
}

// moveCoordinator moves group's __consumer_offsets partition to broker to by a graceful
// move and waits until FindCoordinator names it.
func moveCoordinator(t *testing.T, c *Cluster, adm *kadm.Client, group string, to int32) {
	t.Helper()
	id, idx := groupPartition(t, c, adm, group)
	if err := liveClient(t, c).MovePartition(ctxFor(t, 30*time.Second), id, idx, to); err != nil {
		t.Fatalf("moving %s/%d to broker %d: %v", consumerOffsets, idx, to, err)
	}
	waitCoordinator(t, c, adm, group, to)
}

// movePartitionsOff moves every partition of topic that broker from leads to another
// broker (graceful moves) and waits until they are served there.
func movePartitionsOff(t *testing.T, c *Cluster, topic string, from int32) {
	t.Helper()
	var top *metadata.Topic
	testutil.Eventually(t, 30*time.Second, topic+" in the controllers' view", func() bool {
		if v := leaderView(c); v != nil {
			top = v.Topics[topic]
		}
		return top != nil
	})
	for _, p := range top.Partitions {
		if p.Leader == from {
			if err := liveClient(t, c).MovePartition(ctxFor(t, 30*time.Second), top.ID, p.Index, from%3+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("no partition of %s led by broker %d", topic, from), func() bool {
		v := leaderView(c)
		return v != nil && len(ledBy(v, topic, from)) == 0 && allServed(v, topic, from)
	})
}

// groupDescribed describes group (retrying while the coordinator changes).
func groupDescribed(t *testing.T, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	var d kadm.DescribedGroup
	testutil.EventuallyNoError(t, 30*time.Second, "DescribeGroups "+group, func() error {
		res, err := adm.DescribeGroups(ctxFor(t, 10*time.Second), group)
		if err != nil {
			return err
		}
		d = res[group]
		return d.Err
	})
	return d
}

func memberIDs(d kadm.DescribedGroup) []string {
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
	}
	sort.Strings(ids)
	return ids
}

// committed is group's committed offset of topic/partition, -1 for none.
func committed(t *testing.T, adm *kadm.Client, group, topic string, partition int32) int64 {
	t.Helper()
	at := int64(-1)
	testutil.EventuallyNoError(t, 30*time.Second, "OffsetFetch "+group, func() error {
		res, err := adm.FetchOffsets(ctxFor(t, 10*time.Second), group)
		if err != nil {
			return err
		}
		at = -1
		if o, ok := res.Lookup(topic, partition); ok {
			if o.Err != nil {
				return o.Err
			}
			at = o.At
		}
		return nil
	})
	return at
}

// ---------------------------------------------------------------------------------------
// A franz-go consumer group member that records everything a rebalance shows: the
// group callbacks, the JoinGroup/SyncGroup requests it sends, its heartbeats per broker,
// and the times it consumed records.

type watchedConsumer struct {
	name string
	cl   *kgo.Client

	mu       sync.Mutex
	assigned map[string]map[int32]bool
	events   []string // callbacks, in order
	errs     []string // group management errors
	consumed *consumeLog

	joins, syncs atomic.Int32
	lastJoin     atomic.Int64 // unix nanos of the last JoinGroup/SyncGroup answer
	heartbeats   sync.Map     // node ID → *atomic.Int32 (heartbeats answered)
}

// consumeLog is the times at which any member of a group got records.
type consumeLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (l *consumeLog) add(at time.Time) {
	l.mu.Lock()
	l.times = append(l.times, at)
	l.mu.Unlock()
}

// pause is the longest time without records in [from, to] (the edges count).
func (l *consumeLog) pause(from, to time.Time) (longest time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	times := append([]time.Time(nil), l.times...)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	last := from
	for _, at := range times {
		if at.Before(from) || at.After(to) {
			continue
		}
		n++
		longest = max(longest, at.Sub(last))
		last = at
	}
	return max(longest, to.Sub(last)), n
}

func (w *watchedConsumer) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil {
		return
	}
	switch kmsg.Key(key) {
	case kmsg.JoinGroup:
		w.joins.Add(1)
		w.lastJoin.Store(time.Now().UnixNano())
	case kmsg.SyncGroup:
		w.syncs.Add(1)
		w.lastJoin.Store(time.Now().UnixNano())
	case kmsg.Heartbeat:
		n, _ := w.heartbeats.LoadOrStore(meta.NodeID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}
}

func (w *watchedConsumer) OnGroupManageError(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err.Error())
}

func (w *watchedConsumer) heartbeatsTo(node int32) int32 {
	if n, ok := w.heartbeats.Load(node); ok {
		return n.(*atomic.Int32).Load()
	}
	return 0
}

func (w *watchedConsumer) event(kind string, ps map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, fmt.Sprintf("%s %s %v", time.Now().Format("15:04:05.000"), kind, ps))
	for topic, parts := range ps {
		for _, p := range parts {
			switch kind {
			case "assigned":
				if w.assigned[topic] == nil {
					w.assigned[topic] = map[int32]bool{}
				}
				w.assigned[topic][p] = true
			default: // revoked, lost
				delete(w.assigned[topic], p)
			}
		}
	}
}

// assignment is the partitions the member holds, as "topic/p" sorted.
func (w *watchedConsumer) assignment() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for topic, ps := range w.assigned {
		for p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", topic, p))
		}
	}
	sort.Strings(out)
	return out
}

// history is the callbacks and errors so far (for failure messages).
func (w *watchedConsumer) history() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("callbacks %v; group errors %v", w.events, w.errs)
}

func (w *watchedConsumer) eventCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

// startWatchedConsumer joins group as a consumer of topic (10 s session, 500 ms
// heartbeats) and consumes in the background until the test ends.
func startWatchedConsumer(t *testing.T, c *Cluster, name, group, topic string, log *consumeLog) *watchedConsumer {
	t.Helper()
	w := &watchedConsumer{name: name, assigned: map[string]map[int32]bool{}, consumed: log}
	w.cl = newClient(t, c,
		kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.WithHooks(w),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { w.event("assigned", ps) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { w.event("revoked", ps) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { w.event("lost", ps) }),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := w.cl.PollFetches(ctx)
			if fs.NumRecords() > 0 {
				log.add(time.Now())
			}
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// startTicker produces a record to topic every 10 ms until the test ends.
func startTicker(t *testing.T, c *Cluster, topic string) {
	t.Helper()
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}, nil)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitGroupStable waits until both members share a generation, hold every partition of
// the topic between them, and sent no JoinGroup/SyncGroup for a second and a half.
func waitGroupStable(t *testing.T, parts int, ws ...*watchedConsumer) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, "the group is stable", func() bool {
		gen := int32(-1)
		total := 0
		for _, w := range ws {
			_, g := w.cl.GroupMetadata()
			if g <= 0 || (gen >= 0 && g != gen) {
				return false
			}
			gen = g
			n := len(w.assignment())
			if n == 0 {
				return false
			}
			total += n
			if time.Since(time.Unix(0, w.lastJoin.Load())) < 1500*time.Millisecond {
				return false
			}
		}
		return total == parts
	})
}

type memberSnapshot struct {
	member     string
	generation int32
	assignment []string
	joins      int32
	events     int
}

func snapshot(w *watchedConsumer) memberSnapshot {
	id, gen := w.cl.GroupMetadata()
	return memberSnapshot{member: id, generation: gen, assignment: w.assignment(), joins: w.joins.Load(), events: w.eventCount()}
}

// checkNoRebalance: each member kept its member ID, generation and assignment, sent no
// JoinGroup and saw no callback since before.
func checkNoRebalance(t *testing.T, what string, ws []*watchedConsumer, before []memberSnapshot) {
	t.Helper()
	for i, w := range ws {
		b, a := before[i], snapshot(w)
		if a.joins != b.joins || a.events != b.events {
			t.Errorf("%s: consumer %s rebalanced: %d JoinGroup requests and %d group callbacks since; %s",
				what, w.name, a.joins-b.joins, a.events-b.events, w.history())
		}
		if a.member != b.member || a.generation != b.generation {
			t.Errorf("%s: consumer %s is member %q generation %d, was %q generation %d",
				what, w.name, a.member, a.generation, b.member, b.generation)
		}
		if fmt.Sprint(a.assignment) != fmt.Sprint(b.assignment) {
			t.Errorf("%s: consumer %s holds %v, held %v", what, w.name, a.assignment, b.assignment)
		}
	}
}

// groupAcrossCoordinatorChange runs two consumers of a 6-partition topic under a steady
// producer, changes the group's coordinator with change (which returns the new
// coordinator), and checks the group carried on at the new coordinator without a
// rebalance and with a short pause in consumption.
func groupAcrossCoordinatorChange(t *testing.T, c *Cluster, adm *kadm.Client, group, topic string, change func(from int32) int32) {
	const parts = 6
	startTicker(t, c, topic)
	var log consumeLog
	ws := []*watchedConsumer{
		startWatchedConsumer(t, c, "m1", group, topic, &log),
		startWatchedConsumer(t, c, "m2", group, topic, &log),
	}
	waitGroupStable(t, parts, ws...)
	from := findCoordinator(t, adm, group)
	described := groupDescribed(t, adm, group)
	if described.State != "Stable" || len(described.Members) != 2 {
		t.Fatalf("before the change: group %s, members %v", described.State, memberIDs(described))
	}
	var before []memberSnapshot
	hbBefore := map[*watchedConsumer]int32{}
	for _, w := range ws {
		before = append(before, snapshot(w))
	}
	t.Logf("before: coordinator %d, generation %d, members %v", from, before[0].generation, memberIDs(described))

	start := time.Now()
	to := change(from)
	t.Logf("coordinator %d → %d after %v", from, to, time.Since(start).Round(time.Millisecond))
	for _, w := range ws {
		hbBefore[w] = w.heartbeatsTo(to)
	}
	// Each member talks to the new coordinator for a few heartbeats: a coordinator that
	// does not know the group answers the first with UNKNOWN_MEMBER_ID.
	testutil.Eventually(t, 30*time.Second, "both members heartbeat the new coordinator", func() bool {
		for _, w := range ws {
			if w.heartbeatsTo(to) < hbBefore[w]+4 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // on purpose: a rebalance the heartbeats started shows in its callbacks
	end := time.Now()
	checkNoRebalance(t, fmt.Sprintf("coordinator %d → %d", from, to), ws, before)

	// A new admin client: the old one may keep a dead coordinator's address.
	after := groupDescribed(t, kadm.NewClient(newClient(t, c)), group)
	if after.State != "Stable" || fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(described)) {
		t.Errorf("at the new coordinator: group %s with members %v, want Stable with %v", after.State, memberIDs(after), memberIDs(described))
	}
	pause, n := log.pause(start, end)
	t.Logf("longest pause in the group's consumption from the change until %v later: %v (%d polls with records)",
		end.Sub(start).Round(time.Millisecond), pause.Round(time.Millisecond), n)
	if pause > 5*time.Second {
		t.Errorf("the group consumed nothing for %v across the coordinator change (target < 1 s)", pause.Round(time.Millisecond))
	}
}

// Issue 21, 1: a graceful move of the coordinator (its __consumer_offsets partition)
// does not rebalance the group: the new coordinator resumes it with the same
// generation, member IDs and assignment, and consumption goes on (pause < 1 s; asserted
// < 5 s).
func TestGroupSurvivesCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-move", "gm"
	if err := createTopic(t, adm, 6, topic); err != nil {
		t.Fatal(err)
	}
	groupAcrossCoordinatorChange(t, c, adm, group, topic, func(from int32) int32 {
		to := from%3 + 1
		moveCoordinator(t, c, adm, group, to)
		return to
	})
}

// Issue 21, 1: a failover of the coordinator (its broker killed) does not rebalance the
// group either. The topic's partitions are moved off the coordinator's broker first, so
// the kill stops only the coordinator, not the data the members fetch.
func TestGroupSurvivesCoordinatorFailover(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-failover", "gf"
	if err := createTopic(t, adm, 6, topic); err != nil {
		t.Fatal(err)
	}
	victim := findCoordinator(t, adm, group)
	movePartitionsOff(t, c, topic, victim)
	_, idx := groupPartition(t, c, adm, group)
	groupAcrossCoordinatorChange(t, c, adm, group, topic, func(from int32) int32 {
		if from != victim {
			t.Fatalf("coordinator %d, expected %d", from, victim)
		}
		return killCoordinator(t, c, adm, group, victim, idx)
	})
}

// killCoordinator kills broker victim, the coordinator of group (whose offsets partition
// is idx), waits until another broker serves that partition and FindCoordinator names
// it, and returns that broker.
func killCoordinator(t *testing.T, c *Cluster, adm *kadm.Client, group string, victim, idx int32) int32 {
	t.Helper()
	if err := c.KillBroker(int(victim - 1)); err != nil {
		t.Fatal(err)
	}
	var to int32
	testutil.Eventually(t, 30*time.Second, "the group's offsets partition fails over", func() bool {
		v := leaderView(c)
		if v == nil || v.Topics[consumerOffsets] == nil {
			return false
		}
		p := v.Topics[consumerOffsets].Partitions[idx]
		b, ok := v.Broker(p.Leader)
		to = p.Leader
		return ok && b.Active() && p.Leader != victim && !p.Recovering
	})
	waitCoordinator(t, c, adm, group, to)
	return to
}

// ---------------------------------------------------------------------------------------
// Raw group members: one request at a time, each member on a client of its own (a parked
// JoinGroup must not hold up another member's requests on a shared connection).

type rawMember struct {
	t        *testing.T
	cl       *kgo.Client
	group    string
	topic    string
	instance *string
	id       string
	gen      int32
	session  time.Duration
	rebal    time.Duration
	join     *kmsg.JoinGroupResponse // the last successful join
}

func newRawMember(t *testing.T, c *Cluster, group, topic, instance string, session, rebalance time.Duration) *rawMember {
	m := &rawMember{t: t, group: group, topic: topic, session: session, rebal: rebalance}
	if instance != "" {
		m.instance = &instance
	}
	m.cl = newClient(t, c, kgo.ClientID("raw-"+group))
	return m
}

// send sends req to broker to, or (to 0) to the group's coordinator as the client finds it.
func (m *rawMember) send(ctx context.Context, to int32, req kmsg.Request) (kmsg.Response, error) {
	if to == 0 {
		return m.cl.Request(ctx, req)
	}
	return m.cl.Broker(int(to)).Request(ctx, req)
}

// transient: the coordinator is changing; ask again.
func transient(code int16) bool {
	return code == kerr.NotCoordinator.Code || code == kerr.CoordinatorLoadInProgress.Code || code == kerr.CoordinatorNotAvailable.Code
}

// settle calls f until it answers something other than a transient error or a transport
// error, for up to a minute.
func settle(t *testing.T, what string, f func(ctx context.Context) (int16, error)) int16 {
	t.Helper()
	var code int16
	testutil.EventuallyNoError(t, time.Minute, what+" settles", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		code, err = f(ctx)
		if err == nil && transient(code) {
			err = kerr.ErrorForCode(code)
		}
		return err
	})
	return code
}

func (m *rawMember) joinRequest() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.group
	req.SessionTimeoutMillis = int32(m.session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(m.rebal.Milliseconds())
	req.MemberID = m.id
	req.InstanceID = m.instance
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{m.topic}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	return req
}

// joinOnce sends one JoinGroup to broker to (0: the coordinator), taking the member ID
// of a MEMBER_ID_REQUIRED answer and joining again with it; the member's ID and
// generation follow a successful answer.
func (m *rawMember) joinOnce(ctx context.Context, to int32) (*kmsg.JoinGroupResponse, error) {
	for {
		r, err := m.send(ctx, to, m.joinRequest())
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.JoinGroupResponse)
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			m.id = resp.MemberID
			continue
		}
		if resp.ErrorCode == 0 {
			m.id, m.gen, m.join = resp.MemberID, resp.Generation, resp
		}
		return resp, nil
	}
}

// mustJoin joins at the coordinator (retrying while it changes) and fails the test on
// any other error.
func (m *rawMember) mustJoin() *kmsg.JoinGroupResponse {
	m.t.Helper()
	var resp *kmsg.JoinGroupResponse
	code := settle(m.t, "JoinGroup "+m.group, func(ctx context.Context) (int16, error) {
		var err error
		if resp, err = m.joinOnce(ctx, 0); err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	if code != 0 {
		m.t.Fatalf("JoinGroup %s (member %q): %v", m.group, m.id, kerr.ErrorForCode(code))
	}
	return resp
}

// syncRequest is the member's SyncGroup for its last join; as the leader (not told to
// skip the assignment) it gives partition 0 of the topic to the first member.
func (m *rawMember) syncRequest() *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.gen, m.id, m.instance
	pt := "consumer"
	req.ProtocolType, req.Protocol = &pt, m.join.Protocol
	if m.join.LeaderID == m.id && !m.join.SkipAssignment {
		for i, mem := range m.join.Members {
			a := kmsg.NewConsumerMemberAssignment()
			if i == 0 {
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic, at.Partitions = m.topic, []int32{0}
				a.Topics = append(a.Topics, at)
			}
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = mem.MemberID, a.AppendTo(nil)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
	}
	return req
}

func (m *rawMember) mustSync() {
	m.t.Helper()
	code := settle(m.t, "SyncGroup "+m.group, func(ctx context.Context) (int16, error) {
		r, err := m.send(ctx, 0, m.syncRequest())
		if err != nil {
			return 0, err
		}
		return r.(*kmsg.SyncGroupResponse).ErrorCode, nil
	})
	if code != 0 {
		m.t.Fatalf("SyncGroup %s (member %q generation %d): %v", m.group, m.id, m.gen, kerr.ErrorForCode(code))
	}
}

// commitRequest commits offset for partition 0 of the member's topic as member id of
// generation gen.
func (m *rawMember) commitRequest(id string, gen int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, gen, id, m.instance
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = m.topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// commit sends the commit to broker to (0: the coordinator) until the answer is not a
// coordinator change, and returns its error code.
func (m *rawMember) commit(to int32, id string, gen int32, offset int64) int16 {
	m.t.Helper()
	return settle(m.t, "OffsetCommit "+m.group, func(ctx context.Context) (int16, error) {
		r, err := m.send(ctx, to, m.commitRequest(id, gen, offset))
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.OffsetCommitResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("OffsetCommit answer %+v", resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
}

func (m *rawMember) heartbeat(to int32) int16 {
	m.t.Helper()
	return settle(m.t, "Heartbeat "+m.group, func(ctx context.Context) (int16, error) {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, m.gen, m.id, m.instance
		r, err := m.send(ctx, to, req)
		if err != nil {
			return 0, err
		}
		return r.(*kmsg.HeartbeatResponse).ErrorCode, nil
	})
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE (accepted)"
	}
	return kerr.ErrorForCode(code).Error()
}

// Issue 21, 2: a broker that lost a group's partition and gets it back serves the group
// as the log has it, not as it was when it lost it. A member of its earlier tenure that
// left the group at the other coordinator (which rebalanced it to a new member) is a
// zombie there: its commit with its old generation is refused (ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID) and the committed offset stays the new member's.
func TestZombieCommitRefusedAfterCoordinatorReturns(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-zombie", "gz"
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	a := findCoordinator(t, adm, group)
	b := a%3 + 1

	// Tenure 1 at broker a: the zombie-to-be joins (a session long enough to outlive
	// the test, so no timer expires it anywhere) and commits.
	zombie := newRawMember(t, c, group, topic, "", time.Minute, time.Minute)
	zombie.mustJoin()
	zombie.mustSync()
	if code := zombie.commit(0, zombie.id, zombie.gen, 10); code != 0 {
		t.Fatalf("commit in tenure 1: %s", codeName(code))
	}
	zid, zgen := zombie.id, zombie.gen
	t.Logf("tenure 1 at broker %d: member %s generation %d committed 10", a, zid, zgen)

	// Tenure 2 at broker b: the member leaves, a new member joins and commits.
	moveCoordinator(t, c, adm, group, b)
	settle(t, "LeaveGroup", func(ctx context.Context) (int16, error) {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group, req.MemberID = group, zid
		mem := kmsg.NewLeaveGroupRequestMember()
		mem.MemberID = zid
		req.Members = append(req.Members, mem)
		r, err := zombie.send(ctx, 0, req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.LeaveGroupResponse)
		return resp.ErrorCode, nil // UNKNOWN_MEMBER_ID where b does not know the group
	})
	fresh := newRawMember(t, c, group, topic, "", time.Minute, time.Minute)
	fresh.mustJoin()
	fresh.mustSync()
	if code := fresh.commit(0, fresh.id, fresh.gen, 20); code != 0 {
		t.Fatalf("commit in tenure 2: %s", codeName(code))
	}
	t.Logf("tenure 2 at broker %d: member %s generation %d committed 20", b, fresh.id, fresh.gen)

	// Tenure 3, back at broker a: the zombie's commit with its tenure-1 identity.
	moveCoordinator(t, c, adm, group, a)
	if got := committed(t, adm, group, topic, 0); got != 20 {
		t.Fatalf("committed offset %d back at broker %d, want 20", got, a)
	}
	code := zombie.commit(a, zid, zgen, 5)
	t.Logf("zombie commit (member %s, generation %d) at broker %d: %s", zid, zgen, a, codeName(code))
	if code != kerr.IllegalGeneration.Code && code != kerr.UnknownMemberID.Code {
		t.Errorf("the zombie's commit with its old generation got %s, want ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID", codeName(code))
	}
	if got := committed(t, adm, group, topic, 0); got != 20 {
		t.Errorf("committed offset %d after the zombie's commit, want 20 (the new member's)", got)
	}
	// The current member still commits.
	if code := fresh.commit(0, fresh.id, fresh.gen, 21); code != 0 {
		t.Errorf("the current member's commit back at broker %d: %s", a, codeName(code))
	}
}

// Issue 21, 2: a static member (group.instance.id, KIP-345) that joined again at the
// other coordinator (a restart: a new member ID for its instance ID) is the member when
// the group's partition comes back: its heartbeat and commit are accepted, and its
// replaced member ID is fenced (FENCED_INSTANCE_ID).
func TestStaticMemberAcceptedAfterCoordinatorReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-static", "gs"
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	a := findCoordinator(t, adm, group)
	b := a%3 + 1

	s := newRawMember(t, c, group, topic, "instance-1", time.Minute, time.Minute)
	s.mustJoin()
	s.mustSync()
	if code := s.commit(0, s.id, s.gen, 10); code != 0 {
		t.Fatalf("commit in tenure 1: %s", codeName(code))
	}
	oldID, oldGen := s.id, s.gen
	t.Logf("tenure 1 at broker %d: instance-1 is member %s generation %d", a, oldID, oldGen)

	// At broker b the instance restarts: it joins without a member ID and gets a new one.
	moveCoordinator(t, c, adm, group, b)
	s.id = ""
	s.mustJoin()
	s.mustSync()
	if s.id == oldID {
		t.Fatalf("the restarted static member kept member ID %s", s.id)
	}
	if code := s.commit(0, s.id, s.gen, 20); code != 0 {
		t.Fatalf("commit in tenure 2: %s", codeName(code))
	}
	t.Logf("tenure 2 at broker %d: instance-1 is member %s generation %d", b, s.id, s.gen)

	moveCoordinator(t, c, adm, group, a)
	if code := s.heartbeat(a); code != 0 {
		t.Errorf("the static member's heartbeat (member %s generation %d) back at broker %d: %s", s.id, s.gen, a, codeName(code))
	}
	if code := s.commit(a, s.id, s.gen, 30); code != 0 {
		t.Errorf("the static member's commit (member %s generation %d) back at broker %d: %s", s.id, s.gen, a, codeName(code))
	} else if got := committed(t, adm, group, topic, 0); got != 30 {
		t.Errorf("committed offset %d, want 30", got)
	}
	if code := s.commit(a, oldID, oldGen, 5); code != kerr.FencedInstanceID.Code {
		t.Errorf("a commit with the replaced member ID %s: %s, want FENCED_INSTANCE_ID", oldID, codeName(code))
	}
}

// Issue 21, 3: JoinGroup and SyncGroup requests parked at a coordinator when it loses
// the group are answered NOT_COORDINATOR at once (asserted: well under the 60 s
// rebalance timeout they would otherwise wait), so the members go to the new one.
func TestParkedJoinAndSyncReleasedOnCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const topic = "gp"
	const rebalance = time.Minute
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	// Two groups on the same offsets partition: one move takes both away.
	joinGroup := "issue21-parked-join"
	syncGroup := ""
	for i := 0; syncGroup == ""; i++ {
		if g := fmt.Sprintf("issue21-parked-sync-%d", i); offsetsIndex(g, 6) == offsetsIndex(joinGroup, 6) {
			syncGroup = g
		}
	}
	a := findCoordinator(t, adm, joinGroup)
	if a2 := findCoordinator(t, adm, syncGroup); a2 != a {
		t.Fatalf("coordinators %d and %d for groups of one partition", a, a2)
	}
	b := a%3 + 1

	type answer struct {
		code int16
		err  error
		at   time.Time
	}
	// A JoinGroup parked in PreparingRebalance: member 2 joins a stable group whose
	// member 1 never rejoins.
	j1 := newRawMember(t, c, joinGroup, topic, "", time.Minute, rebalance)
	j1.mustJoin()
	j1.mustSync()
	j2 := newRawMember(t, c, joinGroup, topic, "", time.Minute, rebalance)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	parkedJoin := make(chan answer, 1)
	go func() {
		resp, err := j2.joinOnce(ctx, a)
		var code int16
		if resp != nil {
			code = resp.ErrorCode
		}
		parkedJoin <- answer{code, err, time.Now()}
	}()

	// A SyncGroup parked in CompletingRebalance: both members joined generation 2, the
	// follower syncs, the leader never does.
	s1 := newRawMember(t, c, syncGroup, topic, "", time.Minute, rebalance)
	s1.mustJoin()
	s1.mustSync()
	s2 := newRawMember(t, c, syncGroup, topic, "", time.Minute, rebalance)
	joined := make(chan error, 1)
	go func() {
		resp, err := s2.joinOnce(ctx, a)
		if err == nil && resp.ErrorCode != 0 {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		joined <- err
	}()
	testutil.Eventually(t, 30*time.Second, "member 2's join parked (the group waits for member 1)", func() bool {
		return groupDescribed(t, adm, syncGroup).State == "PreparingRebalance"
	})
	s1.mustJoin()
	select {
	case err := <-joined:
		if err != nil {
			t.Fatalf("member 2's join of %s: %v", syncGroup, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("member 2's join of %s not answered after member 1 rejoined", syncGroup)
	}
	if s1.gen != s2.gen {
		t.Fatalf("members of %s in generations %d and %d", syncGroup, s1.gen, s2.gen)
	}
	follower := s2
	if s2.join.LeaderID == s2.id {
		follower = s1
	}
	parkedSync := make(chan answer, 1)
	go func() {
		r, err := follower.send(ctx, a, follower.syncRequest())
		var code int16
		if err == nil {
			code = r.(*kmsg.SyncGroupResponse).ErrorCode
		}
		parkedSync <- answer{code, err, time.Now()}
	}()

	testutil.Eventually(t, 30*time.Second, "the JoinGroup parked", func() bool {
		return groupDescribed(t, adm, joinGroup).State == "PreparingRebalance"
	})
	// on purpose: time for the SyncGroup to arrive and park (no observable: the group is in
	// CompletingRebalance before and after), and for either to be answered wrongly
	time.Sleep(time.Second)
	select {
	case ans := <-parkedJoin:
		t.Fatalf("the JoinGroup was not parked: %s %v", codeName(ans.code), ans.err)
	case ans := <-parkedSync:
		t.Fatalf("the SyncGroup was not parked: %s %v", codeName(ans.code), ans.err)
	default:
	}

	start := time.Now()
	moveCoordinator(t, c, adm, joinGroup, b)
	t.Logf("coordinator %d → %d in %v", a, b, time.Since(start).Round(time.Millisecond))
	limit := start.Add(rebalance / 2)
	for _, p := range []struct {
		what string
		ch   chan answer
	}{{"JoinGroup", parkedJoin}, {"SyncGroup", parkedSync}} {
		select {
		case ans := <-p.ch:
			took := ans.at.Sub(start)
			t.Logf("the parked %s was answered %s %v %v after the move began", p.what, codeName(ans.code), ans.err, took.Round(time.Millisecond))
			if ans.err != nil || ans.code != kerr.NotCoordinator.Code {
				t.Errorf("the parked %s got %s %v, want NOT_COORDINATOR", p.what, codeName(ans.code), ans.err)
			}
		case <-time.After(time.Until(limit)):
			t.Errorf("the %s parked at broker %d was not answered %v after the group moved to broker %d (rebalance timeout %v; want NOT_COORDINATOR at once)",
				p.what, a, rebalance/2, b, rebalance)
		}
	}
}

// Issue 21, 5: after a topic is deleted and created again with the same name, the group
// has no committed offset for the new topic (OffsetFetch -1), also once the group's
// coordinator moved and restored the group from its log.
func TestRecreatedTopicHasNoCommittedOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-recreate", "gr"
	create := func() metadata.TopicID {
		t.Helper()
		testutil.EventuallyNoError(t, 30*time.Second, "creating "+topic, func() error {
			_, err := adm.CreateTopic(ctxFor(t, 10*time.Second), 1, 1, nil, topic)
			return err
		})
		var id metadata.TopicID
		testutil.Eventually(t, 30*time.Second, topic+" on every broker", func() bool {
			for i := 0; i < 3; i++ {
				tp := c.Broker(i).Client.View().Topics[topic]
				if tp == nil {
					return false
				}
				id = tp.ID
			}
			return true
		})
		return id
	}
	first := create()
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, 10, -1)
	res, err := adm.CommitOffsets(ctxFor(t, 30*time.Second), group, offs)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := committed(t, adm, group, topic, 0); got != 10 {
		t.Fatalf("committed %d, want 10", got)
	}

	if _, err := adm.DeleteTopic(ctxFor(t, 30*time.Second), topic); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, topic+" deleted on every broker", func() bool {
		for i := 0; i < 3; i++ {
			if c.Broker(i).Client.View().Topics[topic] != nil {
				return false
			}
		}
		return true
	})
	second := create()
	if second == first {
		t.Fatalf("the new %s has the old topic ID %v", topic, first)
	}
	// A coordinator may drop a deleted topic's offsets in the background: allow it time.
	testutil.EventuallyNoError(t, 30*time.Second, "no offset of the recreated "+topic+"/0", func() error {
		if got := committed(t, adm, group, topic, 0); got != -1 {
			return fmt.Errorf("OffsetFetch: %d (the deleted topic's offset), want -1", got)
		}
		return nil
	})
	// The coordinator moves: the new one restores the group from the log, where the old
	// topic's commit is.
	from := findCoordinator(t, adm, group)
	moveCoordinator(t, c, adm, group, from%3+1)
	if got := committed(t, adm, group, topic, 0); got != -1 {
		t.Errorf("after the coordinator moved, OffsetFetch of the recreated %s/0: %d, want -1", topic, got)
	}
	// And the group commits to the new topic as to any.
	var again kadm.Offsets
	again.AddOffset(topic, 0, 3, -1)
	if res, err := adm.CommitOffsets(ctxFor(t, 30*time.Second), group, again); err != nil || res.Error() != nil {
		t.Fatalf("commit to the recreated topic: %v %v", err, res.Error())
	}
	if got := committed(t, adm, group, topic, 0); got != 3 {
		t.Errorf("committed %d to the recreated topic, read %d", 3, got)
	}
}

// Issue 21, 6: an OffsetCommit from a member (its member ID and generation) refreshes
// its session, as in Kafka: a member that commits every second and sends no Heartbeat
// outlives its 6 s session timeout.
func TestOffsetCommitKeepsMemberAlive(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	const group, topic = "issue21-commit-session", "gc6"
	const session = 6 * time.Second
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	m := newRawMember(t, c, group, topic, "", session, 10*time.Second)
	m.mustJoin()
	m.mustSync()
	start := time.Now()
	for i := int64(1); time.Since(start) < session+3*time.Second; i++ { // half a session past its end
		if code := m.commit(0, m.id, m.gen, i); code != 0 {
			t.Fatalf("commit %d, %v after the join, without heartbeats but committing every second: %s (session timeout %v)",
				i, time.Since(start).Round(time.Millisecond), codeName(code), session)
		}
		time.Sleep(time.Second) // on purpose: a commit a second, no heartbeats
	}
	if code := m.heartbeat(0); code != 0 {
		t.Errorf("heartbeat after %v of commits: %s", time.Since(start).Round(time.Millisecond), codeName(code))
	}
	if d := groupDescribed(t, adm, group); len(d.Members) != 1 || d.Members[0].MemberID != m.id {
		t.Errorf("group %s members %v, want [%s]", d.State, memberIDs(d), m.id)
	}
}

// ---------------------------------------------------------------------------------------
// kcat (librdkafka): a second client family.

// lineLog collects a process's output lines with their arrival times.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	times []time.Time
}

func (l *lineLog) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.times = append(l.times, time.Now())
		l.mu.Unlock()
	}
}

// since returns the lines from index i on that contain any of subs, and the count of
// lines.
func (l *lineLog) since(i int, subs ...string) (match []string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines[min(i, len(l.lines)):] {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				match = append(match, s)
				break
			}
		}
	}
	return match, len(l.lines)
}

func (l *lineLog) lastAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.times) == 0 {
		return time.Time{}
	}
	return l.times[len(l.times)-1]
}

// A kcat balanced consumer (librdkafka's classic group protocol) survives a graceful
// move of its group's coordinator without a rebalance: librdkafka finds the new
// coordinator and heartbeats it, and kcat reports no revocation and no new assignment
// (its "% Group ... rebalanced" lines), and keeps printing records.
func TestKcatGroupSurvivesCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	kcatGroupAcrossCoordinatorChange(t, "issue21-kcat", "gk", false)
}

// The same across a failover: the coordinator's broker is killed (the topic's partitions
// were moved off it first, so only the coordinator dies).
func TestKcatGroupSurvivesCoordinatorFailover(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	kcatGroupAcrossCoordinatorChange(t, "issue21-kcat-failover", "gkf", true)
}

func kcatGroupAcrossCoordinatorChange(t *testing.T, group, topic string, kill bool) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
			t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
		}
		t.Skip("kcat not installed")
	}
	c := startGroupCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 3, topic); err != nil {
		t.Fatal(err)
	}
	from := findCoordinator(t, adm, group)
	if kill {
		movePartitionsOff(t, c, topic, from)
	}
	startTicker(t, c, topic)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kcat, "-b", c.Bootstrap(), "-G", group, "-o", "beginning",
		"-u", "-f", "%p %o\n", "-d", "cgrp",
		"-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500",
		"-X", "fetch.wait.max.ms=100", topic)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out, logs lineLog
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); out.read(stdout) }()
	go func() { defer readers.Done(); logs.read(stderr) }()
	t.Cleanup(func() {
		cancel()
		readers.Wait()
		cmd.Wait()
	})
	// Assigned, and consuming.
	testutil.Eventually(t, 60*time.Second, "kcat is assigned the topic and consumes", func() bool {
		got, _ := logs.since(0, "rebalanced")
		_, n := out.since(0)
		return len(got) > 0 && n > 50
	})
	time.Sleep(2 * time.Second) // on purpose: any follow-up rebalance of the join shows by now
	rebalances, mark := logs.since(0, "rebalanced")
	t.Logf("kcat before the move (coordinator %d): %v", from, rebalances)

	to := from%3 + 1
	start := time.Now()
	if kill {
		_, idx := groupPartition(t, c, adm, group)
		c.KillBroker(int(from - 1))
		testutil.Eventually(t, 30*time.Second, "the group's offsets partition fails over", func() bool {
			v := leaderView(c)
			if v == nil || v.Topics[consumerOffsets] == nil {
				return false
			}
			p := v.Topics[consumerOffsets].Partitions[idx]
			b, ok := v.Broker(p.Leader)
			to = p.Leader
			return ok && b.Active() && p.Leader != from && !p.Recovering
		})
		waitCoordinator(t, c, adm, group, to)
	} else {
		moveCoordinator(t, c, adm, group, to)
	}
	t.Logf("coordinator %d → %d in %v", from, to, time.Since(start).Round(time.Millisecond))
	// librdkafka learns of the new coordinator (NOT_COORDINATOR from the old one:
	// "changing coordinator 1 -> 2") and heartbeats it ("GroupCoordinator/2: Heartbeat
	// for group ... generation id 1"); a coordinator that does not know the group
	// answers the first one UNKNOWN_MEMBER_ID and librdkafka rebalances (EAGER: it
	// revokes everything, kcat prints "% Group ... rebalanced (...): revoked: ...").
	hb := fmt.Sprintf("GroupCoordinator/%d: Heartbeat", to)
	testutil.Eventually(t, 30*time.Second, "kcat heartbeats the new coordinator", func() bool {
		got, _ := logs.since(mark, hb)
		return len(got) >= 6
	})
	_, outMark := out.since(0)
	time.Sleep(time.Second) // on purpose: kcat must consume within this second
	if _, n := out.since(outMark); n == outMark {
		t.Errorf("kcat consumed nothing in the last second (last record %v ago)", time.Since(out.lastAt()).Round(time.Millisecond))
	}
	if got, _ := logs.since(mark, "rebalanced", "Joining group", "|REBALANCE|", "|LOST|", "Unknown member", "generation id is not valid"); len(got) > 0 {
		all, _ := logs.since(mark, "")
		t.Errorf("kcat's group rebalanced after the coordinator moved %d → %d:\n%s\n--- kcat's log since the move:\n%s",
			from, to, strings.Join(got, "\n"), strings.Join(all[:min(len(all), 40)], "\n"))
	}
}
