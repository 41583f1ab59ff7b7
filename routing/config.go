package routing

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Sentinel errors.
var (
	// ErrInvalidConfig: a setting of Config is not valid; the message says which.
	ErrInvalidConfig = errors.New("routing: invalid config")
	// ErrInvalidZone: a zone name is empty, too long, not UTF-8 or holds a control or
	// separator character (ValidZone).
	ErrInvalidZone = errors.New("routing: invalid zone name")
)

// MaxZoneLen bounds a zone name, as gossip's node metadata does.
const MaxZoneLen = 128

// DefaultTagKeys are the client.id keys that name a client's zone by default: Weir's
// own, then the ones clients of AutoMQ, WarpStream and Bufstream already set (ZoneTag).
var DefaultTagKeys = []string{"weir_az", "automq_az", "warpstream_az", "ws_az", "zone"}

// Config configures how a client's zone is found (Config.ClientZone).
type Config struct {
	// ZoneCIDRs maps client source networks to zones; the longest matching prefix wins.
	ZoneCIDRs ZoneCIDRs
	// TagKeys are the keys of a client.id tag naming the client's zone, in order of
	// precedence (the first key present with a valid value wins). Empty: client.id is
	// not looked at.
	TagKeys []string
}

// ZoneCIDR is one network of a zone.
type ZoneCIDR struct {
	Zone   string
	Prefix netip.Prefix
}

// DefaultConfig returns the defaults: no CIDR map, DefaultTagKeys.
func DefaultConfig() Config {
	return Config{TagKeys: append([]string(nil), DefaultTagKeys...)}
}

// Validate checks every setting and normalises the CIDR map (prefixes masked, longest
// first, duplicates dropped). A network mapped to two zones is an error; overlapping
// networks of different zones are fine (the longest prefix wins).
func (c *Config) Validate() error {
	seen := map[netip.Prefix]string{}
	out := c.ZoneCIDRs[:0:0]
	for _, zc := range c.ZoneCIDRs {
		if !ValidZone(zc.Zone) {
			return fmt.Errorf("%w: --zone-cidrs: zone %q: %w", ErrInvalidConfig, zc.Zone, ErrInvalidZone)
		}
		if !zc.Prefix.IsValid() {
			return fmt.Errorf("%w: --zone-cidrs: zone %q has an invalid network", ErrInvalidConfig, zc.Zone)
		}
		p := zc.Prefix.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked() // ::ffff:a.b.c.d/n+96 is a.b.c.d/n
		}
		if z, ok := seen[p]; ok {
			if z != zc.Zone {
				return fmt.Errorf("%w: --zone-cidrs: %s is in zones %q and %q", ErrInvalidConfig, p, z, zc.Zone)
			}
			continue
		}
		seen[p] = zc.Zone
		out = append(out, ZoneCIDR{Zone: zc.Zone, Prefix: p})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Prefix.Bits() > out[j].Prefix.Bits() })
	c.ZoneCIDRs = out
	keys := map[string]bool{}
	for _, k := range c.TagKeys {
		if !validTagKey(k) {
			return fmt.Errorf("%w: --zone-tag-keys: %q is not a key (letters, digits, '_', '.', '-')", ErrInvalidConfig, k)
		}
		if keys[strings.ToLower(k)] {
			return fmt.Errorf("%w: --zone-tag-keys: %q twice", ErrInvalidConfig, k)
		}
		keys[strings.ToLower(k)] = true
	}
	return nil
}

// BindFlags registers --zone-cidrs and --zone-tag-keys on fs, writing into c.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.Var(&c.ZoneCIDRs, "zone-cidrs", "client networks per zone, for clients that name no zone: zone=cidr;cidr,zone=cidr "+
		"(e.g. us-east-1a=10.0.0.0/19;10.0.32.0/19,us-east-1b=10.0.64.0/19); AutoMQ's and WarpStream's "+
		"zone@cidr,cidr<>zone@cidr is accepted too. The longest matching prefix wins")
	fs.Var((*tagKeys)(&c.TagKeys), "zone-tag-keys", "comma-separated client.id keys naming a client's zone (key=zone in client.id, "+
		"pairs separated by , ; & | or spaces), first key present wins; empty: client.id is not looked at")
}

// String formats the map as --zone-cidrs takes it.
func (z ZoneCIDRs) String() string {
	var b strings.Builder
	for i, zc := range z {
		switch {
		case i == 0:
		case z[i-1].Zone == zc.Zone:
			b.WriteByte(';')
			b.WriteString(zc.Prefix.String())
			continue
		default:
			b.WriteByte(',')
		}
		b.WriteString(zc.Zone)
		b.WriteByte('=')
		b.WriteString(zc.Prefix.String())
	}
	return b.String()
}

// ZoneCIDRs is a zone's networks; as a flag.Value it parses
// zone=cidr;cidr,zone=cidr or AutoMQ's/WarpStream's zone@cidr,cidr<>zone@cidr.
type ZoneCIDRs []ZoneCIDR

// Set parses s (flag.Value); it replaces the map.
func (z *ZoneCIDRs) Set(s string) error {
	m, err := ParseZoneCIDRs(s)
	if err != nil {
		return err
	}
	*z = m
	return nil
}

// ParseZoneCIDRs parses a zone → networks map: Weir's zone=cidr;cidr,zone=cidr (zones
// separated by commas, a zone's networks by semicolons), or the format AutoMQ
// (automq.zone.cidr.blocks) and WarpStream (-zonedCIDRBlocks) use,
// zone@cidr,cidr<>zone@cidr. Spaces around items are ignored; an empty string is an
// empty map.
func ParseZoneCIDRs(s string) (ZoneCIDRs, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	zoneSep, kv, cidrSep := ",", "=", ";"
	if strings.Contains(s, "@") {
		zoneSep, kv, cidrSep = "<>", "@", ","
	}
	var out ZoneCIDRs
	for _, entry := range strings.Split(s, zoneSep) {
		zone, cidrs, ok := strings.Cut(entry, kv)
		zone = strings.TrimSpace(zone)
		if !ok || strings.TrimSpace(cidrs) == "" {
			return nil, fmt.Errorf("%w: --zone-cidrs: %q is not zone%scidr", ErrInvalidConfig, strings.TrimSpace(entry), kv)
		}
		if !ValidZone(zone) {
			return nil, fmt.Errorf("%w: --zone-cidrs: zone %q: %w", ErrInvalidConfig, zone, ErrInvalidZone)
		}
		for _, c := range strings.Split(cidrs, cidrSep) {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return nil, fmt.Errorf("%w: --zone-cidrs: zone %q: %v", ErrInvalidConfig, zone, err)
			}
			out = append(out, ZoneCIDR{Zone: zone, Prefix: p.Masked()})
		}
	}
	return out, nil
}

// tagKeys is --zone-tag-keys as a flag.Value.
type tagKeys []string

func (k *tagKeys) String() string { return strings.Join(*k, ",") }

func (k *tagKeys) Set(s string) error {
	*k = nil
	for _, key := range strings.Split(s, ",") {
		if key = strings.TrimSpace(key); key != "" {
			*k = append(*k, key)
		}
	}
	return nil
}

func validTagKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
