package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// TestCluster runs one 3-controller quorum through elections, forwarding, topic
// administration, placement, moves, the watch and bad input.
func TestCluster(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	follower := tc.follower(leader)
	ctx := ctxT(t)

	// A client that only knows a follower: every write is forwarded.
	admin := tc.client(-1, nil, follower)
	if admin.View().ClusterID == "" || admin.View().ClusterID != tc.ctrls[leader].View().ClusterID {
		t.Fatalf("client cluster id %q, leader's %q", admin.View().ClusterID, tc.ctrls[leader].View().ClusterID)
	}

	t.Run("no brokers", func(t *testing.T) {
		_, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "early", Partitions: 1, ReplicationFactor: -1}, false)
		if !errors.Is(err, metadata.ErrNotController) {
			t.Fatalf("create without brokers: %v, want not_available", err)
		}
	})

	b1, b2, b3 := tc.broker(1, "a"), tc.broker(2, "b"), tc.broker(3, "c")

	t.Run("forwarding and placement", func(t *testing.T) {
		top, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "orders", Partitions: 30, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "1000"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		// Read your writes: the client's own view has it on return.
		got := admin.View().Topics["orders"]
		if got == nil || got.ID != top.ID || len(got.Partitions) != 30 || admin.View().TopicByID(top.ID) == nil {
			t.Fatalf("client view after create: %+v", got)
		}
		if n := countLeaders(got.Partitions); n[1] != 10 || n[2] != 10 || n[3] != 10 {
			t.Fatalf("30 partitions over brokers in zones a/b/c: %v", n)
		}
		for i, c := range tc.ctrls {
			testutil.Eventually(t, 10*time.Second, fmt.Sprintf("controller %d to apply the topic", i+1), func() bool {
				tt := c.View().Topics["orders"]
				return tt != nil && tt.ID == top.ID
			})
		}
		if st := tc.ctrls[follower].Status(); st.LeaderID != int32(leader+1) || st.State != "Follower" || st.LeaderAPI != tc.peers[leader].APIAddr {
			t.Fatalf("follower status %+v", st)
		}
	})

	t.Run("admin errors and changes", func(t *testing.T) {
		cases := []struct {
			spec metadata.TopicSpec
			want error
		}{
			{metadata.TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: -1}, metadata.ErrTopicExists},
			{metadata.TopicSpec{Name: "bad/name", Partitions: 1, ReplicationFactor: -1}, metadata.ErrInvalidTopic},
			{metadata.TopicSpec{Name: "zero", Partitions: 0, ReplicationFactor: -1}, metadata.ErrInvalidPartitions},
			{metadata.TopicSpec{Name: "rf", Partitions: 1, ReplicationFactor: 0}, metadata.ErrInvalidReplication},
			{metadata.TopicSpec{Name: "cfg", Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "soon"}}, metadata.ErrInvalidConfig},
		}
		for _, c := range cases {
			if _, err := admin.CreateTopic(ctx, c.spec, false); !errors.Is(err, c.want) {
				t.Errorf("create %+v: %v, want %v", c.spec, err, c.want)
			}
		}
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "dry", Partitions: 2, ReplicationFactor: -1}, true); err != nil {
			t.Fatal(err)
		}
		if admin.View().Topics["dry"] != nil {
			t.Fatal("validate-only created the topic")
		}
		if err := admin.AlterTopicConfigs(ctx, "orders", []metadata.ConfigOp{{Key: "retention.ms", Op: metadata.OpSet, Value: "5000"}, {Key: "cleanup.policy", Op: metadata.OpSet, Value: "compact"}}, false); err != nil {
			t.Fatal(err)
		}
		if err := admin.AlterTopicConfigs(ctx, "orders", []metadata.ConfigOp{{Key: "retention.ms", Op: metadata.OpSet, Value: "1"}}, true); err != nil {
			t.Fatal(err)
		}
		if err := admin.AlterTopicConfigs(ctx, "orders", []metadata.ConfigOp{{Key: "nope", Op: metadata.OpSet, Value: "1"}}, false); !errors.Is(err, metadata.ErrInvalidConfig) {
			t.Fatalf("unknown config: %v", err)
		}
		if cfg := admin.View().Topics["orders"].Configs; cfg["retention.ms"] != "5000" || cfg["cleanup.policy"] != "compact" {
			t.Fatalf("configs %v", cfg)
		}
		if err := admin.CreatePartitions(ctx, "orders", 33, false); err != nil {
			t.Fatal(err)
		}
		if err := admin.CreatePartitions(ctx, "orders", 20, false); !errors.Is(err, metadata.ErrInvalidPartitions) {
			t.Fatalf("shrink: %v", err)
		}
		if err := admin.CreatePartitions(ctx, "missing", 2, false); !errors.Is(err, metadata.ErrUnknownTopic) {
			t.Fatalf("grow missing: %v", err)
		}
		top := admin.View().Topics["orders"]
		if len(top.Partitions) != 33 {
			t.Fatalf("%d partitions after growing to 33", len(top.Partitions))
		}
		if err := admin.SetLogStartOffset(ctx, top.ID, 4, 100); err != nil {
			t.Fatal(err)
		}
		if err := admin.SetLogStartOffset(ctx, top.ID, 4, 50); err != nil {
			t.Fatal(err)
		}
		if err := admin.SetLogStartOffset(ctx, top.ID, 4, -5); !errors.Is(err, metadata.ErrInvalidOffset) {
			t.Fatalf("negative offset: %v", err)
		}
		if err := admin.SetLogStartOffset(ctx, metadata.TopicID{9}, 0, 5); !errors.Is(err, metadata.ErrUnknownTopic) {
			t.Fatalf("unknown topic id: %v", err)
		}
		if got := admin.View().Topics["orders"].Partitions[4].LogStartOffset; got != 100 {
			t.Fatalf("log start offset %d, want 100", got)
		}

		// Producer IDs never repeat across clients.
		seen := map[int64]bool{}
		for _, c := range []*ctlclient.Client{admin, b1, b2, admin, b1} {
			for i := 0; i < 3; i++ {
				id, err := c.AllocateProducerID(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if seen[id] {
					t.Fatalf("producer id %d handed out twice", id)
				}
				seen[id] = true
			}
		}

		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "doomed", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.DeleteTopic(ctx, "doomed"); err != nil {
			t.Fatal(err)
		}
		if admin.View().Topics["doomed"] != nil {
			t.Fatal("deleted topic still in the view")
		}
		if _, err := admin.DeleteTopic(ctx, "doomed"); !errors.Is(err, metadata.ErrUnknownTopic) {
			t.Fatalf("delete twice: %v", err)
		}
	})

	t.Run("moves", func(t *testing.T) {
		top, err := b1.CreateTopic(ctx, metadata.TopicSpec{Name: "moving", Partitions: 3, ReplicationFactor: -1}, false)
		if err != nil {
			t.Fatal(err)
		}
		clients := map[int32]*ctlclient.Client{1: b1, 2: b2, 3: b3}
		p0 := top.Partitions[0]
		from, to := clients[p0.Leader], int32(p0.Leader%3+1)
		other := clients[to%3+1] // neither leader nor target
		if err := from.MovePartition(ctx, top.ID, 0, to); err != nil {
			t.Fatal(err)
		}
		if p := from.View().TopicByID(top.ID).Partitions[0]; !p.Moving || p.MovingTo != to {
			t.Fatalf("after BeginMove: %+v", p)
		}
		if err := other.CompleteMove(ctx, top.ID, 0, 17); !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("CompleteMove from a broker that does not lead: %v", err)
		}
		if err := clients[to].CompleteMove(ctx, top.ID, 0, 17); !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("CompleteMove from the target: %v", err)
		}
		if err := from.CompleteMove(ctx, top.ID, 0, 17); err != nil {
			t.Fatal(err)
		}
		p := from.View().TopicByID(top.ID).Partitions[0]
		want := []metadata.LogRange{{Broker: p0.Leader, StartOffset: 0}, {Broker: to, StartOffset: 17}}
		if p.Leader != to || p.LeaderEpoch != p0.LeaderEpoch+1 || p.Moving || p.MovingTo != -1 || fmt.Sprint(p.Logs) != fmt.Sprint(want) {
			t.Fatalf("after CompleteMove: %+v, want leader %d epoch %d logs %v", p, to, p0.LeaderEpoch+1, want)
		}
		if err := from.CompleteMove(ctx, top.ID, 0, 18); !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("CompleteMove twice: %v", err)
		}
		p1 := top.Partitions[1]
		if err := clients[p1.Leader].MovePartition(ctx, top.ID, 1, 99); !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("move to an unknown broker: %v", err)
		}
		target := p1.Leader%3 + 1
		if err := clients[p1.Leader].MovePartition(ctx, top.ID, 1, target); err != nil {
			t.Fatal(err)
		}
		if err := clients[p1.Leader].CancelMove(ctx, top.ID, 1); err != nil {
			t.Fatal(err)
		}
		if p := clients[p1.Leader].View().TopicByID(top.ID).Partitions[1]; p.Moving || p.Leader != p1.Leader || p.LeaderEpoch != 0 {
			t.Fatalf("after CancelMove: %+v", p)
		}
	})

	// The safety bug: the old leader captured its end offset for a move that was then
	// cancelled; more records were acked and a new move began. Its retried completion
	// of the first move must not complete the second one with the old end offset.
	t.Run("stale move completion", func(t *testing.T) {
		top, err := b1.CreateTopic(ctx, metadata.TopicSpec{Name: "stale-move", Partitions: 1, ReplicationFactor: -1}, false)
		if err != nil {
			t.Fatal(err)
		}
		clients := map[int32]*ctlclient.Client{1: b1, 2: b2, 3: b3}
		leader := top.Partitions[0].Leader
		from, to := clients[leader], leader%3+1
		if err := from.MovePartition(ctx, top.ID, 0, to); err != nil {
			t.Fatal(err)
		}
		gen1 := from.View().TopicByID(top.ID).Partitions[0].MoveGen
		if err := from.CancelMove(ctx, top.ID, 0); err != nil {
			t.Fatal(err)
		}
		if err := from.MovePartition(ctx, top.ID, 0, to); err != nil {
			t.Fatal(err)
		}
		gen2 := from.View().TopicByID(top.ID).Partitions[0].MoveGen
		if gen1 == 0 || gen2 == 0 || gen1 == gen2 {
			t.Fatalf("move generations %d then %d", gen1, gen2)
		}
		if err := from.CompleteMoveGen(ctx, top.ID, 0, 10, gen1); !errors.Is(err, metadata.ErrMoveRefused) {
			t.Fatalf("completing the cancelled move: %v, want ErrMoveRefused", err)
		}
		if p := from.View().TopicByID(top.ID).Partitions[0]; p.Leader != leader || !p.Moving || p.MoveGen != gen2 {
			t.Fatalf("after the stale completion: %+v", p)
		}
		if err := from.CompleteMoveGen(ctx, top.ID, 0, 20, gen2); err != nil {
			t.Fatal(err)
		}
		p := from.View().TopicByID(top.ID).Partitions[0]
		want := []metadata.LogRange{{Broker: leader, StartOffset: 0}, {Broker: to, StartOffset: 20}}
		if p.Leader != to || p.Moving || p.MoveGen != 0 || fmt.Sprint(p.Logs) != fmt.Sprint(want) {
			t.Fatalf("after completing the current move: %+v", p)
		}
	})

	t.Run("watch delivers changes", func(t *testing.T) {
		watcher := tc.client(-1, nil, tc.follower(follower)) // watches another controller
		ch := watcher.Changed()
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "watched", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for watcher.View().Topics["watched"] == nil {
			select {
			case <-ch:
				ch = watcher.Changed()
			case <-deadline:
				t.Fatal("the watch did not deliver the new topic")
			}
		}
		if watcher.View().ControllerID != -1 || b2.View().ControllerID != 2 {
			t.Fatalf("controller ids in views: admin %d, broker 2 %d", watcher.View().ControllerID, b2.View().ControllerID)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		hc := &http.Client{Timeout: 30 * time.Second}
		post := func(addr, path, ct string, body []byte) (int, ctlwire.APIError) {
			t.Helper()
			resp, err := hc.Post("http://"+addr+path, ct, bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			defer resp.Body.Close()
			var ae ctlwire.APIError
			b, _ := io.ReadAll(resp.Body)
			json.Unmarshal(b, &ae)
			return resp.StatusCode, ae
		}
		for _, idx := range []int{leader, follower} {
			addr := tc.peers[idx].APIAddr
			for _, body := range []string{"{", "", "[]", `{"name": 5}`, `{"name":"x","partitions":"many"}`, "\x00\xff"} {
				if st, ae := post(addr, "/v1/topics", "application/json", []byte(body)); st != http.StatusBadRequest || ae.Code != "bad_request" {
					t.Errorf("controller %d, body %q: %d %+v", idx+1, body, st, ae)
				}
			}
			huge := append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), 5<<20)...)
			if st, ae := post(addr, "/v1/topics", "application/json", huge); st != http.StatusBadRequest || ae.Code != "bad_request" {
				t.Errorf("controller %d, 5 MiB body: %d %+v", idx+1, st, ae)
			}
			if st, _ := post(addr, "/v1/nope", "application/json", []byte("{}")); st != http.StatusNotFound {
				t.Errorf("unknown path: %d", st)
			}
			resp, err := hc.Get("http://" + addr + "/v1/metadata?after=abc")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("after=abc: %d", resp.StatusCode)
			}
			// Random bytes to every write endpoint: never a crash or an internal error. A
			// 503 (not_leader/unavailable: retry later) is a fair answer to a well-formed
			// request while the 2-core CI machine makes Raft hold an election.
			serverErr := func(st int, ae ctlwire.APIError) bool {
				return st >= 500 && !(st == http.StatusServiceUnavailable && (ae.Code == "not_leader" || ae.Code == "unavailable"))
			}
			rng := rand.New(rand.NewSource(int64(idx)))
			for _, path := range []string{"/v1/brokers/register", "/v1/brokers/heartbeat", "/v1/brokers/suspect", "/v1/topics", "/v1/topics/orders/partitions", "/v1/topics/orders/configs", "/v1/partitions/log-start", "/v1/partitions/move", "/v1/partitions/complete-move", "/v1/partitions/cancel-move", "/v1/producer-ids", "/v1/objects/prepare", "/v1/objects/commit", "/v1/objects/delete"} {
				for i := 0; i < 5; i++ {
					b := make([]byte, rng.Intn(64))
					rng.Read(b)
					if st, ae := post(addr, path, "application/json", b); serverErr(st, ae) {
						t.Errorf("%s with random bytes: %d %+v", path, st, ae)
					}
				}
				if st, ae := post(addr, path, "application/json", []byte(`{"id":-1,"topic_id":[1,2],"partition":-7,"offset":-1,"count":-3,"total":-1,"ops":[{"key":"x","op":9}],"broker":-1,"epoch":-1,"ids":[0,99],"ranges":[{"first_offset":5,"last_offset":1}]}`)); serverErr(st, ae) {
					t.Errorf("%s with odd values: %d %+v", path, st, ae)
				}
			}
		}
		// Still serving.
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: "after-bad-input", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
			t.Fatalf("create after bad input: %v", err)
		}
		for i, c := range tc.ctrls {
			if st := c.Status(); st.State != "Leader" && st.State != "Follower" {
				t.Fatalf("controller %d in state %s", i+1, st.State)
			}
		}
	})
}

