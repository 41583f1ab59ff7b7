package routing

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tag formats users have, from the vendors' documentation and code:
//   - WarpStream (docs.warpstream.com, "Configuring Kafka Client ID Features" and
//     "Configure Clients to Eliminate AZ Networking Costs"): comma-separated key=value
//     pairs anywhere in client.id, warpstream_az or its alias ws_az:
//     "application-foo,ws_az=us-east-1a", "warpstream_az=us-east-1a".
//   - AutoMQ (the broker parses client.id as a URL query, ClientIdMetadata →
//     URIUtils.splitQuery; its AZ-aware client configurator writes
//     "automq_type=producer&automq_role=producer-1&automq_az=us-east-1a&producer-1",
//     the value URL-encoded).
//   - Bufstream (buf.build/docs/bufstream/reference/configuration/client-id-options):
//     ',' or ';' delimited pairs, key zone: "my-client-id,zone=us-west-2b".
//   - Aiven Inkless splits on spaces and commas (inkless_az; add it to --zone-tag-keys).
func TestZoneTagFormats(t *testing.T) {
	keys := DefaultTagKeys
	for _, c := range []struct {
		id, zone, key string
	}{
		{"weir_az=us-east-1a", "us-east-1a", "weir_az"},
		{"application-foo,ws_az=us-east-1a", "us-east-1a", "ws_az"},
		{"warpstream_az=us-east-1a", "us-east-1a", "warpstream_az"},
		{"a=b,c=d,warpstream_az=eu-west-1c,rest_of_the_client_id", "eu-west-1c", "warpstream_az"},
		{"automq_type=producer&automq_role=producer-1&automq_az=us-east-1a&producer-1", "us-east-1a", "automq_az"},
		{"automq_az=us%2Deast%2D1a&x", "us-east-1a", "automq_az"}, // percent-encoded
		{"automq_az=az1", "az1", "automq_az"},
		{"my-client-id,zone=us-west-2b", "us-west-2b", "zone"},
		{"my-client-id;zone=us-west-2b;broker_count=1", "us-west-2b", "zone"},
		{"app zone=use1-az1 host=x", "use1-az1", "zone"},
		{"app|weir_az=b|v2", "b", "weir_az"},
		{"app\tweir_az=b", "b", "weir_az"},
		{"WEIR_AZ=b", "b", "weir_az"},                   // keys match without regard to case
		{"weir_az=US-EAST-1A", "US-EAST-1A", "weir_az"}, // values are kept as given
		// Key precedence is the order of keys, not the position in client.id.
		{"zone=z,ws_az=w,weir_az=a", "a", "weir_az"},
		{"zone=z,automq_az=q", "q", "automq_az"},
		// An empty or invalid value is skipped: the next occurrence, then the next key.
		{"weir_az=,weir_az=b", "b", "weir_az"},
		{"weir_az=a=b,zone=c", "c", "zone"},
		{"weir_az=%zz,zone=c", "c", "zone"},   // bad percent-encoding
		{"weir_az=a%2Cb,zone=c", "c", "zone"}, // decodes to a separator
	} {
		zone, key, ok := ZoneTag(c.id, keys)
		if !ok || zone != c.zone || key != c.key {
			t.Errorf("ZoneTag(%q) = %q, %q, %v; want %q, %q", c.id, zone, key, ok, c.zone, c.key)
		}
	}
	for _, id := range []string{
		"", "producer-1", "myzone=a", "x_weir_az=a", "weir_az", "weir_az =a", "weir_az:a",
		"omb-client_az=a", "zone=", "=a", "zone=" + strings.Repeat("z", MaxZoneLen+1),
		"zone=a\x00b", "zone=\xff",
	} {
		if zone, key, ok := ZoneTag(id, keys); ok {
			t.Errorf("ZoneTag(%q) = %q, %q: want none", id, zone, key)
		}
	}
	if _, _, ok := ZoneTag("weir_az=a", nil); ok {
		t.Error("no keys: found a tag")
	}
	if z, _, ok := ZoneTag("inkless_az=a b", []string{"inkless_az"}); !ok || z != "a" {
		t.Errorf("inkless_az: %q %v", z, ok)
	}
}

