package gossip

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := DefaultConfig()
	c.BrokerID = 1
	c.Zone = "us-east-1a"
	c.KafkaAddr = "10.0.0.1:9092"
	c.Epoch = 1
	return c
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if c.Validate() == nil {
		t.Fatal("DefaultConfig without a Kafka address validated")
	}
	if err := validConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ProbeInterval != 100*time.Millisecond || c.ProbeTimeout != 50*time.Millisecond || c.SuspicionMult != 4 {
		t.Fatalf("defaults changed: %+v", c)
	}
	// Zero tuning fields mean defaults.
	z := validConfig()
	z.ProbeInterval, z.ProbeTimeout, z.SuspicionMult, z.GossipInterval = 0, 0, 0, 0
	if err := z.Validate(); err != nil {
		t.Fatal(err)
	}
	if z.withDefaults().ProbeInterval != DefaultProbeInterval {
		t.Fatal("zero probe interval not defaulted")
	}
}

func TestValidateRejects(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"negative id":       func(c *Config) { c.BrokerID = -1 },
		"negative epoch":    func(c *Config) { c.Epoch = -5 },
		"no kafka addr":     func(c *Config) { c.KafkaAddr = "" },
		"kafka addr port 0": func(c *Config) { c.KafkaAddr = "h:0" },
		"long zone":         func(c *Config) { c.Zone = strings.Repeat("z", MaxZoneLen+1) },
		"bad bind":          func(c *Config) { c.BindAddr = "nohost" },
		"bad advertise":     func(c *Config) { c.AdvertiseAddr = "1.2.3.4" },
		"bad seed":          func(c *Config) { c.Seeds = []string{"a:1", "b"} },
		"timeout ≥ probe":   func(c *Config) { c.ProbeTimeout = c.ProbeInterval },
		"negative duration": func(c *Config) { c.PushPullInterval = -time.Second },
		"suspicion mult":    func(c *Config) { c.SuspicionMult = -1 },
		"retry max < min":   func(c *Config) { c.JoinRetryInterval, c.JoinRetryMax = time.Second, time.Millisecond },
		"secret key size":   func(c *Config) { c.SecretKey = []byte("short") },
	} {
		c := validConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: validated", name)
		}
		if _, err := New(c, Events{}); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestBindFlags(t *testing.T) {
	c := validConfig()
	fs := flag.NewFlagSet("weir", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--gossip-addr=10.0.0.1:7000", "--gossip-seeds=10.0.0.2:7946, 10.0.0.3:7946,,", "--gossip-advertise-addr=1.2.3.4:7000"}); err != nil {
		t.Fatal(err)
	}
	if c.BindAddr != "10.0.0.1:7000" || c.AdvertiseAddr != "1.2.3.4:7000" ||
		!slices.Equal(c.Seeds, []string{"10.0.0.2:7946", "10.0.0.3:7946"}) {
		t.Fatalf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("gossip-seeds").Value.String(); got != "10.0.0.2:7946,10.0.0.3:7946" {
		t.Fatalf("seeds flag prints %q", got)
	}
	// Defaults come from the config.
	d := DefaultConfig()
	fs2 := flag.NewFlagSet("x", flag.ContinueOnError)
	d.BindFlags(fs2)
	if fs2.Lookup("gossip-addr").DefValue != DefaultBindAddr {
		t.Fatal("bind flag default")
	}
}

func TestBackoff(t *testing.T) {
	base, limit := 100*time.Millisecond, time.Second
	for attempt := 1; attempt < 70; attempt++ {
		d := backoff(base, limit, attempt)
		if d < base*9/10 || d > limit*11/10 {
			t.Fatalf("attempt %d: %v", attempt, d)
		}
	}
}
