package routing

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"reflect"
	"testing"
)

func TestParseZoneCIDRs(t *testing.T) {
	want := ZoneCIDRs{
		{"us-east-1a", netip.MustParsePrefix("10.0.0.0/19")},
		{"us-east-1a", netip.MustParsePrefix("10.0.32.0/19")},
		{"us-east-1b", netip.MustParsePrefix("10.0.64.0/19")},
	}
	for _, s := range []string{
		"us-east-1a=10.0.0.0/19;10.0.32.0/19,us-east-1b=10.0.64.0/19",
		" us-east-1a = 10.0.0.0/19 ; 10.0.32.0/19 , us-east-1b=10.0.64.0/19 ",
		// AutoMQ's automq.zone.cidr.blocks and WarpStream's -zonedCIDRBlocks.
		"us-east-1a@10.0.0.0/19,10.0.32.0/19<>us-east-1b@10.0.64.0/19",
		// A host address is taken as its network.
		"us-east-1a=10.0.0.7/19;10.0.32.0/19,us-east-1b=10.0.64.0/19",
	} {
		got, err := ParseZoneCIDRs(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, want %v", s, got, want)
		}
	}
	if m, err := ParseZoneCIDRs("  "); err != nil || m != nil {
		t.Fatalf("empty: %v %v", m, err)
	}
	for _, bad := range []string{"a", "a=", "=10.0.0.0/8", "a=10.0.0.0/33", "a=10.0.0.0", "a b=10.0.0.0/8", "a@", "a=10.0.0.0/8,,b=10.1.0.0/16"} {
		if _, err := ParseZoneCIDRs(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: err %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.TagKeys, DefaultTagKeys) {
		t.Fatalf("default tag keys %v", c.TagKeys)
	}
	c.TagKeys[0] = "changed"
	if DefaultTagKeys[0] != "weir_az" {
		t.Fatal("DefaultConfig shares DefaultTagKeys")
	}

	// Normalised: masked, longest first, duplicates of the same zone dropped.
	c = Config{ZoneCIDRs: ZoneCIDRs{
		{"a", netip.MustParsePrefix("10.0.0.0/8")},
		{"b", netip.MustParsePrefix("10.1.2.3/16")},
		{"a", netip.MustParsePrefix("10.0.0.0/8")},
		{"c", netip.MustParsePrefix("::ffff:10.2.0.0/112")},
	}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := ZoneCIDRs{
		{"b", netip.MustParsePrefix("10.1.0.0/16")},
		{"c", netip.MustParsePrefix("10.2.0.0/16")},
		{"a", netip.MustParsePrefix("10.0.0.0/8")},
	}
	if !reflect.DeepEqual(c.ZoneCIDRs, want) {
		t.Fatalf("normalised %v, want %v", c.ZoneCIDRs, want)
	}

	for name, bad := range map[string]Config{
		"network in two zones": {ZoneCIDRs: ZoneCIDRs{{"a", netip.MustParsePrefix("10.0.0.0/8")}, {"b", netip.MustParsePrefix("10.0.0.0/8")}}},
		"empty zone":           {ZoneCIDRs: ZoneCIDRs{{"", netip.MustParsePrefix("10.0.0.0/8")}}},
		"zone with a comma":    {ZoneCIDRs: ZoneCIDRs{{"a,b", netip.MustParsePrefix("10.0.0.0/8")}}},
		"invalid prefix":       {ZoneCIDRs: ZoneCIDRs{{"a", netip.Prefix{}}}},
		"empty tag key":        {TagKeys: []string{""}},
		"tag key with '='":     {TagKeys: []string{"a=b"}},
		"tag key twice":        {TagKeys: []string{"zone", "ZONE"}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestBindFlags(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--zone-cidrs", "a=10.0.1.0/24;10.0.2.0/24,b=10.0.3.0/24", "--zone-tag-keys", "my_az, zone"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.ZoneCIDRs.String(); got != "a=10.0.1.0/24;10.0.2.0/24,b=10.0.3.0/24" {
		t.Fatalf("zone-cidrs %q", got)
	}
	if !reflect.DeepEqual(c.TagKeys, []string{"my_az", "zone"}) {
		t.Fatalf("tag keys %v", c.TagKeys)
	}
	// Round trip through String.
	again, err := ParseZoneCIDRs(c.ZoneCIDRs.String())
	if err != nil || !reflect.DeepEqual(again, c.ZoneCIDRs) {
		t.Fatalf("round trip %v %v", again, err)
	}
	// An empty --zone-tag-keys turns client.id tags off.
	if err := fs.Parse([]string{"--zone-tag-keys", ""}); err != nil {
		t.Fatal(err)
	}
	if len(c.TagKeys) != 0 {
		t.Fatalf("tag keys %v", c.TagKeys)
	}
	if err := fs.Parse([]string{"--zone-cidrs", "nonsense"}); err == nil {
		t.Fatal("bad --zone-cidrs accepted")
	}
}
