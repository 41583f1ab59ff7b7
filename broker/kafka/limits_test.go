package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// Test-only API keys (never advertised: internal), served by handlers the tests steer.
const (
	keyTestEcho     int16 = 10001 // answers at once (a request with any body)
	keyTestBlock    int16 = 10002 // blocking: waits until testGate is closed
	keyTestPanic    int16 = 10003 // panics on the reader goroutine
	keyTestPanicBlk int16 = 10004 // blocking, panics on its own goroutine
	keyTestBadResp  int16 = 10005 // answers with a response whose encoding panics
)

var (
	testMu      sync.Mutex
	testGate    = make(chan struct{})
	testEntered atomic.Int32
)

// setTestGate installs a fresh gate for keyTestBlock and returns its release.
func setTestGate() func() {
	testMu.Lock()
	defer testMu.Unlock()
	g := make(chan struct{})
	testGate = g
	testEntered.Store(0)
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

func init() {
	newMsg := func(key int16) func() kmsg.Request { return func() kmsg.Request { return &testMsg{key: key} } }
	register(api{key: keyTestEcho, max: 0, internal: true, newReq: newMsg(keyTestEcho), handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		sl.respond(&testMsg{key: keyTestEcho})
	}})
	register(api{key: keyTestBlock, max: 0, internal: true, blocking: true, newReq: newMsg(keyTestBlock), handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		testEntered.Add(1)
		testMu.Lock()
		g := testGate
		testMu.Unlock()
		<-g
		sl.respond(&testMsg{key: keyTestBlock})
	}})
	register(api{key: keyTestPanic, max: 0, internal: true, newReq: newMsg(keyTestPanic), handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		panic("test: handler panic on the reader")
	}})
	register(api{key: keyTestPanicBlk, max: 0, internal: true, blocking: true, newReq: newMsg(keyTestPanicBlk), handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		var m map[string]int
		m["boom"]++ // a real runtime panic
	}})
	register(api{key: keyTestBadResp, max: 0, internal: true, newReq: newMsg(keyTestBadResp), handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		sl.respond(&testMsg{key: keyTestBadResp, panicOnEncode: true})
	}})
}

// testMsg is an opaque request or response of a test key.
type testMsg struct {
	key           int16
	version       int16
	body          []byte
	panicOnEncode bool
}

func (m *testMsg) Key() int16         { return m.key }
func (m *testMsg) MaxVersion() int16  { return 0 }
func (m *testMsg) SetVersion(v int16) { m.version = v }
func (m *testMsg) GetVersion() int16  { return m.version }
func (m *testMsg) IsFlexible() bool   { return false }
func (m *testMsg) AppendTo(b []byte) []byte {
	if m.panicOnEncode {
		panic("test: response encoding panic")
	}
	return append(b, m.body...)
}
func (m *testMsg) ResponseKind() kmsg.Response { return &testMsg{key: m.key} }
func (m *testMsg) RequestKind() kmsg.Request   { return &testMsg{key: m.key} }
func (m *testMsg) ReadFrom(b []byte) error     { m.body = b; return nil }