// TestLeaderFailoverUnderCreates kills the leader under a stream of CreateTopics: a new
// leader takes over, every acknowledged topic survives, and the client needed at most a
// few retries per call.
func TestLeaderFailoverUnderCreates(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	tc.broker(1, "a")
	admin := tc.client(-1, nil, tc.leaderFirst(leader)...) // talk to the leader, so its death is felt
	ctx := ctxT(t)

	var (
		mu         sync.Mutex
		acked      = map[string]metadata.TopicID{}
		maxRetries int64
		killed     = make(chan struct{})
		afterKill  int
	)
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			before := admin.Stats().Retries
			name := fmt.Sprintf("t-%03d", i)
			top, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: name, Partitions: 2, ReplicationFactor: -1}, false)
			if err != nil {
				errc <- fmt.Errorf("create %s: %w", name, err)
				return
			}
			mu.Lock()
			acked[name] = top.ID
			maxRetries = max(maxRetries, admin.Stats().Retries-before)
			select {
			case <-killed:
				afterKill++
			default:
			}
			done := afterKill >= 10
			mu.Unlock()
			if done {
				errc <- nil
				return
			}
		}
	}()
	testutil.Eventually(t, 30*time.Second, "10 topics before the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 10
	})
	tc.stop(leader)
	close(killed)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("creates did not resume after the leader died")
	}
	newLeader := tc.waitLeader()
	if newLeader == leader {
		t.Fatal("the dead controller is still the leader")
	}
	mu.Lock()
	defer mu.Unlock()
	v := tc.ctrls[newLeader].View()
	for name, id := range acked {
		if top := v.Topics[name]; top == nil || top.ID != id {
			t.Errorf("acknowledged topic %s (%s) lost: %+v", name, id, top)
		}
	}
	t.Logf("%d topics acknowledged, %d after the kill; most retries for one create: %d", len(acked), afterKill, maxRetries)
	if maxRetries > 3 {
		t.Errorf("a create needed %d retries", maxRetries)
	}
}

