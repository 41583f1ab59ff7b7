package kafka

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
)

// livePart is an in-memory partition whose appends advance the high watermark and wake
// long polls, as a real partition's do.
type livePart struct {
	fakePart
	id      byte
	mu      sync.Mutex
	batches [][]byte // batch i holds offset i
	waiters map[chan struct{}]bool
}

func (p *livePart) append() {
	p.mu.Lock()
	p.batches = append(p.batches, coldBatch(p.id, int64(len(p.batches)), 64))
	for c := range p.waiters {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

func (p *livePart) hw() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.batches))
}

func (p *livePart) Read(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for i := offset; i >= 0 && i < int64(len(p.batches)); i++ {
		if len(out)+len(p.batches[i]) > maxBytes && !(first && len(out) == 0) {
			break
		}
		out = append(out, p.batches[i]...)
	}
	return out, int64(len(p.batches)), 0, nil
}

func (p *livePart) LastStable() int64 { return p.hw() }
func (p *livePart) LogInfo() (int64, int64, int32) {
	return 0, p.hw(), 0
}
func (p *livePart) Wait(c chan struct{}) {
	p.mu.Lock()
	p.waiters[c] = true
	p.mu.Unlock()
}
func (p *livePart) Unwait(c chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, c)
	p.mu.Unlock()
}

