package group

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// takeover is a second coordinator on the same store and clock: the broker that gains the
// group's partition. It loads every group from the store.
func (h *harness) takeover() *harness {
	h.t.Helper()
	cfg := h.c.cfg
	h2 := &harness{t: h.t, c: New(cfg, h.store, h.c.topics), clock: h.clock, store: h.store}
	h.t.Cleanup(h2.c.Close)
	if _, err := h2.c.Load(func(string) bool { return true }, h.store.replay); err != nil {
		h.t.Fatal(err)
	}
	return h2
}

func all(string) bool { return true }

// A coordinator that takes a Stable group over resumes it: same generation, members,
// leader and assignments; heartbeats, syncs and commits of the members go on without a
// rebalance, and the offsets are there.
func TestLoadResumesStableGroupWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, "t1", 0, 42))), nil)

	h2 := h.takeover()
	h.c.Unload(all)
	for _, m := range []*tmember{a, b} {
		m.h = h2
		wantCode(t, "heartbeat at the new coordinator", m.heartbeat(), nil)
		resp := h2.do(m.syncReq(nil)).(*kmsg.SyncGroupResponse)
		wantCode(t, "sync", resp.ErrorCode, nil)
		if string(resp.MemberAssignment) != "a-"+m.id {
			t.Fatalf("member %s: assignment %q after the takeover", m.id, resp.MemberAssignment)
		}
	}
	if st := h2.state("g"); st != "Stable" {
		t.Fatalf("state %s after the takeover", st)
	}
	if got := h2.fetch("g", "t1", 0); got.Offset != 42 {
		t.Fatalf("offset %d after the takeover", got.Offset)
	}
	wantCode(t, "commit at the new coordinator", commitCode(t, h2.do(b.commitReq(8, "t1", 1, 7))), nil)
	d := h2.describe(5, "g").Groups[0]
	if len(d.Members) != 2 {
		t.Fatalf("members after the takeover: %+v", d.Members)
	}
	// Members that stop heartbeating are expired by the new coordinator's timers.
	h2.clock.Advance(11 * time.Second)
	if st := h2.state("g"); st == "Stable" {
		t.Fatalf("members without heartbeats kept the group Stable")
	}
}

// The state a coordinator serves after regaining a group comes from the log: a member of
// its earlier tenure (a zombie) is refused, and a static member that rejoined at the
// other coordinator is accepted (not FENCED_INSTANCE_ID).
func TestLoadReplacesStaleState(t *testing.T) {
	h := newHarness(t)
	zombie := h.member("g")
	h.stableGroup(zombie)
	wantCode(t, "commit", commitCode(t, h.do(zombie.commitReq(8, "t1", 0, 200))), nil)
	st := h.member("s").static("inst-1")
	h.stableGroup(st)
	oldID := st.id

	// The partition moves away: another coordinator serves the groups meanwhile.
	h.c.Unload(all)
	h2 := h.takeover()
	fresh := h2.member("g")
	fresh.h = h2
	// The zombie's session lapses at h2, a new member takes the group over.
	h2.clock.Advance(11 * time.Second)
	h2.stableGroup(fresh)
	wantCode(t, "commit", commitCode(t, h2.do(fresh.commitReq(8, "t1", 0, 300))), nil)
	st.h, st.id = h2, ""
	h2.stableGroup(st) // the static member rejoins without its member ID: replaced
	if st.id == oldID {
		t.Fatal("static member kept its ID")
	}

	// And moves back.
	h2.c.Unload(all)
	if _, err := h.c.Load(all, h.store.replay); err != nil {
		t.Fatal(err)
	}
	zombie.h, st.h = h, h
	wantCode(t, "zombie commit", commitCode(t, h.do(zombie.commitReq(8, "t1", 0, 150))), kerr.UnknownMemberID)
	if got := h.fetch("g", "t1", 0); got.Offset != 300 {
		t.Fatalf("offset %d, want 300", got.Offset)
	}
	wantCode(t, "static member heartbeat", st.heartbeat(), nil)
}

// Unload answers parked JoinGroup and SyncGroup requests NOT_COORDINATOR at once, and
// the group's timers stop.
func TestUnloadReleasesParkedRequests(t *testing.T) {
	h := newHarness(t)
	a, b := h.member("g"), h.member("g")
	h.stableGroup(a, b)
	// b rejoins (a metadata change): a rebalance waits for a.
	b.topics = []string{"t1", "t2"}
	bj := b.join()
	noResponse(t, bj)
	// c parks a SyncGroup in another group.
	c1, c2 := h.member("h"), h.member("h")
	j1, j2 := c1.join(), c2.join()
	h.clock.Advance(2 * h.c.cfg.InitialRebalanceDelay)
	c1.joined(j1)
	c2.joined(j2)
	c2sync := c2.sync(nil)
	noResponse(t, c2sync)

	if n := h.c.Unload(all); n != 2 {
		t.Fatalf("unloaded %d groups", n)
	}
	wantCode(t, "parked join", h.wait(bj).(*kmsg.JoinGroupResponse).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "parked sync", h.wait(c2sync).(*kmsg.SyncGroupResponse).ErrorCode, kerr.NotCoordinator)
	if n := h.clock.pendingTimers(); n != 0 {
		t.Fatalf("%d timers still pending after Unload", n)
	}
	if h.c.lookup("g") != nil || h.c.lookup("h") != nil {
		t.Fatal("groups still held after Unload")
	}
}

