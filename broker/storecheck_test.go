package broker

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// TestStartRefusesLeaseWithoutCompletions: a store that holds leases (a cluster's) but
// cannot complete recoveries or hand-offs is refused by Start, naming what it lacks,
// before anything is bound or opened; with them it starts.
func TestStartRefusesLeaseWithoutCompletions(t *testing.T) {
	start := func(store func(*metadata.LocalStore) metadata.Store) error {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, discardLogger()
		local, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 0}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(cfg, store(local))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Start()
		b.Close()
		return err
	}
	err := start(func(l *metadata.LocalStore) metadata.Store {
		s := &leaseOnly{LocalStore: l}
		s.valid.Store(true)
		return s
	})
	if !errors.Is(err, ErrStoreLacks) || !strings.Contains(err.Error(), "metadata.Recoverer") || !strings.Contains(err.Error(), "metadata.MoveCompleter") {
		t.Fatalf("Start on a lease without completions: %v, want ErrStoreLacks naming Recoverer and MoveCompleter", err)
	}
	if err := start(func(l *metadata.LocalStore) metadata.Store {
		s := &leasedStore{leaseOnly{LocalStore: l}}
		s.valid.Store(true)
		return s
	}); err != nil {
		t.Fatalf("Start on a complete leased store: %v", err)
	}
}
