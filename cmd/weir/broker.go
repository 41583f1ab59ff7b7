package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/metadata"
)

// runBroker runs one broker with a single-node metadata store. dev mode prints how to
// connect; it becomes the multi-zone local cluster once the controller lands.
func runBroker(ctx context.Context, args []string, dev bool) error {
	name := "broker"
	if dev {
		name = "dev"
	}
	fs := flag.NewFlagSet("weir "+name, flag.ContinueOnError)
	cfg := broker.DefaultConfig()
	cfg.BindFlags(fs)
	metricsAddr := fs.String("metrics", "127.0.0.1:9644", "address for /metrics, /healthz and /readyz (empty: off)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: weir %s [flags]\n\n", name)
		if dev {
			fmt.Fprint(fs.Output(), "Runs a local Weir on the embedded defaults: data under ./data, Kafka on 127.0.0.1:9092.\n\n")
		} else {
			fmt.Fprint(fs.Output(), "Runs one Weir broker. Every acked record is fdatasync'ed to the broker's WAL first.\n\n")
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer = reg
	cfg.Logger = logger
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	meta, err := metadata.OpenLocal(metadata.LocalConfig{
		Path:              filepath.Join(cfg.DataDir, "metadata.json"),
		Self:              metadata.Broker{ID: cfg.NodeID, Rack: cfg.Rack},
		DefaultPartitions: cfg.DefaultPartitions,
	})
	if err != nil {
		return err
	}
	b, err := broker.New(cfg, meta)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}
	var ready = true
	if *metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		})
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			b.Close()
			return fmt.Errorf("metrics listener: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
	}
	addr := b.Advertised()
	bootstrap := net.JoinHostPort(addr.Host, fmt.Sprint(addr.Port))
	fmt.Printf("weir is ready: Kafka bootstrap %s  (try: kcat -b %s -L)\n", bootstrap, bootstrap)
	if dev {
		fmt.Printf("data in %s; metrics on http://%s/metrics; Ctrl-C stops\n", strings.TrimSuffix(cfg.DataDir, "/"), *metricsAddr)
	}
	<-ctx.Done()
	ready = false
	logger.Info("shutting down")
	return b.Close()
}
