package kafka

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/metricset"
)

// fakeClock is the session cache's clock, moved by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time            { return c.t }
func (c *fakeClock) add(d time.Duration)       { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock                 { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func topicID(b byte) (id [16]byte)             { id[0] = b; return id }
func sessionGauge(g prometheus.Gauge) int      { return int(testutil.ToFloat64(g)) }
func sessionCount(c prometheus.Counter) int    { return int(testutil.ToFloat64(c)) }
func kindCount(c *fetchSessions, k string) int { return sessionCount(c.requests.WithLabelValues(k)) }

func newTestSessions(slots int, clk *fakeClock) *fetchSessions {
	return newFetchSessions(FetchSessionConfig{Slots: slots, MinEviction: 2 * time.Minute}, clk.now, metricset.New(prometheus.NewRegistry()))
}

// fetchReq is a v13 fetch of session (id, epoch) naming partitions of topic ID 1 at
// offset 0, and forgetting forget.
func fetchReq(id, epoch int32, parts []int32, forget []int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 13, id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topicID(1)
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.TopicID, ft.Partitions = topicID(1), forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// sessAnswer is a response to parts, as handleFetch builds it: every partition with the
// high watermark hw[partition] (0 when absent) and no records.
func sessAnswer(parts []fetchPart, hw map[int32]int64) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 13
	for i, fp := range parts {
		if i == 0 || fp.group != parts[i-1].group {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = fp.topic, fp.id
			resp.Topics = append(resp.Topics, st)
		}
		out := kmsg.NewFetchResponseTopicPartition()
		out.Partition = fp.req.Partition
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw[fp.req.Partition], hw[fp.req.Partition], 0
		out.RecordBatches = []byte{}
		st := &resp.Topics[len(resp.Topics)-1]
		st.Partitions = append(st.Partitions, out)
	}
	return resp
}

// answered lists the partitions of resp.
func answered(resp *kmsg.FetchResponse) []int32 {
	var ps []int32
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			ps = append(ps, p.Partition)
		}
	}
	return ps
}

// sessRoundTrip runs one fetch through the cache: begin, the answer (edit changes it before
// finish), finish. It returns the parts read and the answer.
func sessRoundTrip(t *testing.T, c *fetchSessions, req *kmsg.FetchRequest, hw map[int32]int64, edit func(*kmsg.FetchResponse)) ([]fetchPart, *kmsg.FetchResponse) {
	t.Helper()
	fc, parts, err := c.begin(req)
	if err != nil {
		t.Fatalf("begin(id %d, epoch %d): %v", req.SessionID, req.SessionEpoch, err)
	}
	resp := sessAnswer(parts, hw)
	if edit != nil {
		edit(resp)
	}
	if err := c.finish(&fc, parts, resp); err != nil {
		t.Fatalf("finish: %v", err)
	}
	return parts, resp
}

// partitionsOf lists the partitions of parts.
func partitionsOf(parts []fetchPart) []int32 {
	var ps []int32
	for _, p := range parts {
		ps = append(ps, p.req.Partition)
	}
	return ps
}

