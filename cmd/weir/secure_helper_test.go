package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/weir-io/weir/cluster"
)

// startSecureDev runs a cluster secured as `weir dev --secure` secures it (SASL_SSL
// listeners, an authenticated controller API), one controller and one broker to start
// fast, with its SCRAM admin user created; the cluster closes when the test ends.
func startSecureDev(t *testing.T, ctx context.Context) (*cluster.Cluster, *devSecure) {
	t.Helper()
	dir := t.TempDir()
	sec, err := devSecurity(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := cluster.Config{Dir: dir, Controllers: 1, Brokers: 1, NoGossip: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sec.apply(&cfg)
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := sec.bootstrap(ctx, c, cfg.Brokers, c.Bootstrap()); err != nil {
		t.Fatal(err)
	}
	return c, sec
}