// A generation's assignment reaches no member before it is durable; when the write fails,
// the members get the error and the group rebalances.
func TestSyncAssignmentWrittenFirst(t *testing.T) {
	h := newHarness(t)
	a := h.member("g")
	h.stableGroup(a)
	last := h.store.snapshot()[len(h.store.snapshot())-1]
	if last.rec.Meta == nil || last.rec.Meta.Generation != a.gen || len(last.rec.Meta.Members) != 1 ||
		string(last.rec.Meta.Members[0].Assignment) != "a-"+a.id {
		t.Fatalf("last record %+v is not the generation's membership", last.rec)
	}

	h.store.setErr(kerr.NotLeaderForPartition)
	a.topics = []string{"t2"}
	a.joined(a.join())
	resp := h.do(a.syncReq(map[string][]byte{a.id: []byte("x")})).(*kmsg.SyncGroupResponse)
	wantCode(t, "sync with a failing store", resp.ErrorCode, kerr.NotCoordinator)
	if st := h.state("g"); st != "PreparingRebalance" {
		t.Fatalf("state %s after a failed assignment write", st)
	}
}

// A static member replaced without a rebalance is answered only once its new ID is
// durable, so a coordinator taking over knows it.
func TestStaticReplacementDurable(t *testing.T) {
	h := newHarness(t)
	s := h.member("g").static("i")
	h.stableGroup(s)
	s.id = ""
	s.joined(s.join()) // replaced in Stable: no rebalance
	h2 := h.takeover()
	s.h = h2
	wantCode(t, "replaced static member at the new coordinator", s.heartbeat(), nil)
}

// A member's commit restarts its session, as a heartbeat does.
func TestCommitRefreshesSession(t *testing.T) {
	h := newHarness(t)
	a := h.member("g")
	h.stableGroup(a)
	for i := 0; i < 5; i++ {
		h.clock.Advance(6 * time.Second) // session 10 s
		wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, "t1", 0, int64(i)))), nil)
	}
	wantCode(t, "heartbeat after 30 s of commits only", a.heartbeat(), nil)
}

// Compact writes each group's whole state; replaying only what follows the point where it
// started gives the same groups as replaying everything.
func TestCompactSupersedesOlderRecords(t *testing.T) {
	h := newHarness(t)
	a := h.member("g")
	h.stableGroup(a)
	for i := 0; i < 20; i++ {
		wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, "t1", int32(i%4), int64(i)))), nil)
	}
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t2", 1, 9))), nil)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "gone", -1, "", "t2", 0, 1))), nil)
	if code := deleteGroups(h, 2, "gone").Groups[0].ErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	cut := len(h.store.snapshot())
	n, err := h.c.Compact(context.Background(), all)
	if err != nil || n != 2 {
		t.Fatalf("compacted %d groups: %v", n, err)
	}
	h2 := loadFrom(t, h, h.store.snapshot()[cut:])
	for p := int32(0); p < 4; p++ {
		if got, want := h2.fetch("g", "t1", p).Offset, h.fetch("g", "t1", p).Offset; got != want {
			t.Fatalf("t1/%d: %d after compaction, %d before", p, got, want)
		}
	}
	if got := h2.fetch("simple", "t2", 1).Offset; got != 9 {
		t.Fatalf("simple group's offset %d after compaction", got)
	}
	if got := h2.fetch("gone", "t2", 0).Offset; got != -1 {
		t.Fatalf("deleted group's offset %d after compaction", got)
	}
	a.h = h2
	wantCode(t, "heartbeat after compaction", a.heartbeat(), nil)
}

// A Full record is computed after every earlier write of its group is applied, so a
// commit in flight when Compact starts is in it. In a synctest bubble, synctest.Wait
// returns once the commit waits in the store and Compact waits behind it.
func TestCompactOrdersAfterInFlightWrites(t *testing.T) {
	synctest.Test(t, testCompactOrdersAfterInFlightWrites)
}