// stateOf returns a controller's state as canonical JSON.
func stateOf(t testing.TB, c *Controller) string {
	return stateJSON(t, c.fsm.State())
}

// TestRestartKeepsMetadata stops all three controllers and starts them again from their
// data dirs: topics, UUIDs, configs, broker epochs and the producer-ID counter survive.
func TestRestartKeepsMetadata(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	ctx := ctxT(t)
	b1 := tc.broker(1, "a")
	if err := b1.RegisterBroker(ctx, brokerFor(1, "a")); err != nil { // epoch 2
		t.Fatal(err)
	}
	admin := tc.client(-1, nil)
	for i := 0; i < 5; i++ {
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: fmt.Sprintf("keep-%d", i), Partitions: int32(i + 1), ReplicationFactor: -1, Configs: map[string]string{"retention.ms": fmt.Sprint(1000 * (i + 1))}}, false); err != nil {
			t.Fatal(err)
		}
	}
	lastPID, err := admin.AllocateProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b1.Close() // no heartbeats to change the state from here on, once the fence of the closed broker is in
	admin.Close()
	testutil.Eventually(t, 20*time.Second, "the closed broker fenced", func() bool {
		br, _ := tc.ctrls[leader].View().Broker(1)
		return !br.Active()
	})
	want := stateOf(t, tc.ctrls[leader])
	wantVersion := tc.ctrls[leader].View().Version
	for i, c := range tc.ctrls {
		testutil.Eventually(t, 10*time.Second, "replicas to catch up", func() bool { return c.View().Version == wantVersion })
		if got := stateOf(t, c); got != want {
			t.Fatalf("controller %d differs before the restart", i+1)
		}
	}
	if !strings.Contains(want, `"epoch":2`) {
		t.Fatalf("broker epoch 2 missing from %s", want)
	}

	tc.stopAll()
	for i := range tc.ctrls {
		tc.restart(i)
	}
	tc.waitLeader()
	for i, c := range tc.ctrls {
		testutil.Eventually(t, 20*time.Second, fmt.Sprintf("controller %d to replay its log", i+1), func() bool { return c.View().Version >= wantVersion })
		if got := stateOf(t, c); got != want {
			t.Fatalf("controller %d after restart:\n got %s\nwant %s", i+1, got, want)
		}
	}
	admin2 := tc.client(-1, nil)
	if id, err := admin2.AllocateProducerID(ctx); err != nil || id <= lastPID {
		t.Fatalf("producer id after restart %d (%v), last before %d", id, err, lastPID)
	}
}

