package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// process is what every long-running command sets up: its flags for logging and
// metrics, a logger, a registry, and the /metrics, /healthz and /readyz server.
type process struct {
	logLevel, metricsAddr *string
	pprof                 *bool
	gomaxprocs            *int
	log                   *slog.Logger
	reg                   *prometheus.Registry
	ready                 atomic.Bool
	stop                  func()
}

// newProcess binds --log-level, --metrics and --pprof on fs with the given defaults.
func newProcess(fs *flag.FlagSet, logLevel, metricsAddr, metricsHelp string) *process {
	return &process{
		logLevel:    fs.String("log-level", logLevel, "debug, info, warn or error"),
		metricsAddr: fs.String("metrics", metricsAddr, metricsHelp),
		pprof: fs.Bool("pprof", false, "also serve Go's profiles under /debug/pprof/ on the --metrics listener (CPU, heap, allocs, "+
			"goroutine, block and mutex (sampled, on with this flag), trace; e.g. go tool pprof http://ADDR/debug/pprof/profile?seconds=30). Off by default: "+
			"profiles show code paths and memory, so expose the listener only where that is acceptable"),
		gomaxprocs: fs.Int("gomaxprocs", 0, "Go's GOMAXPROCS (threads running Go code at once). 0 = the GOMAXPROCS environment variable if set, "+
			"else at least 4: on machines with fewer cores, Go's GC worker takes a quarter of the Ps, which is a whole core of two for tens of ms "+
			"while requests wait (docs/PERFORMANCE.md); with more Ps than cores the kernel shares the cores among them instead"),
	}
}

// minProcs is the GOMAXPROCS floor of --gomaxprocs 0.
const minProcs = 4

// setProcs applies --gomaxprocs.
func setProcs(n int) {
	switch {
	case n > 0:
		runtime.GOMAXPROCS(n)
	case os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < minProcs:
		runtime.GOMAXPROCS(minProcs)
	}
}

// parse parses args; ok is false when --help was shown (nothing more to do).
func (p *process) parse(fs *flag.FlagSet, args []string) (ok bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	if p.log, err = newLogger(*p.logLevel); err != nil {
		return false, err
	}
	if *p.gomaxprocs < 0 {
		return false, errors.New("--gomaxprocs must be 0 (automatic) or positive")
	}
	setProcs(*p.gomaxprocs)
	p.reg = newRegistry()
	if *p.pprof && *p.metricsAddr == "" {
		return false, errors.New("--pprof needs --metrics: the profiles are served on the metrics listener")
	}
	if *p.pprof {
		// Without these the block and mutex profiles stay empty. Sampled: one in 100
		// contended mutex events, blocking events from 10µs on in proportion.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(10_000)
	}
	if p.stop, err = serveMetrics(*p.metricsAddr, p.reg, &p.ready, *p.pprof); err != nil {
		return false, err
	}
	return true, nil
}

// newRegistry is one process's metrics registry with the Go and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves /metrics, /healthz (the process is up), /readyz (ready reports
// true) and, with profiles, /debug/pprof/ on addr; an empty addr serves nothing. The
// returned function stops the server.
func serveMetrics(addr string, reg *prometheus.Registry, ready *atomic.Bool, profiles bool) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	if profiles {
		// On our own mux, not http.DefaultServeMux: importing net/http/pprof registers
		// there, and nothing else in the process may expose profiles by accident.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	// No WriteTimeout: a CPU profile or trace streams for as long as asked (?seconds=N).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), nil
}