func TestClientZonePrecedence(t *testing.T) {
	c := DefaultConfig()
	var err error
	if c.ZoneCIDRs, err = ParseZoneCIDRs("cidr=10.0.0.0/8,narrow=10.1.0.0/16,v6=fd00::/8"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	all := ClientInfo{ListenerZone: "listener", ClientID: "app,weir_az=tag", Rack: "rack", Remote: tcp("10.2.3.4:5000")}
	steps := []struct {
		drop func(*ClientInfo)
		zone string
		src  Source
	}{
		{func(*ClientInfo) {}, "listener", SourceListener},
		{func(i *ClientInfo) { i.ListenerZone = "" }, "tag", SourceClientID},
		{func(i *ClientInfo) { i.ClientID = "app" }, "rack", SourceRack},
		{func(i *ClientInfo) { i.Rack = "" }, "cidr", SourceCIDR},
		{func(i *ClientInfo) { i.Remote = tcp("192.168.1.1:5000") }, "", SourceNone},
		{func(i *ClientInfo) { i.Remote = nil }, "", SourceNone},
	}
	in := all
	for _, s := range steps {
		s.drop(&in)
		zone, src := c.ClientZone(in)
		if zone != s.zone || src != s.src {
			t.Fatalf("%+v: got %q from %v, want %q from %v", in, zone, src, s.zone, s.src)
		}
	}

	// An invalid rack is ignored (the CIDR map decides).
	if z, src := c.ClientZone(ClientInfo{Rack: "a b", Remote: tcp("10.1.2.3:1")}); z != "narrow" || src != SourceCIDR {
		t.Fatalf("invalid rack: %q %v", z, src)
	}
	// Longest prefix; IPv4-mapped addresses; IPv6; other address types.
	for addr, want := range map[net.Addr]string{
		tcp("10.1.2.3:1"):          "narrow",
		tcp("10.9.2.3:1"):          "cidr",
		tcp("[::ffff:10.1.0.1]:1"): "narrow",
		tcp("[fd00::1]:1"):         "v6",
		&net.UDPAddr{IP: net.ParseIP("10.1.0.9"), Port: 1}: "narrow",
		&net.IPAddr{IP: net.ParseIP("10.3.0.9")}:           "cidr",
		fakeAddr("10.1.0.9:77"):                            "narrow",
		fakeAddr("10.3.0.9"):                               "cidr",
		fakeAddr("not an address"):                         "",
		&net.UnixAddr{Name: "/tmp/x", Net: "unix"}:         "",
	} {
		if z, _ := c.ClientZone(ClientInfo{Remote: addr}); z != want {
			t.Errorf("%v: zone %q, want %q", addr, z, want)
		}
	}
	// Without a CIDR map nothing is looked up.
	if z, src := DefaultConfig().ClientZone(ClientInfo{Remote: tcp("10.1.2.3:1")}); z != "" || src != SourceNone {
		t.Fatalf("no map: %q %v", z, src)
	}
	// Tags off.
	if z, _ := (Config{}).ClientZone(ClientInfo{ClientID: "weir_az=a"}); z != "" {
		t.Fatalf("tags off: %q", z)
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }

func TestClientZoneAllocs(t *testing.T) {
	c := DefaultConfig()
	c.ZoneCIDRs, _ = ParseZoneCIDRs("a=10.0.0.0/8")
	in := ClientInfo{ClientID: "rdkafka-producer-7", Remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("10.1.1.1:9"))}
	if n := testing.AllocsPerRun(100, func() { c.ClientZone(in) }); n != 0 {
		t.Fatalf("%v allocations per ClientZone", n)
	}
	in.ClientID = "app,ws_az=us-east-1a"
	if n := testing.AllocsPerRun(100, func() { c.ClientZone(in) }); n != 0 {
		t.Fatalf("%v allocations per ClientZone with a tag", n)
	}
}

func TestValidZone(t *testing.T) {
	for _, z := range []string{"a", "us-east-1a", "use1-az1", "europe-west1-b", "1", "zone/α", strings.Repeat("z", MaxZoneLen)} {
		if !ValidZone(z) {
			t.Errorf("%q invalid", z)
		}
	}
	for _, z := range []string{"", " ", "a b", "a,b", "a;b", "a&b", "a|b", "a=b", "a\nb", "\x7f", "\xff", "a\u00a0b", strings.Repeat("z", MaxZoneLen+1)} {
		if ValidZone(z) {
			t.Errorf("%q valid", z)
		}
	}
}

// FuzzZoneTag: any client.id (up to Kafka's 32767 bytes) is parsed without panicking,
// a found zone is valid and the key one of the keys, and a tag planted after any
// prefix ending in a separator is found when no earlier key competes.
func FuzzZoneTag(f *testing.F) {
	for _, s := range []string{
		"", "weir_az=a", "application-foo,ws_az=us-east-1a", "automq_type=producer&automq_az=us%2Deast-1a&p",
		"my-client-id;zone=us-west-2b", "a=b,c=d,rest", "zone=%", "zone==", "|||", "weir_az=\xff", "WS_AZ=x y",
	} {
		f.Add(s, "us-east-1a")
	}
	keys := DefaultTagKeys
	f.Fuzz(func(t *testing.T, id, zone string) {
		if len(id) > 32767 {
			return
		}
		z, k, ok := ZoneTag(id, keys)
		if ok {
			if !ValidZone(z) || !utf8.ValidString(z) {
				t.Fatalf("ZoneTag(%q) returned invalid zone %q", id, z)
			}
			found := false
			for _, key := range keys {
				found = found || key == k
			}
			if !found {
				t.Fatalf("ZoneTag(%q) returned key %q", id, k)
			}
			if !strings.Contains(strings.ToLower(id), strings.ToLower(k)+"=") {
				t.Fatalf("ZoneTag(%q) found key %q that is not there", id, k)
			}
		} else if z != "" || k != "" {
			t.Fatalf("ZoneTag(%q) = %q, %q without ok", id, z, k)
		}
		// Planting weir_az (the first key) after id and a separator always wins,
		// unless id already holds a valid weir_az tag (the first occurrence wins).
		if !ValidZone(zone) || strings.Contains(zone, "%") {
			return
		}
		planted := id + "," + "weir_az=" + zone
		got, key, ok := ZoneTag(planted, keys)
		if !ok || key != "weir_az" {
			t.Fatalf("ZoneTag(%q) = %q, %q, %v: planted tag missed", planted, got, key, ok)
		}
		if first, _, had := ZoneTag(id, []string{"weir_az"}); had {
			if got != first {
				t.Fatalf("ZoneTag(%q) = %q, want the first occurrence %q", planted, got, first)
			}
		} else if got != zone {
			t.Fatalf("ZoneTag(%q) = %q, want %q", planted, got, zone)
		}
	})
}