func testCompactOrdersAfterInFlightWrites(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	h.store.mu.Lock()
	h.store.gate = gate
	h.store.mu.Unlock()
	commit := h.send(commitReq(8, "simple", -1, "", "t1", 0, 5))
	var wg sync.WaitGroup
	wg.Add(1)
	var cerr error
	go func() {
		defer wg.Done()
		_, cerr = h.c.Compact(context.Background(), all)
	}()
	synctest.Wait()
	if got := h.store.snapshot(); len(got) != 0 {
		t.Fatalf("store written before the gate opened: %+v", got)
	}
	close(gate)
	wantCode(t, "commit", commitCode(t, h.wait(commit)), nil)
	wg.Wait()
	if cerr != nil {
		t.Fatal(cerr)
	}
	calls := h.store.snapshot()
	last := calls[len(calls)-1]
	if !last.rec.Full || len(last.rec.Offsets) != 1 || last.rec.Offsets[0].Offset != 5 {
		t.Fatalf("last record %+v: want a Full record with the commit", last.rec)
	}
}

// idTopics is a Topics with IDs that tests can change.
type idTopics struct {
	mu  sync.Mutex
	ids map[string]string
}

func (f *idTopics) PartitionExists(topic string, partition int32) bool {
	_, ok := f.TopicID(topic)
	return ok && partition >= 0 && partition < 4
}

func (f *idTopics) TopicID(topic string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.ids[topic]
	return id, ok
}

func (f *idTopics) set(topic, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == "" {
		delete(f.ids, topic)
	} else {
		f.ids[topic] = id
	}
}

func newIDHarness(t *testing.T, retention time.Duration) (*harness, *idTopics) {
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Clock = clock
	cfg.InitialRebalanceDelay = 0
	cfg.OffsetsRetention = retention
	topics := &idTopics{ids: map[string]string{"t1": "id-1", "t2": "id-2"}}
	store := &memStore{}
	h := &harness{t: t, c: New(cfg, store, topics), clock: clock, store: store}
	t.Cleanup(h.c.Close)
	return h, topics
}

// An offset of a deleted topic, or of an earlier topic of the same name, is not served,
// and the next expiry round deletes it durably.
func TestOffsetsOfDeletedTopic(t *testing.T) {
	h, topics := newIDHarness(t, 0)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 100))), nil)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "g", -1, "", "t2", 0, 5))), nil)
	topics.set("t1", "id-1b") // deleted and created again
	if got := h.fetch("g", "t1", 0); got.Offset != -1 {
		t.Fatalf("offset %d of the earlier t1 served", got.Offset)
	}
	if n := h.c.Expire(context.Background()); n != 1 {
		t.Fatalf("expired %d offsets, want 1", n)
	}
	if got := h.store.latest("g"); len(got["t1"]) != 0 || got["t2"][0].Offset != 5 {
		t.Fatalf("store after expiry: %+v", got)
	}
	wantCode(t, "commit to the new t1", commitCode(t, h.do(commitReq(8, "g", -1, "", "t1", 0, 3))), nil)
	if got := h.fetch("g", "t1", 0); got.Offset != 3 {
		t.Fatalf("offset %d of the new t1", got.Offset)
	}
}

// Offsets expire OffsetsRetention after their group became Empty (after the commit, for a
// group that never had members); an Empty group left without offsets is deleted.
func TestOffsetsExpire(t *testing.T) {
	h, _ := newIDHarness(t, time.Hour)
	wantCode(t, "commit", commitCode(t, h.do(commitReq(8, "simple", -1, "", "t1", 0, 1))), nil)
	a := h.member("g")
	h.stableGroup(a)
	wantCode(t, "commit", commitCode(t, h.do(a.commitReq(8, "t1", 0, 10))), nil)
	for i := 0; i < 600; i++ { // 50 minutes of a live member
		h.clock.Advance(5 * time.Second)
		wantCode(t, "heartbeat", a.heartbeat(), nil)
	}
	wantCode(t, "leave", a.leave().Members[0].ErrorCode, nil) // Empty from now
	if n := h.c.Expire(context.Background()); n != 0 {
		t.Fatalf("expired %d offsets before the retention", n)
	}
	h.clock.Advance(20 * time.Minute) // simple: 70 min after its commit; g: 20 min empty
	if n := h.c.Expire(context.Background()); n != 1 {
		t.Fatalf("expired %d offsets, want the simple group's one", n)
	}
	if h.c.lookup("simple") != nil {
		t.Fatal("empty simple group kept")
	}
	if got := h.fetch("g", "t1", 0); got.Offset != 10 {
		t.Fatalf("offset %d of g expired early", got.Offset)
	}
	h.clock.Advance(41 * time.Minute)
	if n := h.c.Expire(context.Background()); n != 1 {
		t.Fatalf("expired %d offsets, want g's one", n)
	}
	// A coordinator loading the log sees neither.
	h2 := h.takeover()
	if h2.c.lookup("simple") != nil || h2.c.lookup("g") != nil {
		t.Fatal("expired groups came back from the log")
	}
}