func TestFetchSessionCreateIncrementForget(t *testing.T) {
	clk := newFakeClock()
	c := newTestSessions(10, clk)
	_, resp := sessRoundTrip(t, c, fetchReq(0, 0, []int32{0, 1, 2}, nil), map[int32]int64{0: 5}, nil)
	id := resp.SessionID
	if id == 0 || !slices.Equal(answered(resp), []int32{0, 1, 2}) {
		t.Fatalf("full fetch: session %d, partitions %v; want a session and all 3", id, answered(resp))
	}
	if n, p := sessionGauge(c.open), sessionGauge(c.parts); n != 1 || p != 3 {
		t.Fatalf("gauges: %d sessions, %d partitions; want 1, 3", n, p)
	}

	// Epoch 1 naming nothing: all 3 read, none changed, none answered.
	parts, resp := sessRoundTrip(t, c, fetchReq(id, 1, nil, nil), map[int32]int64{0: 5}, nil)
	if !slices.Equal(partitionsOf(parts), []int32{0, 1, 2}) || len(resp.Topics) != 0 || resp.SessionID != id {
		t.Fatalf("idle incremental: read %v, answered %v (session %d); want all read, none answered", partitionsOf(parts), answered(resp), resp.SessionID)
	}
	// Epoch 2: partition 1's high watermark moved; partition 3 added (new: answered);
	// partition 0 forgotten.
	parts, resp = sessRoundTrip(t, c, fetchReq(id, 2, []int32{3}, []int32{0}), map[int32]int64{1: 7}, nil)
	if !slices.Equal(partitionsOf(parts), []int32{1, 2, 3}) || !slices.Equal(answered(resp), []int32{1, 3}) {
		t.Fatalf("incremental: read %v, answered %v; want read [1 2 3], answered [1 3]", partitionsOf(parts), answered(resp))
	}
	if p := sessionGauge(c.parts); p != 3 {
		t.Fatalf("partitions gauge %d, want 3", p)
	}
	// The request's fetch parameters replace the session's.
	req := fetchReq(id, 3, []int32{2}, nil)
	req.Topics[0].Partitions[0].FetchOffset = 42
	parts, _ = sessRoundTrip(t, c, req, map[int32]int64{1: 7}, nil)
	if parts[1].req.Partition != 2 || parts[1].req.FetchOffset != 42 {
		t.Fatalf("partition 2 after an update: %+v, want fetch offset 42", parts[1].req)
	}
	if got := kindCount(c, "incremental"); got != 3 {
		t.Fatalf("incremental requests counted %d, want 3", got)
	}
	// Forgetting every partition closes the session: the answer is sessionless.
	_, resp = sessRoundTrip(t, c, fetchReq(id, 4, nil, []int32{1, 2, 3}), nil, nil)
	if resp.SessionID != 0 || sessionGauge(c.open) != 0 || sessionGauge(c.parts) != 0 {
		t.Fatalf("emptied session: answer session %d, gauges %d/%d; want 0, 0/0", resp.SessionID, sessionGauge(c.open), sessionGauge(c.parts))
	}
}

