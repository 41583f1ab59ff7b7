package objread

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsRegistries(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Registerer = reg
	r1, err := New(f.cs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(f.cs, cfg); err == nil {
		t.Fatal("a second Reader on the same Registerer")
	}
	other := cfg
	other.Registerer = prometheus.NewRegistry()
	r2, err := New(f.cs, other)
	if err != nil {
		t.Fatal(err)
	}
	r2.Close()
	r1.Close()
	r3, err := New(f.cs, cfg)
	if err != nil {
		t.Fatalf("after Close the Registerer is free: %v", err)
	}
	r3.Close()
	if err := r3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r3.Read(context.Background(), [16]byte{}, 0, 0, 1, []ObjectRef{{Key: "k", Size: 100}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.BlockCacheBytes = -1 },
		func(c *Config) { c.IndexCacheBytes = -1 },
		func(c *Config) { c.ReadaheadBytes = -1 },
		func(c *Config) { c.MaxReadaheads = -1 },
		func(c *Config) { c.ReadaheadBytes = c.BlockCacheBytes },
	} {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
		if _, err := New(newFixture(t).cs, c); err == nil {
			t.Errorf("New accepted %+v", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config (no caches, no readahead): %v", err)
	}
}
