package slowtrace

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

func TestSlowRequestWritesAReadableTrace(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Threshold, cfg.Dir, cfg.Keep, cfg.Window = 10*time.Millisecond, dir, 2, time.Second
	r, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || r == nil {
		t.Fatalf("Start: %v, %v", r, err)
	}
	defer r.Close()
	r.Observe("Produce", 5*time.Millisecond) // below the threshold
	// on purpose: the recorder runs a while, collecting events, and must not trace that request
	time.Sleep(50 * time.Millisecond)
	if r.Written() != 0 {
		t.Fatal("a fast request wrote a trace")
	}
	clock := time.Now()
	r.now = func() time.Time { return clock }
	for i := range 3 {
		r.Observe("Produce", 40*time.Millisecond)
		r.Observe("Fetch", 40*time.Millisecond) // within MinInterval: ignored
		waitWritten(t, r, int64(i+1))
		clock = clock.Add(cfg.MinInterval)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "slow-*.trace"))
	if len(files) != 2 {
		t.Fatalf("%d trace files, want the newest 2: %v", len(files), files)
	}
	for _, f := range files {
		if !strings.Contains(f, "Produce-40ms") {
			t.Errorf("file name %s does not say which request and how long", f)
		}
		readTrace(t, f)
	}
}

func waitWritten(t *testing.T, r *Recorder, n int64) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d traces written", n), func() bool { return r.Written() >= n })
}

// readTrace checks the file is an execution trace with events after its header ("go
// 1.N trace" and padding).
func readTrace(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "go 1.") || !strings.Contains(string(b[:16]), " trace") || len(b) < 1024 {
		t.Fatalf("%s is no execution trace (%d bytes, starts %q)", path, len(b), b[:min(len(b), 16)])
	}
}

func TestOffAndInvalid(t *testing.T) {
	r, err := Start(DefaultConfig(), slog.Default())
	if r != nil || err != nil {
		t.Fatalf("zero threshold: %v, %v", r, err)
	}
	r.Observe("Produce", time.Hour) // nil-safe
	r.Close()
	cfg := DefaultConfig()
	cfg.Threshold = time.Millisecond
	if _, err := Start(cfg, slog.Default()); err == nil {
		t.Fatal("a threshold without a directory was accepted")
	}
}
