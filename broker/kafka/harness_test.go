package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
)

// fakeBackend serves partitions of a LocalStore's topics from memory; tests hook its
// Read and Append to observe and block them.
type fakeBackend struct {
	meta metadata.Store

	mu      sync.Mutex
	appends []string // topic/partition of each Append, in call order
	onRead  func()   // called at the start of every Read (may block)
	onApp   func()   // called at the start of every Append
	// refuse, when set, is the error Writer and Reader give a partition (nil: served).
	refuse func(t *metadata.Topic, index int32) error
	// appendErr fails every Append (after onApp).
	appendErr error
	// reader, when set, serves Reader instead of the empty fake partition; writer
	// likewise serves Writer.
	reader func(t *metadata.Topic, index int32) Reader
	writer func(t *metadata.Topic, index int32) Writer
}

func (f *fakeBackend) refusal(t *metadata.Topic, index int32) error {
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse == nil {
		return nil
	}
	return refuse(t, index)
}

func (f *fakeBackend) Writer(t *metadata.Topic, index int32, zone string) (Writer, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
	}
	if err := f.refusal(t, index); err != nil {
		return nil, err
	}
	if f.writer != nil {
		return f.writer(t, index), nil
	}
	return &fakePart{f: f, topic: t.Name}, nil
}

func (f *fakeBackend) Reader(t *metadata.Topic, index int32, epoch int32, zone string) (Reader, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
	}
	if err := f.refusal(t, index); err != nil {
		return nil, err
	}
	if f.reader != nil {
		return f.reader(t, index), nil
	}
	return &fakePart{f: f, topic: t.Name}, nil
}

func (f *fakeBackend) Refresh()                      {}
func (f *fakeBackend) Admit() (time.Duration, error) { return 0, nil }
func (f *fakeBackend) CoordinatorPartition(ctx context.Context, g string, create bool) (*metadata.Topic, int32, error) {
	return nil, 0, metadata.ErrUnknownTopic
}

type fakePart struct {
	f     *fakeBackend
	topic string
}

func (p *fakePart) Topic() string { return p.topic }
func (p *fakePart) Append(h *recbatch.Header, batch []byte, appendTime bool, done func(AppendResult)) {
	p.f.mu.Lock()
	p.f.appends = append(p.f.appends, p.topic)
	hook, err := p.f.onApp, p.f.appendErr
	p.f.mu.Unlock()
	if hook != nil {
		hook()
	}
	done(AppendResult{Base: 0, LogStart: 0, AppendTime: -1, Err: err})
}
func (p *fakePart) Offsets() (int64, int64) { return 0, 0 }
func (p *fakePart) SetLogStart(ctx context.Context, off int64) error {
	return partlog.ErrNotLeader
}
func (p *fakePart) Read(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	p.f.mu.Lock()
	hook := p.f.onRead
	p.f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return nil, 0, 0, nil
}
func (p *fakePart) LogInfo() (int64, int64, int32)                            { return 0, 0, 0 }
func (p *fakePart) Wait(c chan struct{})                                      {}
func (p *fakePart) Unwait(c chan struct{})                                    {}
func (p *fakePart) MaxTimestamp() (int64, int64)                              { return -1, -1 }
func (p *fakePart) OffsetForTime(context.Context, int64) (int64, int64, bool) { return -1, -1, false }
func (p *fakePart) EndOffsetForEpoch(e int32) (int32, int64)                  { return e, 0 }
func (p *fakePart) LastStable() int64                                         { return 0 }
func (p *fakePart) ReadCommitted(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) (CommittedRead, error) {
	data, hw, logStart, err := p.Read(ctx, offset, maxBytes, first, epoch)
	return CommittedRead{Data: data, HW: hw, LSO: hw, LogStart: logStart}, err
}

type nopOffsets struct{}

func (nopOffsets) Write(context.Context, string, group.Record) error { return nil }

type allTopics struct{}

func (allTopics) PartitionExists(string, int32) bool { return true }

