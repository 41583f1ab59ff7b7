package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
)

// TestAdminSecureCluster: `weir admin` against a cluster secured as `weir dev --secure`
// does it works with the flags devSecurity prints, and is refused without the token.
func TestAdminSecureCluster(t *testing.T) {
	dir := t.TempDir()
	sec, err := devSecurity(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	flags := sec.adminFlags
	cfg := cluster.Config{Dir: dir, Controllers: 3, Brokers: 1, NoGossip: false, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sec.apply(&cfg)
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--controllers", strings.Join(c.APIAddrs(), ","), "--timeout", "20s"}
	if err := runAdmin(ctx, append(append([]string{"describe"}, base...), strings.Fields(flags)...), io.Discard); err != nil {
		t.Fatalf("weir admin describe %s: %v", flags, err)
	}
	caOnly := strings.Fields(flags)[2:] // --controller-tls-ca <file>, no token
	start := time.Now()
	err = runAdmin(ctx, append(append([]string{"describe"}, base...), caOnly...), io.Discard)
	if !errors.Is(err, ctlwire.ErrUnauthenticated) || !strings.Contains(err.Error(), "pass --cluster-token-file") {
		t.Fatalf("weir admin describe without the token: %v, want unauthenticated", err)
	}
	// Without --controller-tls-ca the client speaks plain HTTP to the TLS API: said so,
	// at once, not after --timeout with "context deadline exceeded".
	tokenOnly := append(strings.Fields(flags)[:2], "--insecure-plaintext-token")
	err = runAdmin(ctx, append(append([]string{"describe"}, base...), tokenOnly...), io.Discard)
	if !errors.Is(err, ctlclient.ErrSpeaksTLS) || !strings.Contains(err.Error(), "speaks TLS: pass --controller-tls-ca") {
		t.Fatalf("weir admin describe without --controller-tls-ca: %v, want the controllers named as speaking TLS", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the two refusals took %v: want them at once (the timeout is 20s)", took)
	}

	// `admin acl` takes the same flags (it had none of them: it could not reach a
	// secured cluster at all).
	add := []string{"acl", "add", "--principal", "User:alice", "--operation", "read", "--topic", "t"}
	if err := runAdmin(ctx, append(append(add, base...), strings.Fields(flags)...), io.Discard); err != nil {
		t.Fatalf("weir admin acl add %s: %v", flags, err)
	}
	list := []string{"acl", "list", "--principal", "User:alice"}
	if err := runAdmin(ctx, append(append(list, base...), strings.Fields(flags)...), io.Discard); err != nil {
		t.Fatalf("weir admin acl list %s: %v", flags, err)
	}
	err = runAdmin(ctx, append(append(list, base...), caOnly...), io.Discard)
	if !errors.Is(err, ctlwire.ErrUnauthenticated) {
		t.Fatalf("weir admin acl list without the token: %v, want unauthenticated", err)
	}
}