func TestFetchSessionErrors(t *testing.T) {
	clk := newFakeClock()
	c := newTestSessions(10, clk)
	_, resp := sessRoundTrip(t, c, fetchReq(0, 0, []int32{0}, nil), nil, nil)
	id := resp.SessionID
	if _, _, err := c.begin(fetchReq(id, 2, nil, nil)); !errors.Is(err, errFetchSessionEpoch) || kafkaCode(err) != 71 {
		t.Fatalf("wrong epoch: %v (code %d), want INVALID_FETCH_SESSION_EPOCH (71)", err, kafkaCode(err))
	}
	if _, _, err := c.begin(fetchReq(id+1, 1, nil, nil)); !errors.Is(err, errFetchSessionNotFound) || kafkaCode(err) != 70 {
		t.Fatalf("unknown id: %v (code %d), want FETCH_SESSION_ID_NOT_FOUND (70)", err, kafkaCode(err))
	}
	old := fetchReq(id, 1, nil, nil)
	old.Version = 12
	if _, _, err := c.begin(old); !errors.Is(err, errFetchSessionTopicID) || kafkaCode(err) != 106 {
		t.Fatalf("v12 fetch of a v13 session: %v (code %d), want FETCH_SESSION_TOPIC_ID_ERROR (106)", err, kafkaCode(err))
	}
	// A fetch of the session arriving while another is read: the first one's answer is
	// refused, since the session already moved on.
	fc1, parts1, err := c.begin(fetchReq(id, 1, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	fc2, parts2, err := c.begin(fetchReq(id, 2, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.finish(&fc1, parts1, sessAnswer(parts1, nil)); !errors.Is(err, errFetchSessionEpoch) {
		t.Fatalf("stale answer: %v, want errFetchSessionEpoch", err)
	}
	if err := c.finish(&fc2, parts2, sessAnswer(parts2, nil)); err != nil {
		t.Fatalf("current answer: %v", err)
	}
}

func TestFetchSessionClose(t *testing.T) {
	clk := newFakeClock()
	c := newTestSessions(10, clk)
	// (0, -1): sessionless, nothing created.
	_, resp := sessRoundTrip(t, c, fetchReq(0, finalEpoch, []int32{0}, nil), nil, nil)
	if resp.SessionID != 0 || sessionGauge(c.open) != 0 || kindCount(c, "sessionless") != 1 {
		t.Fatalf("(0, -1): session %d, %d open, sessionless %d; want none created", resp.SessionID, sessionGauge(c.open), kindCount(c, "sessionless"))
	}
	_, resp = sessRoundTrip(t, c, fetchReq(0, 0, []int32{0, 1}, nil), nil, nil)
	id := resp.SessionID
	// (id, -1) closes it and answers sessionless.
	_, resp = sessRoundTrip(t, c, fetchReq(id, finalEpoch, []int32{0}, nil), nil, nil)
	if resp.SessionID != 0 || sessionGauge(c.open) != 0 || sessionGauge(c.parts) != 0 {
		t.Fatalf("(id, -1): session %d, gauges %d/%d; want closed", resp.SessionID, sessionGauge(c.open), sessionGauge(c.parts))
	}
	if _, _, err := c.begin(fetchReq(id, 1, nil, nil)); !errors.Is(err, errFetchSessionNotFound) {
		t.Fatalf("incremental fetch of a closed session: %v, want not found", err)
	}
	// (id, 0) closes id and creates another.
	_, resp = sessRoundTrip(t, c, fetchReq(0, 0, []int32{0}, nil), nil, nil)
	first := resp.SessionID
	_, resp = sessRoundTrip(t, c, fetchReq(first, 0, []int32{0}, nil), nil, nil)
	if resp.SessionID == 0 || resp.SessionID == first || sessionGauge(c.open) != 1 {
		t.Fatalf("(id, 0): new session %d (old %d), %d open; want a new one in its place", resp.SessionID, first, sessionGauge(c.open))
	}
	// Below v7 there are no sessions.
	req := fetchReq(0, 0, []int32{0}, nil)
	req.Version = 6
	if _, resp = sessRoundTrip(t, c, req, nil, nil); resp.SessionID != 0 {
		t.Fatalf("v6 fetch got session %d", resp.SessionID)
	}
}

func TestFetchSessionEviction(t *testing.T) {
	clk := newFakeClock()
	c := newTestSessions(2, clk)
	create := func(n int) int32 {
		parts := make([]int32, n)
		for i := range parts {
			parts[i] = int32(i)
		}
		_, resp := sessRoundTrip(t, c, fetchReq(0, 0, parts, nil), nil, nil)
		return resp.SessionID
	}
	a, b := create(3), create(6)
	clk.add(time.Second)
	// Full: nothing idle for 2 minutes, nothing older than that: no session.
	if id := create(5); id != 0 || sessionGauge(c.open) != 2 {
		t.Fatalf("full cache, young sessions: got session %d (%d open), want none", id, sessionGauge(c.open))
	}
	clk.add(3 * time.Minute)
	sessRoundTrip(t, c, fetchReq(a, 1, nil, nil), nil, nil) // a used now, b idle 3 minutes
	cs := create(5)                                         // evicts b, the idle one
	if cs == 0 {
		t.Fatal("no session created though b was idle past min eviction")
	}
	if _, _, err := c.begin(fetchReq(b, 1, nil, nil)); !errors.Is(err, errFetchSessionNotFound) {
		t.Fatalf("b after eviction: %v, want not found", err)
	}
	// Nothing idle; a (3 partitions) is old enough to make room for a larger session only.
	if id := create(3); id != 0 {
		t.Fatalf("a session no larger than a evicted something (%d)", id)
	}
	if id := create(4); id == 0 {
		t.Fatal("a larger session did not evict the old smaller a")
	}
	if _, _, err := c.begin(fetchReq(a, 2, nil, nil)); !errors.Is(err, errFetchSessionNotFound) {
		t.Fatalf("a after eviction: %v, want not found", err)
	}
	if _, _, err := c.begin(fetchReq(cs, 1, nil, nil)); err != nil {
		t.Fatalf("c, created 0 s ago, was evicted: %v", err)
	}
	if got := sessionCount(c.evictions); got != 2 {
		t.Fatalf("evictions %d, want 2", got)
	}
	if n, p := sessionGauge(c.open), sessionGauge(c.parts); n != 2 || p != 9 {
		t.Fatalf("gauges %d sessions %d partitions, want 2 and 9", n, p)
	}
	// Slots 0: sessions off.
	off := newTestSessions(0, clk)
	if _, resp := sessRoundTrip(t, off, fetchReq(0, 0, []int32{0}, nil), nil, nil); resp.SessionID != 0 {
		t.Fatalf("0 slots: session %d created", resp.SessionID)
	}
}

// TestFetchSessionAnswerRules checks which partitions an incremental answer carries:
// those with records, an error (again once it clears), a preferred read replica, or a
// moved high watermark, last stable offset or log start offset; and that partitions
// that returned records go to the end of the session's order.
func TestFetchSessionAnswerRules(t *testing.T) {
	clk := newFakeClock()
	c := newTestSessions(10, clk)
	all := []int32{0, 1, 2, 3, 4, 5}
	_, resp := sessRoundTrip(t, c, fetchReq(0, 0, all, nil), nil, nil)
	id, epoch := resp.SessionID, int32(1)
	step := func(edit func(p *kmsg.FetchResponseTopicPartition)) ([]int32, []int32) {
		t.Helper()
		parts, resp := sessRoundTrip(t, c, fetchReq(id, epoch, nil, nil), nil, func(r *kmsg.FetchResponse) {
			for i := range r.Topics[0].Partitions {
				edit(&r.Topics[0].Partitions[i])
			}
		})
		epoch++
		return partitionsOf(parts), answered(resp)
	}
	_, got := step(func(p *kmsg.FetchResponseTopicPartition) {
		switch p.Partition {
		case 0:
			p.RecordBatches = []byte{1}
		case 1:
			p.ErrorCode = 6
		case 2:
			p.PreferredReadReplica = 3
		case 3:
			p.LastStableOffset = -5 // differs from the 0 last answered
		case 4:
			p.LogStartOffset = 9
		}
	})
	if !slices.Equal(got, []int32{0, 1, 2, 3, 4}) {
		t.Fatalf("answered %v, want [0 1 2 3 4] (5 unchanged)", got)
	}
	// Every partition back to the plain answer: 1 is answered again (the error cleared:
	// its cached high watermark was reset), 3 and 4 too (last stable offset and log
	// start moved back); 0 and 2 not (no records, no replica, offsets as last answered).
	read, got := step(func(p *kmsg.FetchResponseTopicPartition) {})
	if !slices.Equal(got, []int32{1, 3, 4}) {
		t.Fatalf("after changes: answered %v, want [1 3 4]", got)
	}
	if !slices.Equal(read, []int32{1, 2, 3, 4, 5, 0}) {
		t.Fatalf("session order %v: partition 0, which returned records, should be last", read)
	}
	if _, got = step(func(p *kmsg.FetchResponseTopicPartition) {}); len(got) != 0 {
		t.Fatalf("nothing changed, answered %v", got)
	}
}

func TestNextEpoch(t *testing.T) {
	for _, c := range []struct{ in, want int32 }{{0, 1}, {1, 2}, {math.MaxInt32, 1}, {-1, -1}, {-7, -1}} {
		if got := nextEpoch(c.in); got != c.want {
			t.Errorf("nextEpoch(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
