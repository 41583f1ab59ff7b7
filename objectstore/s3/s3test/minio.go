// Package s3test runs a real MinIO server for tests: a separate process on a free
// loopback port with a temporary data directory and known credentials. MinIO is a test
// tool only; it is never imported.
//
// The binary is $WEIR_MINIO, else `minio` on PATH. .ci/run builds it with
// `go install github.com/minio/minio@<pinned>` and sets WEIR_MINIO and
// WEIR_REQUIRE_MINIO=1. Without a binary, Start skips the test, or fails it when
// WEIR_REQUIRE_MINIO=1.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/weir-io/weir/objectstore/s3"
)

// Credentials of every test server.
const (
	AccessKey = "weirtest"
	SecretKey = "weirtest-secret-key"
)

// MinIO is a running MinIO server.
type MinIO struct {
	// Endpoint is http://127.0.0.1:<port>.
	Endpoint string
	// Dir holds the server's data, certs directory and log.
	Dir string

	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error
	log     *lockedBuffer
	stop    sync.Once
}

// Binary returns the MinIO binary to run: $WEIR_MINIO, else `minio` on PATH.
func Binary() (string, error) {
	if p := os.Getenv("WEIR_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("WEIR_MINIO=%s: %w", p, err)
		}
		return p, nil
	}
	return exec.LookPath("minio")
}

// Required reports whether WEIR_REQUIRE_MINIO=1: a missing binary fails the tests.
func Required() bool { return os.Getenv("WEIR_REQUIRE_MINIO") == "1" }

// Start runs a MinIO server for the test and stops it when the test ends. It skips the
// test when there is no binary, unless WEIR_REQUIRE_MINIO=1.
func Start(t testing.TB) *MinIO {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if Required() {
			t.Fatalf("MinIO required (WEIR_REQUIRE_MINIO=1) but not found: %v", err)
		}
		t.Skipf("no MinIO binary (set WEIR_MINIO or put minio on PATH): %v", err)
	}
	m, err := StartServer(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Logf("stopping MinIO: %v", err)
		}
	})
	return m
}

// shared is the server of Shared: one per test binary.
var shared struct {
	once sync.Once
	m    *MinIO
	dir  string
	err  error
}

// Shared returns one MinIO server for the whole test binary, started on first use
// (about a second) and skipped or failed like Start. Tests share it through separate
// buckets (NewBucket) or prefixes. Call StopShared from TestMain after m.Run:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		s3test.StopShared()
//		os.Exit(code)
//	}
//
// Without that, the server lives until the test binary exits (it is killed then).
func Shared(t testing.TB) *MinIO {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if Required() {
			t.Fatalf("MinIO required (WEIR_REQUIRE_MINIO=1) but not found: %v", err)
		}
		t.Skipf("no MinIO binary (set WEIR_MINIO or put minio on PATH): %v", err)
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "weir-minio-")
		if shared.err == nil {
			shared.m, shared.err = StartServer(bin, shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.m
}

// StopShared stops the server of Shared, if it was started, and removes its data.
func StopShared() {
	if shared.m != nil {
		_ = shared.m.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
}

// StartServer runs bin as a MinIO server with its data under dir and waits until it
// is ready. Stop it with Stop.
func StartServer(bin, dir string) (*MinIO, error) {
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken between probe and bind
		m, err := startOnce(bin, dir, try)
		if err == nil {
			return m, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOnce(bin, dir string, try int) (*MinIO, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, fmt.Sprintf("data%d", try))
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	cmd := exec.Command(bin, "server", "--quiet",
		"--address", addr,
		"--certs-dir", filepath.Join(dir, "certs"),
		data)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", // no console listener
		"MINIO_UPDATE=off",
		"MINIO_CALLHOME_ENABLE=off",
		"HOME="+dir, // nothing under the real home directory
	)
	log := &lockedBuffer{}
	cmd.Stdout = log
	cmd.Stderr = log
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting MinIO %s: %w", bin, err)
	}
	m := &MinIO{Endpoint: "http://" + addr, Dir: dir, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		m.waitErr = cmd.Wait()
		close(m.done)
	}()
	if err := m.waitReady(60 * time.Second); err != nil {
		m.Stop()
		return nil, fmt.Errorf("MinIO on %s: %w\nlog:\n%s", addr, err, m.Log())
	}
	return m, nil
}

func (m *MinIO) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-m.done:
			return fmt.Errorf("exited before ready: %v", m.waitErr)
		default:
		}
		resp, err := client.Get(m.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s (last: %v)", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns what the server printed.
func (m *MinIO) Log() string { return m.log.String() }

// Stop terminates the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (m *MinIO) Stop() error {
	var err error
	m.stop.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
			err = errors.New("MinIO ignored SIGTERM for 10 s; killed")
		}
	})
	return err
}

// Config returns an s3.Config for bucket on this server (path-style, static keys).
func (m *MinIO) Config(bucket string) s3.Config {
	cfg := s3.DefaultConfig()
	cfg.Endpoint = m.Endpoint
	cfg.Region = "us-east-1"
	cfg.Bucket = bucket
	cfg.PathStyle = true
	cfg.AccessKey = AccessKey
	cfg.SecretKey = SecretKey
	return cfg
}

// CreateBucket creates bucket.
func (m *MinIO) CreateBucket(ctx context.Context, bucket string) error {
	st, err := s3.New(ctx, m.Config(bucket))
	if err != nil {
		return err
	}
	// A MinIO that answered its readiness probe may still say 503 "server not
	// initialized" for a moment (longer on a loaded machine): retry those.
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		_, err = st.Client().CreateBucket(ctx, &s3sdk.CreateBucketInput{Bucket: &bucket})
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "StatusCode: 503") {
			return fmt.Errorf("creating bucket %s: %w", bucket, err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("creating bucket %s: %w", bucket, err)
		}
	}
}

// NewBucket creates a bucket with a random name and returns the name.
func (m *MinIO) NewBucket(t testing.TB) string {
	t.Helper()
	b := "weir-" + RandomName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// RandomName returns 16 random lowercase hex characters (for buckets and prefixes).
func RandomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the start, where startup errors are
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}