// startLimited serves a front end with cfg (MaxRequestBytes, MaxInFlight default when
// zero) over a LocalStore with topic "t" (2 partitions) and backend be (nil: fake).
func startLimited(t *testing.T, cfg Config, be Backend) *Server {
	t.Helper()
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(t.TempDir(), "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if be == nil {
		be = &fakeBackend{meta: meta}
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 1 << 20
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 16
	}
	cfg.DefaultPartitions = 1
	groups := group.New(group.DefaultConfig(), nopOffsets{}, allTopics{})
	t.Cleanup(groups.Close)
	s := NewServer(cfg, Deps{Meta: meta, Backend: be, Groups: groups, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(ln)
	t.Cleanup(s.Close)
	return s
}

// testFrame is a whole request frame of a test key with a body of n bytes.
func testFrame(key int16, corr int32, n int) []byte {
	b := make([]byte, 4, 4+10+n)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = kbin.AppendNullableString(b, nil)
	b = append(b, make([]byte, n)...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func dialFrom(t *testing.T, s *Server, local string) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	nc, err := d.Dial("tcp", s.lns[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// metricValue sums the values of a counter or gauge (all label values).
func metricValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			if d.Counter != nil {
				total += d.Counter.GetValue()
			}
			if d.Gauge != nil {
				total += d.Gauge.GetValue()
			}
		}
	}
	return total
}

// isClosed reports whether the server closed nc (EOF or reset) within 10 s.
func isClosed(nc net.Conn) bool {
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	for {
		_, err := nc.Read(b[:])
		if err == nil {
			continue // an answer written before the close
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// Clients announcing large frames cost memory only for the bytes they send: 20
// connections announcing 16 MiB each and sending one byte hold one first chunk each
// (budget and heap), not 320 MiB.
func TestAnnouncedFramesCostOnlyWhatArrives(t *testing.T) {
	const conns, announced = 20, 16 << 20
	s := startLimited(t, Config{MaxRequestBytes: 64 << 20, Limits: Limits{QueuedMaxRequestBytes: 1 << 30}}, nil)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < conns; i++ {
		nc := dialFrom(t, s, "")
		head := binary.BigEndian.AppendUint32(nil, announced)
		if _, err := nc.Write(append(head, 0)); err != nil { // the size and one byte of the body
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "every connection's first chunk", func() bool { return s.lim.budget.inUse() == conns*minBodyChunk })
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
		t.Fatalf("heap grew by %d MiB for %d connections that sent 1 byte of a %d MiB frame", grown>>20, conns, announced>>20)
	}
	t.Logf("heap growth: %d KiB for %d announced %d MiB frames", (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>10, conns, announced>>20)
}

// When the budget is used up by unanswered requests, readers stop reading (the next
// request waits, it is not refused) and go on as answers free the budget; everything
// is given back at the end.
func TestBudgetBackpressure(t *testing.T) {
	release := setTestGate()
	defer release()
	s := startLimited(t, Config{MaxRequestBytes: 256 << 10, Limits: Limits{QueuedMaxRequestBytes: 256 << 10}}, nil)
	a, b := dialFrom(t, s, ""), dialFrom(t, s, "")
	for i := int32(1); i <= 2; i++ {
		if _, err := a.Write(testFrame(keyTestBlock, i, 100<<10)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "two blocked requests", func() bool { return testEntered.Load() == 2 })
	if _, err := b.Write(testFrame(keyTestEcho, 7, 100<<10)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the third request to wait for budget", func() bool { return metricValue(s.lim.budgetWaits) >= 1 })
	b.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := b.Read(make([]byte, 1)); err == nil {
		t.Fatal("a request was answered while the budget was used up")
	}
	release()
	rc := &rawConn{t: t, nc: b}
	if corr, _, err := rc.recv(20 * time.Second); err != nil || corr != 7 {
		t.Fatalf("the waiting request: corr %d, err %v", corr, err)
	}
	ra := &rawConn{t: t, nc: a}
	for i := int32(1); i <= 2; i++ {
		if corr, _, err := ra.recv(20 * time.Second); err != nil || corr != i {
			t.Fatalf("blocked request %d: corr %d, err %v", i, corr, err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "the budget to be given back", func() bool { return s.lim.inUse() == 0 })
}

// Two large frames racing for a budget that holds only one: each holds half of the
// budget and waits for the rest. Neither may hang: one completes, the other is closed
// (its budget returned), or both complete.
func TestHalfReadFramesCannotDeadlock(t *testing.T) {
	s := startLimited(t, Config{MaxRequestBytes: 1 << 20, Limits: Limits{QueuedMaxRequestBytes: 1 << 20, BudgetWait: 300 * time.Millisecond}}, nil)
	const size = 900 << 10
	conns := []net.Conn{dialFrom(t, s, ""), dialFrom(t, s, "")}
	frames := [][]byte{testFrame(keyTestEcho, 1, size), testFrame(keyTestEcho, 2, size)}
	// Both send 600 KiB: each holds about that much (chunks doubling up to 1 MiB) and
	// wants more.
	for i, nc := range conns {
		if _, err := nc.Write(frames[i][:600<<10]); err != nil {
			t.Fatal(err)
		}
	}
	// However the two readers interleave, one of them now waits for budget the other
	// holds, and without a bound on that wait neither would ever finish.
	testutil.Eventually(t, 30*time.Second, "a frame to wait for budget", func() bool { return metricValue(s.lim.budgetWaits) >= 1 })
	for i, nc := range conns {
		go nc.Write(frames[i][600<<10:]) // may block (the reader stopped) or fail (closed)
	}
	answered := 0
	for i, nc := range conns {
		rc := &rawConn{t: t, nc: nc}
		corr, _, err := rc.recv(20 * time.Second)
		var ne net.Error
		switch {
		case err == nil && corr == int32(i+1):
			answered++
		case err != nil && errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("connection %d hangs: neither answered nor closed", i)
		case err == nil:
			t.Fatalf("connection %d: answer for %d", i, corr)
		}
	}
	if answered == 0 {
		// Both waits can end before either gives its half back when the machine is busy
		// enough to hold a reader off the CPU for the whole BudgetWait (seen once at load
		// 10): that is no hang, as long as each closing was a counted budget timeout.
		if n := metricValue(s.lim.budgetTimeouts); n != 2 {
			t.Fatalf("both connections were closed with %v budget timeouts counted, want 2 (or one completed)", n)
		}
		t.Logf("both frames timed out waiting for budget (a busy machine); neither hung")
	}
	if answered == 1 && metricValue(s.lim.budgetTimeouts) != 1 {
		t.Fatalf("one connection closed, %v budget timeouts counted", metricValue(s.lim.budgetTimeouts))
	}
	testutil.Eventually(t, 30*time.Second, "the budget to be given back", func() bool { return s.lim.inUse() == 0 })
}

// Small requests have a pool of their own: a large request holding the whole budget
// (stalled: its client stopped sending) does not hold up a small one.
func TestSmallRequestsNotHeldByLargeOnes(t *testing.T) {
	s := startLimited(t, Config{MaxRequestBytes: 1 << 20, Limits: Limits{QueuedMaxRequestBytes: 1 << 20, BudgetWait: time.Minute}}, nil)
	big := dialFrom(t, s, "")
	frame := testFrame(keyTestEcho, 1, 1<<20-14)
	if _, err := big.Write(frame[:len(frame)-1]); err != nil { // all but the last byte
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the large request to hold the budget", func() bool { return s.lim.budget.inUse() >= 1<<20-64<<10 })
	small := dialFrom(t, s, "")
	if _, err := small.Write(testFrame(keyTestEcho, 2, 100)); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := (&rawConn{t: t, nc: small}).recv(20 * time.Second); err != nil || corr != 2 {
		t.Fatalf("small request behind a stalled large one: corr %d, err %v", corr, err)
	}
	if _, err := big.Write(frame[len(frame)-1:]); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := (&rawConn{t: t, nc: big}).recv(20 * time.Second); err != nil || corr != 1 {
		t.Fatalf("the large request once complete: corr %d, err %v", corr, err)
	}
	testutil.Eventually(t, 30*time.Second, "the budget to be given back", func() bool { return s.lim.inUse() == 0 })
}

// The pipelining limit holds for blocking handlers: with MaxInFlight 4 and ten requests
// pipelined, four reach their handler and the reader waits; all are answered in order
// once they unblock.
func TestMaxInFlightHoldsForBlockingHandlers(t *testing.T) {
	release := setTestGate()
	defer release()
	s := startLimited(t, Config{MaxInFlight: 4}, nil)
	nc := dialFrom(t, s, "")
	for i := int32(1); i <= 10; i++ {
		if _, err := nc.Write(testFrame(keyTestBlock, i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "the reader to wait for a pipelining token", func() bool { return metricValue(s.lim.inFlightWaits) >= 1 })
	testutil.Eventually(t, 30*time.Second, "four handlers", func() bool { return testEntered.Load() >= 4 })
	if n := testEntered.Load(); n != 4 {
		t.Fatalf("%d requests reached their handler with max in-flight 4", n)
	}
	release()
	rc := &rawConn{t: t, nc: nc}
	for i := int32(1); i <= 10; i++ {
		if corr, _, err := rc.recv(20 * time.Second); err != nil || corr != i {
			t.Fatalf("answer %d: corr %d, err %v", i, corr, err)
		}
	}
}

// Connections over the per-address or the overall limit are closed at accept and
// counted; closing one makes room again.
func TestConnectionLimits(t *testing.T) {
	s := startLimited(t, Config{Limits: Limits{MaxConnections: 5, MaxConnectionsPerIP: 3}}, nil)
	served := func(nc net.Conn) bool {
		rc := &rawConn{t: t, nc: nc}
		if _, err := nc.Write(testFrame(keyTestEcho, 3, 1)); err != nil {
			return false
		}
		_, _, err := rc.recv(10 * time.Second)
		return err == nil
	}
	var first []net.Conn
	for i := 0; i < 3; i++ {
		nc := dialFrom(t, s, "127.0.0.1")
		if !served(nc) {
			t.Fatalf("connection %d from 127.0.0.1 refused under the limit", i)
		}
		first = append(first, nc)
	}
	if !isClosed(dialFrom(t, s, "127.0.0.1")) {
		t.Fatal("a 4th connection from one address was served (limit 3)")
	}
	for i := 0; i < 2; i++ {
		if nc := dialFrom(t, s, "127.0.0.2"); !served(nc) {
			t.Fatalf("connection %d from 127.0.0.2 refused", i)
		}
	}
	if !isClosed(dialFrom(t, s, "127.0.0.3")) {
		t.Fatal("a 6th connection was served (limit 5)")
	}
	// The refusal is counted by the accepting goroutine, which may close the
	// connection before it counts: wait for the counts, then check they stay exact.
	got := map[string]float64{}
	counted := func() bool {
		for _, r := range []string{"max_connections", "max_connections_per_ip"} {
			got[r] = metricValue(s.lim.refused.WithLabelValues(r))
		}
		return got["max_connections"] >= 1 && got["max_connections_per_ip"] >= 1
	}
	testutil.Eventually(t, 30*time.Second, "both refusals counted", counted)
	if got["max_connections"] != 1 || got["max_connections_per_ip"] != 1 {
		t.Fatalf("refusals counted: %v", got)
	}
	first[0].Close()
	testutil.Eventually(t, 30*time.Second, "a closed connection to leave the count", func() bool {
		s.lim.conns.mu.Lock()
		defer s.lim.conns.mu.Unlock()
		return s.lim.conns.total == 4
	})
	if !served(dialFrom(t, s, "127.0.0.1")) {
		t.Fatal("no room after a connection closed")
	}
}

// sizedBackend's partitions return as many bytes as they are asked for (up to 8 MiB)
// and record the largest limit asked.
type sizedBackend struct {
	*fakeBackend
	maxAsked atomic.Int64
	reads    atomic.Int32
}

func (b *sizedBackend) Reader(t *metadata.Topic, index int32, epoch int32, zone string) (Reader, error) {
	r, err := b.fakeBackend.Reader(t, index, epoch, zone)
	if err != nil {
		return nil, err
	}
	return sizedPart{Reader: r, b: b}, nil
}

type sizedPart struct {
	Reader
	b *sizedBackend
}

func (p sizedPart) Read(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	p.b.reads.Add(1)
	for {
		m := p.b.maxAsked.Load()
		if int64(maxBytes) <= m || p.b.maxAsked.CompareAndSwap(m, int64(maxBytes)) {
			break
		}
	}
	return make([]byte, min(maxBytes, 8<<20)), 1 << 40, 0, nil
}

// A fetch asking for 2 GiB overall and per partition is cut to fetch.max.bytes: no read
// is asked for more, and the answer carries no more.
func TestFetchSizesClamped(t *testing.T) {
	meta := &sizedBackend{fakeBackend: &fakeBackend{}}
	s := startLimited(t, Config{Limits: Limits{FetchMaxBytes: 64 << 10}}, meta)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes, req.MaxWaitMillis = 1<<31-1, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<31-1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	rc := dialRaw(t, s)
	rc.send(1, req)
	_, body, err := rc.recv(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := decode(req, body)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, tp := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range tp.Partitions {
			total += len(p.RecordBatches)
		}
	}
	if asked := meta.maxAsked.Load(); asked > 64<<10 {
		t.Fatalf("a partition read was asked for %d bytes (limit %d)", asked, 64<<10)
	}
	if total == 0 || total > 64<<10 {
		t.Fatalf("the answer carries %d record bytes (limit %d)", total, 64<<10)
	}
	if n := metricValue(s.lim.fetchClamped); n != 1 {
		t.Fatalf("%v clamped fetches counted", n)
	}
}

// A client that pipelines fetches and never reads makes the broker hold one unwritten
// fetch answer per connection (plus what the socket buffers took), not one per
// pipelined request; once it reads, every answer comes, in order.
func TestPipelinedFetchesHoldOneAnswer(t *testing.T) {
	be := &sizedBackend{fakeBackend: &fakeBackend{}}
	s := startLimited(t, Config{MaxInFlight: 64, Limits: Limits{FetchMaxBytes: 4 << 20}}, be)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes = 1<<31 - 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1<<31 - 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc := dialRaw(t, s)
	const n = 30
	for i := int32(1); i <= n; i++ {
		rc.send(i, req)
	}
	testutil.Eventually(t, 30*time.Second, "the reader to hold back a fetch", func() bool { return metricValue(s.lim.inFlightWaits) >= 1 })
	time.Sleep(200 * time.Millisecond) // on purpose: room for any further (wrong) reads to show
	t.Logf("%d answers computed", be.reads.Load())
	if r := be.reads.Load(); r > 8 {
		t.Fatalf("%d fetch answers of 4 MiB computed for a client that reads none", r)
	}
	for i := int32(1); i <= n; i++ {
		if corr, _, err := rc.recv(20 * time.Second); err != nil || corr != i {
			t.Fatalf("answer %d: corr %d, err %v", i, corr, err)
		}
	}
}

// A panic in a handler (on the reader, on a blocking handler's goroutine, or while its
// response is encoded) closes that connection, is counted, and the server goes on
// serving other connections.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	s := startLimited(t, Config{}, nil)
	for i, key := range []int16{keyTestPanic, keyTestPanicBlk, keyTestBadResp} {
		nc := dialFrom(t, s, "")
		if _, err := nc.Write(testFrame(key, 1, 4)); err != nil {
			t.Fatal(err)
		}
		if !isClosed(nc) {
			t.Fatalf("key %d: the connection of a panicking handler stays open", key)
		}
		testutil.Eventually(t, 30*time.Second, "the panic to be counted", func() bool { return metricValue(s.lim.panics) == float64(i+1) })
		other := dialFrom(t, s, "")
		if _, err := other.Write(testFrame(keyTestEcho, 2, 4)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := (&rawConn{t: t, nc: other}).recv(10 * time.Second); err != nil {
			t.Fatalf("after a panic of key %d the server does not answer: %v", key, err)
		}
	}
	if n := metricValue(s.lim.panics.WithLabelValues("key_10004")); n != 1 {
		t.Fatalf("panics of key 10004 counted: %v", n)
	}
}

// rateLog lets one line per period through and says how many it left out.
func TestRateLogBoundsLines(t *testing.T) {
	var out strings.Builder
	var mu sync.Mutex
	r := rateLog{log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &out}, nil)), every: time.Hour}
	for i := 0; i < 1000; i++ {
		r.Warn("refused", "i", i)
	}
	r.mu.Lock()
	r.next = time.Time{} // the period is over
	r.mu.Unlock()
	r.Warn("refused", "i", 1000)
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed_since_last=999") {
		t.Fatalf("logged %d lines: %q", len(lines), lines)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// The budget is FIFO and a timed-out waiter lets those behind it through.
func TestBudgetFIFOAndTimeout(t *testing.T) {
	b := newBudget(100, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"}))
	ctx := context.Background()
	if err := b.acquire(ctx, 80, 0); err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() { big <- b.acquire(ctx, 50, 100*time.Millisecond) }() // cannot fit while 80 are held
	testutil.Eventually(t, 30*time.Second, "the big waiter to queue", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 1 })
	small := make(chan error, 1)
	go func() { small <- b.acquire(ctx, 10, 0) }() // fits, but queues behind the big one
	testutil.Eventually(t, 30*time.Second, "the small waiter to queue", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 2 })
	if err := <-big; !errors.Is(err, errBudgetTimeout) {
		t.Fatalf("big waiter: %v", err)
	}
	if err := <-small; err != nil {
		t.Fatalf("small waiter after the big one gave up: %v", err)
	}
	if b.inUse() != 90 {
		t.Fatalf("in use %d", b.inUse())
	}
}

// A client id's bucket holds one second of its quota; beyond it the client owes, and
// the throttle is the time to pay it back (capped); buckets of idle clients are dropped
// when the map is full, and past the bound new clients share one.
func TestQuotaBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuota(1000, func() time.Time { return now })
	if d := q.record("a", 1000); d != 0 {
		t.Fatalf("within the first second's worth: throttle %v", d)
	}
	if d := q.record("a", 500); d != 500*time.Millisecond {
		t.Fatalf("500 bytes over at 1000 B/s: throttle %v, want 500ms", d)
	}
	if d := q.record("b", 1000); d != 0 {
		t.Fatalf("another client id pays for the first: throttle %v", d)
	}
	now = now.Add(500 * time.Millisecond)
	if d := q.record("a", 1); d != time.Millisecond {
		t.Fatalf("after paying back: throttle %v, want 1ms", d)
	}
	if d := q.record("z", 1e9); d != maxThrottle {
		t.Fatalf("a huge debt: throttle %v, want the cap %v", d, maxThrottle)
	}
	now = now.Add(time.Hour)
	for i := 0; i < maxQuotaClients+10; i++ {
		q.record(strconv.Itoa(i), 2000) // each over: none is idle
	}
	if n := len(q.clients); n > maxQuotaClients+1 {
		t.Fatalf("%d buckets kept (bound %d)", n, maxQuotaClients)
	}
	if _, ok := q.clients["a"]; ok {
		t.Fatal("an idle client's bucket survived the sweep")
	}
}