func TestRecordEncoding(t *testing.T) {
	inst := "i"
	now := time.UnixMilli(1_700_000_000_123).UTC()
	rec := Record{Full: true,
		Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 2, LeaderEpoch: 4, Metadata: "m", CommitTime: now, TopicID: "x"},
			{Topic: "u", Partition: -1, Offset: -1, LeaderEpoch: -1, Delete: true}, {Topic: "t", Partition: 3, Offset: 1 << 40, TopicID: "x"}},
		Meta: &Meta{Generation: 3, ProtocolType: "consumer", Protocol: "range", Leader: "m", Time: now,
			Members: []MemberMeta{{ID: "m", InstanceID: &inst, ClientID: "c", ClientHost: "/h", SessionTimeout: time.Second, RebalanceTimeout: time.Minute,
				Protocols: []ProtocolMeta{{Name: "range", Metadata: []byte{9}}, {Name: "sticky"}}, Assignment: []byte{1, 2}}, {ID: "n", Assignment: []byte{}}}}}
	b, err := EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("binary round trip:\n got %+v\nwant %+v", got, rec)
	}
	for cut := 0; cut < len(b); cut++ {
		if _, err := DecodeRecord(b[:cut]); cut > 0 && !errors.Is(err, ErrRecord) {
			t.Fatalf("record cut at %d of %d: %v", cut, len(b), err)
		}
	}
	if _, err := DecodeRecord(append(append([]byte{}, b...), 0)); !errors.Is(err, ErrRecord) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := DecodeRecord([]byte{0, 'W', 'G', 3, 0, 0, 0}); !errors.Is(err, ErrRecord) {
		t.Fatalf("unknown binary version: %v", err)
	}
	// What brokers wrote before: JSON version 1, and bare offset arrays.
	j, err := encodeJSON(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Meta.Members[1].Assignment = nil // JSON's omitempty does not tell empty from absent
	if got, err := DecodeRecord(j); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("JSON round trip: %+v %v", got, err)
	}
	legacy, err := DecodeRecord([]byte(`[{"Topic":"t","Partition":0,"Offset":5}]`))
	if err != nil || len(legacy.Offsets) != 1 || legacy.Offsets[0].Offset != 5 {
		t.Fatalf("legacy: %+v %v", legacy, err)
	}
	if _, err := DecodeRecord([]byte(`{"v":2}`)); !errors.Is(err, ErrRecord) {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := DecodeRecord([]byte(`{"v":1,"offsets":7}`)); !errors.Is(err, ErrRecord) {
		t.Fatalf("bad record: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`[{"Topic":"t","Partition":0,"Offset":5}]`))
	f.Add([]byte(`{"v":1,"meta":{"generation":1,"members":[{"id":"a"}]},"offsets":[{"Topic":"t"}]}`))
	f.Add([]byte(`{"v":1,"full":true}`))
	inst := "i"
	b, _ := EncodeRecord(Record{Full: true, Offsets: []Offset{{Topic: "t", Partition: 1, Offset: 2, TopicID: "x", Delete: true}},
		Meta: &Meta{Generation: 3, Members: []MemberMeta{{ID: "m", InstanceID: &inst, Protocols: []ProtocolMeta{{Name: "r"}}, Assignment: []byte{1}}}}})
	f.Add(b)
	// A mixed consumer group (consumer record version 2: a classic member's section).
	b, _ = EncodeRecord(Record{Consumer: &ConsumerMeta{Epoch: 4, AssignmentEpoch: 4, Members: []ConsumerMemberMeta{
		{ID: "k", Epoch: 4, Assigned: []TopicParts{{"t", []int32{0}}}},
		{ID: "c", InstanceID: &inst, Epoch: 3, Target: []TopicParts{{"t", []int32{1}}},
			Classic: &ClassicMemberMeta{SessionTimeout: 45 * time.Second, Protocols: []ProtocolMeta{{Name: "range", Metadata: []byte{0, 1}}}}},
	}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			return
		}
		var s loadState
		s.apply(rec) // must not panic
		again, err := EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record undecodable: %v", err)
		}
		// The binary form keeps everything but sub-millisecond times.
		if b[0] == 0 && !reflect.DeepEqual(back, rec) {
			t.Fatalf("binary record changed by a round trip:\n%+v\n%+v", rec, back)
		}
	})
}

// encodeJSON is the version 1 form brokers wrote before the binary one: what
// DecodeRecord must still read.
func encodeJSON(rec Record) ([]byte, error) {
	return json.Marshal(versioned{V: recordVersion, Record: rec})
}
