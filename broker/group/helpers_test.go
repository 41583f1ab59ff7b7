package group

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---- fake clock -------------------------------------------------------------

type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	when  time.Time
	seq   int
	f     func()
	done  bool // stopped or fired
	fired bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves time forward by d, running due timers in order (each one
// outside the clock's lock, on the calling goroutine).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.done {
				continue
			}
			live = append(live, t)
			if !t.when.After(target) && (next == nil || t.when.Before(next.when) || (t.when.Equal(next.when) && t.seq < next.seq)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			break
		}
		next.done, next.fired = true, true
		if next.when.After(c.now) {
			c.now = next.when
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// pendingTimers counts timers that have neither fired nor been stopped.
func (c *fakeClock) pendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// ---- in-memory store ----------------------------------------------------------

type storeCall struct {
	group   string
	offsets []Offset
	rec     Record
}

type memStore struct {
	mu    sync.Mutex
	calls []storeCall
	err   error         // returned (and nothing recorded) when set
	gate  chan struct{} // if not nil, CommitOffsets waits for it to be closed
	inFly chan struct{} // if not nil, signalled when a call starts
}

func (s *memStore) Write(ctx context.Context, group string, rec Record) error {
	offsets := rec.Offsets
	s.mu.Lock()
	gate, inFly := s.gate, s.inFly
	s.mu.Unlock()
	if inFly != nil {
		inFly <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.calls = append(s.calls, storeCall{group, append([]Offset(nil), offsets...), rec})
	return nil
}

func (s *memStore) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *memStore) snapshot() []storeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storeCall(nil), s.calls...)
}

// latest replays the store log like the broker would at start.
func (s *memStore) latest(group string) map[string]map[int32]Offset {
	st := &loadState{}
	for _, c := range s.snapshot() {
		if c.group == group {
			st.apply(c.rec)
		}
	}
	if st.offsets == nil {
		return map[string]map[int32]Offset{}
	}
	return st.offsets
}

// replay feeds Load every record written so far, in order.
func (s *memStore) replay(apply func(string, Record)) error {
	for _, c := range s.snapshot() {
		apply(c.group, c.rec)
	}
	return nil
}

// ---- topics -------------------------------------------------------------------

type fakeTopics map[string]int32 // topic -> partition count

func (f fakeTopics) PartitionExists(topic string, partition int32) bool {
	n, ok := f[topic]
	return ok && partition >= 0 && partition < n
}

// ---- harness ------------------------------------------------------------------

const waitTimeout = 10 * time.Second

type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	store *memStore
}

func newHarness(t *testing.T, mod ...func(*Config)) *harness {
	t.Helper()
	clock := newFakeClock()
	cfg := DefaultConfig()
	cfg.Clock = clock
	cfg.InitialRebalanceDelay = 0
	for _, f := range mod {
		f(&cfg)
	}
	store := &memStore{}
	topics := fakeTopics{"t1": 4, "t2": 4, "t3": 1}
	h := &harness{t: t, c: New(cfg, store, topics), clock: clock, store: store}
	t.Cleanup(h.c.Close)
	return h
}

// send calls Handle and returns a channel that receives the response. It
// fails the test if respond is called twice or with another version.
func (h *harness) send(req kmsg.Request) <-chan kmsg.Response {
	return h.sendCtx(context.Background(), req)
}

func (h *harness) sendCtx(ctx context.Context, req kmsg.Request) <-chan kmsg.Response {
	ch := make(chan kmsg.Response, 2)
	var once sync.Once
	called := false
	var mu sync.Mutex
	h.c.Handle(WithClientInfo(ctx, "client", "/127.0.0.1"), req, func(resp kmsg.Response) {
		mu.Lock()
		defer mu.Unlock()
		if called {
			h.t.Errorf("respond called twice for %T", req)
			return
		}
		called = true
		if resp.Key() != req.Key() || resp.GetVersion() != req.GetVersion() {
			h.t.Errorf("response key/version %d/%d for request %d/%d", resp.Key(), resp.GetVersion(), req.Key(), req.GetVersion())
		}
		once.Do(func() { ch <- resp })
	})
	return ch
}

func (h *harness) wait(ch <-chan kmsg.Response) kmsg.Response {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		h.t.Fatalf("no response within %v", waitTimeout)
		return nil
	}
}

func (h *harness) do(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	return h.wait(h.send(req))
}

func noResponse(t *testing.T, ch <-chan kmsg.Response) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("unexpected response %+v", r)
	default:
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error code %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(wantCode))
	}
}

// ---- request builders -----------------------------------------------------------

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

type tmember struct {
	h        *harness
	group    string
	id       string
	instance *string
	gen      int32
	version  int16
	ptype    string
	protos   []string
	topics   []string
	session  int32
	rebal    int32
}

func (h *harness) member(group string, protos ...string) *tmember {
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	return &tmember{h: h, group: group, version: 9, ptype: "consumer", protos: protos, topics: []string{"t1"}, session: 10000, rebal: 20000}
}

func (m *tmember) static(instance string) *tmember {
	m.instance = &instance
	return m
}