// TestSnapshotRestore forces snapshots (low threshold, few trailing logs), restarts the
// quorum and checks the state came back through Restore.
func TestSnapshotRestore(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) {
		c.SnapshotThreshold = 8
		c.SnapshotInterval = 50 * time.Millisecond
		c.TrailingLogs = 2
	})
	leader := tc.waitLeader()
	ctx := ctxT(t)
	// A live broker to place the partitions on (a closed one is fenced within the
	// suspect timeout: its heartbeat connections close).
	b := tc.broker(1, "a")
	admin := tc.client(-1, nil)
	for i := 0; i < 30; i++ {
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: fmt.Sprintf("snap-%d", i), Partitions: 2, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()
	b.Close()
	testutil.Eventually(t, 20*time.Second, "the closed broker fenced", func() bool {
		br, _ := tc.ctrls[leader].View().Broker(1)
		return !br.Active()
	})
	want := stateOf(t, tc.ctrls[leader])
	wantVersion := tc.ctrls[leader].View().Version
	for i, c := range tc.ctrls {
		testutil.Eventually(t, 20*time.Second, fmt.Sprintf("controller %d to snapshot", i+1), func() bool {
			st := c.Status()
			return c.View().Version == wantVersion && st.LastSnapshotIndex > 0
		})
	}
	tc.stopAll()
	for i := range tc.ctrls {
		tc.restart(i)
	}
	tc.waitLeader()
	for i, c := range tc.ctrls {
		if c.fsm.restores.Load() == 0 {
			t.Fatalf("controller %d did not restore a snapshot", i+1)
		}
		testutil.Eventually(t, 20*time.Second, fmt.Sprintf("controller %d to catch up", i+1), func() bool { return c.View().Version >= wantVersion })
		if got := stateOf(t, c); got != want {
			t.Fatalf("controller %d after snapshot restore:\n got %s\nwant %s", i+1, got, want)
		}
	}
}