// startServer serves a front end with a LocalStore holding topic "t" (2 partitions) and
// a fake backend.
func startServer(t *testing.T) (*Server, *fakeBackend) {
	t.Helper()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(t.TempDir(), "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, meta)
}

// startServerWith serves a front end with the metadata store meta and a fake backend;
// mods change the front end's configuration first.
func startServerWith(t *testing.T, meta metadata.Store, mods ...func(*Config)) (*Server, *fakeBackend) {
	t.Helper()
	return startServerDeps(t, meta, nil, mods...)
}

// startServerDeps is startServerWith whose dependencies deps (may be nil) changes
// first (a transaction coordinator, say).
func startServerDeps(t *testing.T, meta metadata.Store, deps func(*Deps), mods ...func(*Config)) (*Server, *fakeBackend) {
	t.Helper()
	be := &fakeBackend{meta: meta}
	gcfg := group.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	groups := group.New(gcfg, nopOffsets{}, allTopics{})
	t.Cleanup(groups.Close)
	cfg := Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1, BrokerConfigs: map[string]string{"broker.id": "0"}}
	for _, mod := range mods {
		mod(&cfg)
	}
	d := Deps{Meta: meta, Backend: be, Groups: groups, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if deps != nil {
		deps(&d)
	}
	s := NewServer(cfg, d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(ln)
	t.Cleanup(s.Close)
	return s, be
}

// rawConn speaks the Kafka framing by hand, so a test controls exactly what is pipelined
// on one connection.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.lns[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) send(corr int32, req kmsg.Request) {
	r.t.Helper()
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = kbin.AppendNullableString(b, nil)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one response frame within d; it returns its correlation ID and body, or an
// error (a timeout, a closed connection).
func (r *rawConn) recv(d time.Duration) (int32, []byte, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	return kafkatest.ReadResponse(r.nc)
}

// rawProduce sends batch to topic partition 0 on rc (Produce v9, acks all) with
// correlation id corr and returns the partition's error code.
func rawProduce(t *testing.T, rc *rawConn, corr int32, topic string, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	req.Topics = append(req.Topics, pt)
	rc.send(corr, req)
	return recvDecode(t, rc, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// decode parses a response body for req.
func decode(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		rd := kbin.Reader{Src: body}
		kmsg.SkipTags(&rd)
		body = rd.Src
	}
	return resp, resp.ReadFrom(body)
}

// fakeMover is a cluster metadata store that can move partitions: a metatest.Store
// with metadata.Mover's MovePartition and CancelMove. MovePartition refuses what the
// controller refuses (controller/cmd_moves.go: a target that is not an accepting broker,
// the leader itself, another pending move, a recovering partition); every call is
// recorded. Tests change the state underneath a call (onMove, onCancel run before it is
// applied) or fail it (moveErr).
type fakeMover struct {
	*metatest.Store

	mu       sync.Mutex
	calls    []string // "move t/0 to 2", "cancel t/0", in call order
	onMove   func()
	onCancel func()
	moveErr  error
}

// newFakeMover returns a store with the given active brokers and topic "t" of n
// partitions, placed round-robin (partition i led by brokers[i % len]).
func newFakeMover(t *testing.T, n int32, brokers ...int32) *fakeMover {
	t.Helper()
	f := &fakeMover{Store: metatest.NewStore(brokers...)}
	if _, err := f.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: n, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeMover) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

// Calls returns the calls so far.
func (f *fakeMover) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeMover) MovePartition(ctx context.Context, id metadata.TopicID, partition int32, target int32) error {
	t := f.View().TopicByID(id)
	if t == nil || int(partition) >= len(t.Partitions) {
		return metadata.ErrUnknownTopic
	}
	f.record(fmt.Sprintf("move %s/%d to %d", t.Name, partition, target))
	f.mu.Lock()
	hook, fail := f.onMove, f.moveErr
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if fail != nil {
		return fail
	}
	v := f.View()
	p := v.Topics[t.Name].Partitions[partition]
	b, ok := v.Broker(target)
	switch {
	case !ok || (b.State != "" && b.State != metadata.BrokerActive):
		return fmt.Errorf("%w: target broker %d is not active (or draining)", metadata.ErrMoveRefused, target)
	case p.Moving && p.MovingTo == target:
		return nil
	case p.Moving:
		return fmt.Errorf("%w: already moving to %d", metadata.ErrMoveRefused, p.MovingTo)
	case p.Leader == target:
		return fmt.Errorf("%w: broker %d already leads it", metadata.ErrMoveRefused, target)
	case p.Recovering:
		return fmt.Errorf("%w: recovering from a failover", metadata.ErrMoveRefused)
	}
	return f.BeginMove(t.Name, partition, target)
}

func (f *fakeMover) CancelMove(ctx context.Context, id metadata.TopicID, partition int32) error {
	t := f.View().TopicByID(id)
	if t == nil || int(partition) >= len(t.Partitions) {
		return metadata.ErrUnknownTopic
	}
	f.record(fmt.Sprintf("cancel %s/%d", t.Name, partition))
	f.mu.Lock()
	hook := f.onCancel
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return f.Store.CancelMove(t.Name, partition)
}