// startSessionServer serves topic "s" of n live partitions with fetch sessions on.
func startSessionServer(t *testing.T, n int32) (*Server, *metadata.Topic, []*livePart) {
	t.Helper()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(t.TempDir(), "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "s", Partitions: n, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	parts := make([]*livePart, n)
	for i := range parts {
		parts[i] = &livePart{fakePart: fakePart{topic: "s"}, id: byte(i), waiters: map[chan struct{}]bool{}}
	}
	s, be := startServerWith(t, meta, func(c *Config) { c.FetchSessions = DefaultFetchSessionConfig() })
	be.reader = func(_ *metadata.Topic, index int32) Reader { return parts[index] }
	return s, meta.View().Topics["s"], parts
}

// sessionFetch sends a v13 fetch of session (id, epoch) naming partitions at offsets
// (partition → offset) and returns its answer and how long it took.
func sessionFetch(t *testing.T, rc *rawConn, corr int32, topic *metadata.Topic, id, epoch int32, offsets map[int32]int64, maxWait int32) (*kmsg.FetchResponse, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 13, id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 1<<20
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = topic.ID
		for p := int32(0); p < int32(len(topic.Partitions)); p++ {
			if off, ok := offsets[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	start := time.Now()
	rc.send(corr, req)
	return recvDecode(t, rc, req).(*kmsg.FetchResponse), time.Since(start)
}

// withRecords lists the partitions of resp, and those that carry records.
func withRecords(resp *kmsg.FetchResponse) (all, records []int32) {
	for _, st := range resp.Topics {
		for _, p := range st.Partitions {
			all = append(all, p.Partition)
			if len(p.RecordBatches) > 0 {
				records = append(records, p.Partition)
			}
		}
	}
	return all, records
}

// Over TCP with raw v13 requests: a full fetch creates a session; an incremental fetch
// with no changes answers no partition; one after an append answers only the partition
// with the new records; a long poll naming no partition wakes for an append to any
// partition of the session; a stale epoch and an unknown session id are refused.
func TestFetchSessionIncrementalAnswers(t *testing.T) {
	s, topic, parts := startSessionServer(t, 4)
	rc := dialRaw(t, s)
	parts[1].append()
	resp, _ := sessionFetch(t, rc, 1, topic, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}, 0)
	all, rec := withRecords(resp)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 || len(all) != 4 || !slices.Equal(rec, []int32{1}) {
		t.Fatalf("full fetch: error %d, session %d, partitions %v with records %v; want a session, 4 partitions, records in 1", resp.ErrorCode, id, all, rec)
	}
	// Partition 1 moves to offset 1; nothing new anywhere.
	resp, _ = sessionFetch(t, rc, 2, topic, id, 1, map[int32]int64{1: 1}, 0)
	if all, _ := withRecords(resp); resp.ErrorCode != 0 || resp.SessionID != id || len(all) != 0 {
		t.Fatalf("incremental fetch, nothing new: error %d, session %d, partitions %v; want none", resp.ErrorCode, resp.SessionID, all)
	}
	parts[2].append()
	resp, _ = sessionFetch(t, rc, 3, topic, id, 2, nil, 0)
	if all, rec := withRecords(resp); !slices.Equal(all, []int32{2}) || !slices.Equal(rec, []int32{2}) {
		t.Fatalf("after an append to 2: partitions %v with records %v; want only 2", all, rec)
	}
	// A long poll naming only partition 2 (its new offset) wakes for an append to 3.
	go func() {
		time.Sleep(200 * time.Millisecond) // let the fetch start waiting first
		parts[3].append()
	}()
	resp, took := sessionFetch(t, rc, 4, topic, id, 3, map[int32]int64{2: 1}, 10000)
	if all, rec := withRecords(resp); !slices.Equal(all, []int32{3}) || !slices.Equal(rec, []int32{3}) || took > 5*time.Second {
		t.Fatalf("long poll: partitions %v with records %v after %v; want 3's record well before the 10 s max wait", all, rec, took)
	}
	resp, _ = sessionFetch(t, rc, 5, topic, id, 3, nil, 0)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("stale epoch: error %d, %d topics; want INVALID_FETCH_SESSION_EPOCH and nothing else", resp.ErrorCode, len(resp.Topics))
	}
	resp, _ = sessionFetch(t, rc, 6, topic, id+1, 1, nil, 0)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
}

// Every fetch of a session checks the client's READ ACL on each of its partitions: once
// alice's Read on "other" is deleted, the next incremental fetch (naming no partition)
// answers other's partitions TOPIC_AUTHORIZATION_FAILED and still leaves out t's, which
// have nothing new; once granted again, other's partitions are answered (their high
// watermark was reset by the error) without an error.
func TestFetchSessionReauthorizes(t *testing.T) {
	e := startACLServer(t, func(c *Config) { c.FetchSessions = DefaultFetchSessionConfig() })
	admin := kadm.NewClient(e.client(t, "admin"))
	readOther := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("other").Operations(kadm.OpRead)
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead))
	e.grant(t, admin, readOther)
	alice := e.client(t, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	view := e.meta.View()
	fetch := func(id, epoch int32, topics ...string) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch, req.MaxBytes = id, epoch, 1<<20
		for _, name := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = name, view.Topics[name].ID
			for p := int32(0); p < 2; p++ {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := alice.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	// byTopic maps each answered topic's name to its partitions' error codes.
	byTopic := func(resp *kmsg.FetchResponse) map[string][]int16 {
		out := map[string][]int16{}
		for _, st := range resp.Topics {
			name := view.TopicByID(st.TopicID).Name
			for _, p := range st.Partitions {
				out[name] = append(out[name], p.ErrorCode)
			}
		}
		return out
	}
	resp := fetch(0, 0, "t", "other")
	id := resp.SessionID
	if got := byTopic(resp); id == 0 || resp.Version < 13 || !reflect.DeepEqual(got, map[string][]int16{"t": {0, 0}, "other": {0, 0}}) {
		t.Fatalf("full fetch (v%d): session %d, answers %v", resp.Version, id, got)
	}
	if got := byTopic(fetch(id, 1)); len(got) != 0 {
		t.Fatalf("idle incremental fetch answered %v", got)
	}
	if res, err := admin.DeleteACLs(ctx, readOther); err != nil || len(res) != 1 || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %+v %v", res, err)
	}
	denied := kerr.TopicAuthorizationFailed.Code
	if got := byTopic(fetch(id, 2)); !reflect.DeepEqual(got, map[string][]int16{"other": {denied, denied}}) {
		t.Fatalf("incremental fetch after Read on other was deleted: %v, want other's partitions TOPIC_AUTHORIZATION_FAILED only", got)
	}
	e.grant(t, admin, readOther)
	if got := byTopic(fetch(id, 3)); !reflect.DeepEqual(got, map[string][]int16{"other": {0, 0}}) {
		t.Fatalf("incremental fetch after Read granted again: %v, want other's partitions without error", got)
	}
}
