package broker

import (
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/metadata"
)

// --zone-listener zone=host:port[/advertised-host:port], repeatable; Validate refuses
// a zone given twice, invalid zones and addresses, and more than 16.
func TestZoneListenerFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.BindFlags(fs)
	if err := fs.Parse([]string{"--zone-listener", "us-east-1a=0.0.0.0:9093/b1.a.example:9093", "--zone-listener", "us-east-1b=127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	want := []ZoneListener{{Zone: "us-east-1a", Listen: "0.0.0.0:9093", Advertise: "b1.a.example:9093"}, {Zone: "us-east-1b", Listen: "127.0.0.1:0"}}
	if !reflect.DeepEqual(cfg.ZoneListeners, want) {
		t.Fatalf("parsed %+v, want %+v", cfg.ZoneListeners, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a", "=127.0.0.1:1", "a b=127.0.0.1:1", "a=nohost", "a=127.0.0.1:1/x", "a=127.0.0.1:1/h:0", "a=127.0.0.1:1/:9"} {
		if _, err := ParseZoneListener(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}

	twice := DefaultConfig()
	twice.ZoneListeners = []ZoneListener{{Zone: "a", Listen: ":1"}, {Zone: "a", Listen: ":2"}}
	if err := twice.Validate(); err == nil || !strings.Contains(err.Error(), "two zone listeners") {
		t.Errorf("a zone twice: %v", err)
	}
	many := DefaultConfig()
	for i := 0; i < 17; i++ {
		many.ZoneListeners = append(many.ZoneListeners, ZoneListener{Zone: fmt.Sprint("z", i), Listen: ":0"})
	}
	if err := many.Validate(); err == nil {
		t.Error("17 zone listeners accepted")
	}
}

// A single broker serves its zone listener: Metadata there names the listener's bound
// address (no advertised one given), and records produced through it read back. A
// zone listener that cannot bind fails Start and leaves no listener bound.
func TestZoneListenerServes(t *testing.T) {
	tb := startBroker(t, t.TempDir(), func(c *Config) {
		c.Rack = "a"
		c.ZoneListeners = []ZoneListener{{Zone: "a", Listen: "127.0.0.1:0"}}
	})
	za := tb.ZoneAddrs()["a"]
	if za == nil || za.String() == tb.addr() {
		t.Fatalf("zone listener %v, main %s", za, tb.addr())
	}
	if adv := tb.Advertised(); len(adv.Listeners) != 1 || adv.Listeners[0].Zone != "a" ||
		net.JoinHostPort(adv.Listeners[0].Host, fmt.Sprint(adv.Listeners[0].Port)) != za.String() {
		t.Fatalf("advertised %+v, want zone a at %s", adv, za)
	}
	createTopic(t, tb.admin(t), "zt", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(za.String()), kgo.RetryTimeout(20*time.Second), kgo.DefaultProduceTopic("zt"),
		kgo.ConsumeTopics("zt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, fmt.Sprint(md.Brokers[0].Port)) != za.String() {
		t.Fatalf("zone listener's Metadata names %+v, want %s", md.Brokers, za)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(testCtx(t))
	if err := fs.Err(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("read back %d records: %v", fs.NumRecords(), err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	main, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the main listener
	if err != nil {
		t.Fatal(err)
	}
	mainAddr := main.Addr().String()
	main.Close()
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = mainAddr, t.TempDir(), discardLogger()
	cfg.ZoneListeners = []ZoneListener{{Zone: "a", Listen: busy.Addr().String()}}
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(cfg.DataDir, "metadata.json")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(); err == nil || !strings.Contains(err.Error(), "zone a") {
		t.Fatalf("Start with a busy zone listener: %v", err)
	}
	again, err := net.Listen("tcp", mainAddr)
	if err != nil {
		t.Fatalf("the main listener was left bound: %v", err)
	}
	again.Close()
}