func (m *tmember) joinReq() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = m.version
	r.Group = m.group
	r.MemberID = m.id
	r.InstanceID = m.instance
	r.SessionTimeoutMillis = m.session
	r.RebalanceTimeoutMillis = m.rebal
	r.ProtocolType = m.ptype
	for _, p := range m.protos {
		rp := kmsg.NewJoinGroupRequestProtocol()
		rp.Name = p
		rp.Metadata = consumerMeta(m.topics...)
		r.Protocols = append(r.Protocols, rp)
	}
	return r
}

// join sends JoinGroup, transparently handling MEMBER_ID_REQUIRED, and
// returns the channel of the (possibly parked) join.
func (m *tmember) join() <-chan kmsg.Response {
	m.h.t.Helper()
	ch := m.h.send(m.joinReq())
	if m.id == "" && m.instance == nil && m.version >= 4 {
		resp := m.h.wait(ch).(*kmsg.JoinGroupResponse)
		wantCode(m.h.t, "first join", resp.ErrorCode, kerr.MemberIDRequired)
		if resp.MemberID == "" {
			m.h.t.Fatal("MEMBER_ID_REQUIRED without member id")
		}
		m.id = resp.MemberID
		ch = m.h.send(m.joinReq())
	}
	return ch
}

// joined records the member ID and generation of a successful join response.
func (m *tmember) joined(ch <-chan kmsg.Response) *kmsg.JoinGroupResponse {
	m.h.t.Helper()
	resp := m.h.wait(ch).(*kmsg.JoinGroupResponse)
	wantCode(m.h.t, "join", resp.ErrorCode, nil)
	m.id = resp.MemberID
	m.gen = resp.Generation
	return resp
}

func (m *tmember) syncReq(assign map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group = m.group
	r.Generation = m.gen
	r.MemberID = m.id
	r.InstanceID = m.instance
	for id, a := range assign {
		ra := kmsg.NewSyncGroupRequestGroupAssignment()
		ra.MemberID = id
		ra.MemberAssignment = a
		r.GroupAssignment = append(r.GroupAssignment, ra)
	}
	return r
}

func (m *tmember) sync(assign map[string][]byte) <-chan kmsg.Response {
	return m.h.send(m.syncReq(assign))
}

func (m *tmember) heartbeat() int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group = m.group
	r.Generation = m.gen
	r.MemberID = m.id
	r.InstanceID = m.instance
	return m.h.do(r).(*kmsg.HeartbeatResponse).ErrorCode
}

func (m *tmember) leave() *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 5
	r.Group = m.group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	lm.InstanceID = m.instance
	r.Members = append(r.Members, lm)
	return m.h.do(r).(*kmsg.LeaveGroupResponse)
}

func (m *tmember) commitReq(version int16, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	return commitReq(version, m.group, m.gen, m.id, topic, partition, offset)
}

func commitReq(version int16, group string, gen int32, memberID, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = version
	r.Group = group
	r.Generation = gen
	r.MemberID = memberID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition = partition
	rp.Offset = offset
	rp.LeaderEpoch = 7
	rp.Metadata = kmsg.StringPtr("meta")
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func commitCode(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	r := resp.(*kmsg.OffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("unexpected commit response shape: %+v", r)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// fetch returns the committed offset of group/topic/partition via OffsetFetch v7.
func (h *harness) fetch(group, topic string, partition int32) kmsg.OffsetFetchResponseTopicPartition {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	r.Topics = append(r.Topics, rt)
	resp := h.do(r).(*kmsg.OffsetFetchResponse)
	wantCode(h.t, "fetch", resp.ErrorCode, nil)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		h.t.Fatalf("unexpected fetch response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func (h *harness) describe(version int16, groups ...string) *kmsg.DescribeGroupsResponse {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = version
	r.Groups = groups
	return h.do(r).(*kmsg.DescribeGroupsResponse)
}

func (h *harness) state(group string) string {
	h.t.Helper()
	return h.describe(5, group).Groups[0].State
}

// stableGroup forms a Stable group of the given members: all join, the
// first becomes leader and assigns "a-<member id>" to everybody.
func (h *harness) stableGroup(ms ...*tmember) {
	h.t.Helper()
	chs := make([]<-chan kmsg.Response, len(ms))
	for i, m := range ms {
		chs[i] = m.join()
	}
	h.clock.Advance(2 * h.c.cfg.InitialRebalanceDelay) // delay, extended once by the newcomers
	var leader *tmember
	for i, m := range ms {
		resp := m.joined(chs[i])
		if resp.LeaderID == m.id {
			leader = m
		}
	}
	if leader == nil {
		h.t.Fatal("no leader elected")
	}
	syncs := make([]<-chan kmsg.Response, len(ms))
	for i, m := range ms {
		if m != leader {
			syncs[i] = m.sync(nil)
		}
	}
	assign := make(map[string][]byte)
	for _, m := range ms {
		assign[m.id] = []byte("a-" + m.id)
	}
	for i, m := range ms {
		if m == leader {
			syncs[i] = m.sync(assign)
		}
	}
	for i, m := range ms {
		resp := h.wait(syncs[i]).(*kmsg.SyncGroupResponse)
		wantCode(h.t, "sync", resp.ErrorCode, nil)
		if string(resp.MemberAssignment) != "a-"+m.id {
			h.t.Fatalf("member %s got assignment %q", m.id, resp.MemberAssignment)
		}
	}
}
