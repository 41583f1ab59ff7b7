package routing

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Source says how a client's zone was found (Config.ClientZone).
type Source uint8

const (
	// SourceNone: the zone is unknown; the client is routed to the real leaders.
	SourceNone Source = iota
	// SourceListener: the client connected to a per-zone listener.
	SourceListener
	// SourceClientID: a tag in the client.id (ZoneTag).
	SourceClientID
	// SourceRack: the rack a Fetch (v11+) carried (client.rack).
	SourceRack
	// SourceCIDR: the client's source address is in a network of Config.ZoneCIDRs.
	SourceCIDR
)

func (s Source) String() string {
	switch s {
	case SourceListener:
		return "listener"
	case SourceClientID:
		return "client_id"
	case SourceRack:
		return "rack"
	case SourceCIDR:
		return "cidr"
	default:
		return "none"
	}
}

// ClientInfo is what a broker knows of a client when it decides the client's zone.
type ClientInfo struct {
	// ListenerZone is the zone of the per-zone listener the client connected to; empty
	// for a listener that serves every zone.
	ListenerZone string
	// ClientID is the client.id of the client's requests.
	ClientID string
	// Rack is the rack_id of its Fetch requests (v11+), empty before its first Fetch.
	Rack string
	// Remote is the client's address (the connection's remote address); may be nil.
	Remote net.Addr
}

// ClientZone decides a client's zone: the first of its listener's zone, a zone tag in
// its client.id (keys c.TagKeys), its Fetch rack and its source address's network in
// c.ZoneCIDRs (longest prefix) that is there and valid (ValidZone). Unknown: "" and
// SourceNone, and the client is routed to the real leaders. Zones are returned as given
// (compared case-sensitively by the caller, as Kafka compares racks). It allocates
// nothing unless a tag value needs percent-decoding.
func (c Config) ClientZone(in ClientInfo) (zone string, from Source) {
	if in.ListenerZone != "" {
		return in.ListenerZone, SourceListener
	}
	if z, _, ok := ZoneTag(in.ClientID, c.TagKeys); ok {
		return z, SourceClientID
	}
	if ValidZone(in.Rack) {
		return in.Rack, SourceRack
	}
	if len(c.ZoneCIDRs) > 0 && in.Remote != nil {
		if a, ok := addrOf(in.Remote); ok {
			if z, ok := c.ZoneOfAddr(a); ok {
				return z, SourceCIDR
			}
		}
	}
	return "", SourceNone
}

// ZoneOfAddr finds the zone of the longest prefix of c.ZoneCIDRs holding a (IPv4-mapped
// IPv6 addresses match IPv4 networks).
func (c Config) ZoneOfAddr(a netip.Addr) (string, bool) {
	a = a.Unmap().WithZone("")
	best, zone := -1, ""
	for _, zc := range c.ZoneCIDRs {
		if zc.Prefix.Bits() > best && zc.Prefix.Contains(a) {
			best, zone = zc.Prefix.Bits(), zc.Zone
		}
	}
	return zone, best >= 0
}

func addrOf(r net.Addr) (netip.Addr, bool) {
	var ip net.IP
	switch a := r.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	default:
		s := r.String()
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Addr().Unmap(), true
		}
		if ad, err := netip.ParseAddr(s); err == nil {
			return ad.Unmap(), true
		}
		return netip.Addr{}, false
	}
	ad, ok := netip.AddrFromSlice(ip)
	return ad.Unmap(), ok
}

// ValidZone reports whether s can be a zone: 1 to MaxZoneLen bytes of UTF-8 without
// control characters, white space or any of , ; & | = (the separators of client.id
// tags).
func ValidZone(s string) bool {
	if s == "" || len(s) > MaxZoneLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return false
		}
		switch r {
		case ',', ';', '&', '|', '=':
			return false
		}
	}
	return true
}

// isTagSep reports whether c separates key=value pairs in a client.id: commas
// (WarpStream, Bufstream, Aiven's Inkless), semicolons (Bufstream), ampersands (AutoMQ,
// which writes client.id as a URL query), '|' and white space (seen in the wild).
func isTagSep(c byte) bool {
	switch c {
	case ',', ';', '&', '|', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// ZoneTag finds a zone tag in a client.id: a pair key=zone for the first of keys
// present (keys match without regard to ASCII case) whose value is a valid zone.
// Pairs are separated by any of , ; & | and white space, and may sit anywhere among
// other text: "application-foo,ws_az=us-east-1a" (WarpStream), "automq_type=producer&
// automq_az=us-east-1a&producer-1" (AutoMQ: a URL query, so a value is percent-decoded),
// "my-client-id;zone=us-west-2b" (Bufstream), "weir_az=a app". A pair must start at the
// beginning or after a separator ("myzone=a" is not "zone=a"). An empty or invalid
// value (ValidZone; a second '=') is skipped and the next occurrence or key is tried.
func ZoneTag(clientID string, keys []string) (zone, key string, ok bool) {
	if strings.IndexByte(clientID, '=') < 0 {
		return "", "", false
	}
	for _, k := range keys {
		if k == "" {
			continue
		}
		for i := 0; i < len(clientID); {
			for i < len(clientID) && isTagSep(clientID[i]) {
				i++
			}
			j := i
			for j < len(clientID) && !isTagSep(clientID[j]) {
				j++
			}
			tok := clientID[i:j]
			i = j
			if len(tok) <= len(k) || tok[len(k)] != '=' || !asciiEqualFold(tok[:len(k)], k) {
				continue
			}
			if v, ok := tagValue(tok[len(k)+1:]); ok {
				return v, k, true
			}
		}
	}
	return "", "", false
}

func tagValue(v string) (string, bool) {
	if strings.IndexByte(v, '%') >= 0 {
		d, err := url.PathUnescape(v)
		if err != nil {
			return "", false
		}
		v = d
	}
	if !ValidZone(v) {
		return "", false
	}
	return v, true
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
