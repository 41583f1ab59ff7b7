package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/metadata"
)

// testBroker runs one broker on a loopback port with its data in dir.
type testBroker struct {
	*Broker
	dir  string
	meta *metadata.LocalStore
	reg  *prometheus.Registry
}

func startBroker(t testing.TB, dir string, mod func(*Config)) *testBroker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.WAL.SegmentSize = 8 << 20
	cfg.Group.InitialRebalanceDelay = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Logger = discardLogger()
	if mod != nil {
		mod(&cfg)
	}
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: cfg.NodeID}, DefaultPartitions: cfg.DefaultPartitions})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	tb := &testBroker{Broker: b, dir: dir, meta: meta, reg: reg}
	t.Cleanup(func() { b.Close() })
	return tb
}

func (tb *testBroker) addr() string { return tb.Addr().String() }

func (tb *testBroker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr()), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (tb *testBroker) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(tb.client(t))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopics(testCtx(t), partitions, 1, configs, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp[name].Err; err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// discardLogger keeps test output readable; -v shows the brokers' logs.
func discardLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func makeBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	return kafkatest.Batch(pid, epoch, seq, values...)
}

// clientFor is a client bootstrapped at b only.
func clientFor(t testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String()), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
