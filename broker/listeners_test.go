package broker

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-io/weir/security/tlsconf"
)

// The listener flags: --listen-protocol, repeatable --listener NAME=PROTOCOL://..., a
// protocol on --zone-listener, the TLS files; Validate refuses what cannot be served.
func TestListenerFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.BindFlags(fs)
	if cfg.ListenProtocol != "PLAINTEXT" {
		t.Fatalf("default --listen-protocol %q", cfg.ListenProtocol)
	}
	err := fs.Parse([]string{
		"--listen-protocol", "ssl",
		"--listener", "EXTERNAL=SSL://0.0.0.0:9093/b1.example.com:9093",
		"--listener", "INTERNAL=sasl_plaintext://127.0.0.1:0",
		"--zone-listener", "a=SASL_SSL://127.0.0.1:0/b1.a.example:9094",
		"--zone-listener", "b=127.0.0.1:0",
		"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-client-auth", "require",
	})
	if err != nil {
		t.Fatal(err)
	}
	wantNamed := []NamedListener{
		{Name: "EXTERNAL", Protocol: "SSL", Listen: "0.0.0.0:9093", Advertise: "b1.example.com:9093"},
		{Name: "INTERNAL", Protocol: "SASL_PLAINTEXT", Listen: "127.0.0.1:0"},
	}
	wantZone := []ZoneListener{
		{Zone: "a", Protocol: "SASL_SSL", Listen: "127.0.0.1:0", Advertise: "b1.a.example:9094"},
		{Zone: "b", Listen: "127.0.0.1:0"},
	}
	if !reflect.DeepEqual(cfg.Listeners, wantNamed) || !reflect.DeepEqual(cfg.ZoneListeners, wantZone) {
		t.Fatalf("parsed %+v and %+v", cfg.Listeners, cfg.ZoneListeners)
	}
	if cfg.TLS != (tlsconf.Files{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", ClientAuth: "require"}) {
		t.Fatalf("TLS files %+v", cfg.TLS)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.ListenProtocol != "SSL" {
		t.Fatalf("--listen-protocol ssl validated as %q", cfg.ListenProtocol)
	}
	if got := fs.Lookup("listener").Value.String(); got != "EXTERNAL=SSL://0.0.0.0:9093/b1.example.com:9093,INTERNAL=SASL_PLAINTEXT://127.0.0.1:0" {
		t.Errorf("--listener shows %q", got)
	}

	for _, bad := range []string{"", "X", "X=127.0.0.1:1", "X=TLS://127.0.0.1:1", "=SSL://127.0.0.1:1", "A B=SSL://127.0.0.1:1",
		"X=SSL://nohost", "X=SSL://127.0.0.1:1/h:0", "X=://127.0.0.1:1"} {
		if _, err := ParseNamedListener(bad); err == nil {
			t.Errorf("--listener %q accepted", bad)
		}
	}
	if _, err := ParseZoneListener("a=TLS://127.0.0.1:1"); err == nil {
		t.Error("--zone-listener with an unknown protocol accepted")
	}

	for name, mod := range map[string]func(*Config){
		"SSL without a certificate":      func(c *Config) { c.ListenProtocol = "SSL" },
		"SASL_SSL zone listener no cert": func(c *Config) { c.ZoneListeners = []ZoneListener{{Zone: "a", Protocol: "SASL_SSL", Listen: ":0"}} },
		"named SSL without a key": func(c *Config) {
			c.Listeners = []NamedListener{{Name: "S", Protocol: "SSL", Listen: ":0"}}
			c.TLS.CertFile = "c.pem"
		},
		"unknown main protocol": func(c *Config) { c.ListenProtocol = "TLS" },
		"a name twice": func(c *Config) {
			c.Listeners = []NamedListener{{Name: "X", Protocol: "PLAINTEXT", Listen: ":0"}, {Name: "X", Protocol: "PLAINTEXT", Listen: ":0"}}
		},
		"a name taken by a zone": func(c *Config) {
			c.ZoneListeners = []ZoneListener{{Zone: "a", Listen: ":0"}}
			c.Listeners = []NamedListener{{Name: "a", Protocol: "PLAINTEXT", Listen: ":0"}}
		},
		"too many": func(c *Config) {
			for i := 0; i < 9; i++ {
				c.ZoneListeners = append(c.ZoneListeners, ZoneListener{Zone: fmt.Sprint("z", i), Listen: ":0"})
				c.Listeners = append(c.Listeners, NamedListener{Name: fmt.Sprint("n", i), Protocol: "PLAINTEXT", Listen: ":0"})
			}
		},
		"client auth without CA": func(c *Config) { c.TLS = tlsconf.Files{CertFile: "c", KeyFile: "k", ClientAuth: "require"} },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(name, "certificate") || strings.Contains(name, "cert") || strings.Contains(name, "key") {
			if !errors.Is(err, tlsconf.ErrConfig) {
				t.Errorf("%s: %v, want tlsconf.ErrConfig", name, err)
			}
		}
	}
}
