package kafka

import (
	"context"
	"encoding/binary"
	"errors"
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
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// fakeBackend serves partitions of a LocalStore's topics from memory; tests hook its
// Read and Append to observe and block them.
type fakeBackend struct {
	meta metadata.Store

	mu      sync.Mutex
	appends []string // topic/partition of each Append, in call order
	onRead  func()   // called at the start of every Read (may block)
	onApp   func()   // called at the start of every Append
}

func (f *fakeBackend) Writer(t *metadata.Topic, index int32) (Writer, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
	}
	return &fakePart{f: f, topic: t.Name}, nil
}

func (f *fakeBackend) Reader(t *metadata.Topic, index int32, epoch int32) (Reader, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, metadata.ErrUnknownTopic
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
	hook := p.f.onApp
	p.f.mu.Unlock()
	if hook != nil {
		hook()
	}
	done(AppendResult{Base: 0, LogStart: 0, AppendTime: -1})
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

type nopOffsets struct{}

func (nopOffsets) CommitOffsets(context.Context, string, []group.Offset) error { return nil }

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
	be := &fakeBackend{meta: meta}
	gcfg := group.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	groups := group.New(gcfg, nopOffsets{}, allTopics{})
	t.Cleanup(groups.Close)
	s := NewServer(Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1, BrokerConfigs: map[string]string{"broker.id": "0"}},
		Deps{Meta: meta, Backend: be, Groups: groups, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	nc, err := net.Dial("tcp", s.ln.Addr().String())
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
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, body); err != nil {
		return 0, nil, err
	}
	if len(body) < 4 {
		return 0, nil, errors.New("short response")
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
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
