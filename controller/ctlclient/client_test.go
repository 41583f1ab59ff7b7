package ctlclient

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// The Client's own rules, without a controller; what needs a running controller is
// tested in package controller (harness_test.go), which imports this one.

// TestClientConfigFill: a heartbeat interval below ctlwire.MinHeartbeatInterval is
// raised to it, a producer-ID block beyond what a controller grants falls back to the
// default, and a client needs a controller address.
func TestClientConfigFill(t *testing.T) {
	cfg := ClientConfig{Controllers: []string{"127.0.0.1:1"}, HeartbeatInterval: 50 * time.Millisecond, ProducerIDBlock: ctlwire.MaxProducerIDBlock + 1}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	if cfg.HeartbeatInterval != ctlwire.MinHeartbeatInterval || cfg.ProducerIDBlock != ctlwire.DefaultProducerIDBlock {
		t.Fatalf("heartbeat %v, producer-ID block %d: want %v and %d", cfg.HeartbeatInterval, cfg.ProducerIDBlock, ctlwire.MinHeartbeatInterval, ctlwire.DefaultProducerIDBlock)
	}
	if err := (&ClientConfig{}).fill(); err == nil {
		t.Fatal("a client without controller addresses")
	}
}

// TestClientTokenNeedsTLS: a token is not sent over plain HTTP unless asked for.
func TestClientTokenNeedsTLS(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "t")
	if err := os.WriteFile(tokFile, []byte("token-a-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultClientConfig()
	cfg.Controllers, cfg.TokenFile = []string{"127.0.0.1:1"}, tokFile
	if _, err := newClientSecurity(&cfg); !errors.Is(err, ErrBadConfig) {
		t.Errorf("client with a token and no TLS: %v, want ErrBadConfig", err)
	}
	cfg.InsecurePlaintextToken = true
	if s, err := newClientSecurity(&cfg); err != nil || s.scheme != "http" || s.tokens == nil {
		t.Errorf("client with a token over plain HTTP, explicitly wanted: %+v, %v", s, err)
	}
}

// TestClientLeaseClockAndView: the lease is measured on the lease clock (on Linux
// CLOCK_BOOTTIME, which runs on while a VM is paused), not on the monotonic clock, and
// it counts only once the client's View includes the registration.
func TestClientLeaseClockAndView(t *testing.T) {
	cl, err := NewClient(ClientConfig{Controllers: []string{"127.0.0.1:1"}, BrokerID: 1, StartTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var clock atomic.Int64
	cl.leaseClock = func() time.Duration { return time.Duration(clock.Load()) }
	if cl.LeaseValid(time.Now()) {
		t.Fatal("a lease before registering")
	}
	clock.Store(int64(time.Hour))
	cl.leaseMu.Lock()
	cl.epoch.Store(1)
	end := time.Hour + 650*time.Millisecond
	// One of three controllers acknowledged: no majority, no lease.
	cl.acks, cl.voters, cl.hasAck, cl.leaseDur, cl.regVersion = map[int32]time.Duration{1: end}, 3, true, 650*time.Millisecond, 5
	cl.leaseMu.Unlock()
	cl.publish(&ctlwire.ViewJSON{Version: 5})
	if cl.LeaseValid(time.Now()) {
		t.Fatal("a lease from one controller of three")
	}
	cl.leaseMu.Lock()
	cl.acks[2] = end + time.Hour // the majority-th latest end counts: still `end`
	cl.regVersion = 6
	cl.leaseMu.Unlock()
	if cl.LeaseValid(time.Now()) {
		t.Fatal("the lease counted before the View included the registration")
	}
	cl.publish(&ctlwire.ViewJSON{Version: 6})
	if !cl.LeaseValid(time.Now()) {
		t.Fatal("no lease once two of three controllers acknowledged and the View includes the registration")
	}
	clock.Store(int64(time.Hour + 600*time.Millisecond))
	if !cl.LeaseValid(time.Now()) || cl.LeaseValid(time.Now().Add(100*time.Millisecond)) {
		t.Fatal("600 ms into a 650 ms lease: valid now, expired 100 ms later")
	}
	// A pause: the lease clock jumped while the monotonic clock (time.Now) hardly moved.
	clock.Store(int64(time.Hour + 2*time.Second))
	if cl.LeaseValid(time.Now()) {
		t.Fatal("the lease survived a pause of the lease clock")
	}
	real := newLeaseClock()
	if a, b := real(), real(); a <= 0 || b < a {
		t.Fatalf("the real lease clock read %v then %v", a, b)
	}
}

// TestCompactLoad: a load report longer than ctlwire.MaxLoadReport keeps the hottest
// partitions, and none without traffic.
func TestCompactLoad(t *testing.T) {
	var many []metadata.PartitionLoad
	for i := 0; i < ctlwire.MaxLoadReport+10; i++ {
		many = append(many, metadata.PartitionLoad{Topic: "x", Partition: int32(i), BytesPerSec: int64(i%7 + 1)})
	}
	many = append(many, metadata.PartitionLoad{Topic: "y", BytesPerSec: 0})
	c := compactLoad(many)
	if len(c) != ctlwire.MaxLoadReport || slices.ContainsFunc(c, func(x metadata.PartitionLoad) bool { return x.BytesPerSec == 0 }) {
		t.Fatalf("compacted to %d entries", len(c))
	}
	if !sort.SliceIsSorted(c, func(i, j int) bool { return c[i].BytesPerSec > c[j].BytesPerSec }) {
		t.Fatal("not the hottest first")
	}
}
