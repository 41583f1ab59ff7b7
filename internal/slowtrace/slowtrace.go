// Package slowtrace keeps a Go execution trace of the last seconds in memory (the
// runtime's flight recorder) and writes it to a file when a request takes longer than a
// threshold, so the cause of a rare tail-latency spike (a GC cycle, a stalled syscall,
// a goroutine waiting for a CPU or a lock) can be seen with `go tool trace` after the
// fact instead of being caught by luck with /debug/pprof/trace.
//
// The flight recorder costs a few per cent of CPU while on and is off by default. It is
// one per process (a second Recorder in the same process stays off and says so).
package slowtrace

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrConfig wraps invalid configurations.
var ErrConfig = errors.New("slowtrace: invalid configuration")

// Config says when and where traces are written.
type Config struct {
	// Threshold is the request duration from which a trace is written; 0 = off.
	Threshold time.Duration
	// Dir receives the trace files (created if missing).
	Dir string
	// Window is how much history each trace holds (at least; the runtime decides).
	Window time.Duration
	// MinInterval is the least time between two traces, so a burst of slow requests
	// writes one file, not hundreds.
	MinInterval time.Duration
	// Keep is how many trace files are kept; older ones are removed.
	Keep int
}

// DefaultConfig is off, with 5 s windows, at most one trace per 30 s, 10 files kept.
func DefaultConfig() Config {
	return Config{Window: 5 * time.Second, MinInterval: 30 * time.Second, Keep: 10}
}

// Validate checks an enabled configuration.
func (c Config) Validate() error {
	if c.Threshold < 0 || c.Window < 0 || c.MinInterval < 0 || c.Keep < 0 {
		return fmt.Errorf("%w: negative durations or counts", ErrConfig)
	}
	if c.Threshold > 0 && c.Dir == "" {
		return fmt.Errorf("%w: a threshold needs a directory for the traces", ErrConfig)
	}
	return nil
}

// Recorder writes a trace when Observe sees a slow request. A nil *Recorder is off.
type Recorder struct {
	cfg     Config
	log     *slog.Logger
	fr      *trace.FlightRecorder
	last    atomic.Int64 // unix ns of the last trace started
	writing sync.Mutex
	written atomic.Int64
	now     func() time.Time
}

// Start starts the flight recorder. With a zero Threshold it returns nil (off). If the
// runtime refuses (another flight recorder runs in this process) it logs that and
// returns nil: tracing is a diagnostic, never a reason not to serve.
func Start(cfg Config, log *slog.Logger) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Threshold == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("slowtrace: %w", err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: cfg.Window})
	if err := fr.Start(); err != nil {
		log.Warn("slow-request tracing is off: the flight recorder did not start", "err", err)
		return nil, nil
	}
	return &Recorder{cfg: cfg, log: log, fr: fr, now: time.Now}, nil
}

// Observe reports a finished request; what names it in the file name (an API name).
// It never blocks: the trace is written on a goroutine of its own.
func (r *Recorder) Observe(what string, d time.Duration) {
	if r == nil || d < r.cfg.Threshold {
		return
	}
	now := r.now()
	last := r.last.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < r.cfg.MinInterval {
		return
	}
	if !r.last.CompareAndSwap(last, now.UnixNano()) {
		return // another slow request is being traced
	}
	go r.write(what, d, now)
}

// Written is the number of trace files written so far.
func (r *Recorder) Written() int64 {
	if r == nil {
		return 0
	}
	return r.written.Load()
}

func (r *Recorder) write(what string, d time.Duration, at time.Time) {
	r.writing.Lock()
	defer r.writing.Unlock()
	name := fmt.Sprintf("slow-%s-%s-%dms.trace", at.UTC().Format("20060102T150405.000"), sanitize(what), d.Milliseconds())
	path := filepath.Join(r.cfg.Dir, name)
	f, err := os.Create(path)
	if err == nil {
		_, err = r.fr.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.log.Warn("writing a slow-request trace failed", "file", path, "err", err)
		os.Remove(path)
		return
	}
	r.log.Info("slow request: wrote the execution trace of the seconds before it (go tool trace FILE)",
		"request", what, "duration", d, "file", path)
	r.prune()
	r.written.Add(1) // after the prune: who sees the count sees the directory as kept
}

// prune keeps the newest Keep trace files.
func (r *Recorder) prune() {
	if r.cfg.Keep == 0 {
		return
	}
	ents, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "slow-") && strings.HasSuffix(e.Name(), ".trace") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // the timestamp sorts by time
	for len(names) > r.cfg.Keep {
		os.Remove(filepath.Join(r.cfg.Dir, names[0]))
		names = names[1:]
	}
}

// Close stops the flight recorder after any trace being written.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	r.writing.Lock()
	defer r.writing.Unlock()
	r.fr.Stop()
}

func sanitize(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return c
		}
		return '_'
	}, s)
}
