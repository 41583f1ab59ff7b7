package txn

import (
	"strings"
	"testing"
	"time"
)

// TestDefaultConfig: Kafka's defaults, and the partitions of __transaction_state.
func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Partitions != 8 || c.IDExpiration != 7*24*time.Hour || c.MaxTimeout != 15*time.Minute ||
		c.AbortCheckInterval != 10*time.Second || c.ExpirationCheckInterval != time.Hour {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestConfigValidate: each unusable field is named.
func TestConfigValidate(t *testing.T) {
	for field, mod := range map[string]func(*Config){
		"Partitions":              func(c *Config) { c.Partitions = 0 },
		"IDExpiration":            func(c *Config) { c.IDExpiration = 0 },
		"MaxTimeout":              func(c *Config) { c.MaxTimeout = -time.Second },
		"AbortCheckInterval":      func(c *Config) { c.AbortCheckInterval = 0 },
		"ExpirationCheckInterval": func(c *Config) { c.ExpirationCheckInterval = 0 },
		"RetryBackoff":            func(c *Config) { c.RetryBackoff = 0 },
		"RetryBackoffMax":         func(c *Config) { c.RetryBackoffMax = c.RetryBackoff / 2 },
		"MarkerTimeout":           func(c *Config) { c.MarkerTimeout = 0 },
		"Clock":                   func(c *Config) { c.Clock = nil },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
		if _, err := New(c, Deps{}); err == nil {
			t.Errorf("New with a bad %s succeeded", field)
		}
	}
	if _, err := New(DefaultConfig(), Deps{}); err == nil {
		t.Error("New without its dependencies succeeded")
	}
}

// TestPartitionForIsStable: FNV-1a 32 of the ID modulo the partitions, values computed
// apart: a change would move every ID away from its records.
func TestPartitionForIsStable(t *testing.T) {
	for _, c := range []struct {
		id   string
		n    int
		want int32
	}{
		{"", 8, 5}, {"my-txn", 8, 0}, {"producer-1", 8, 5}, {"orders-42", 8, 5},
		{"", 50, 11}, {"my-txn", 50, 18}, {"producer-1", 50, 5}, {"orders-42", 50, 3},
	} {
		if got := PartitionFor(c.id, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}
