package zonelab

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Veth is one direction of the veth pair between two namespaces: bytes sent by From to
// To. Either end may be Control.
type Veth struct{ From, To string }

func (k Veth) String() string { return k.From + "→" + k.To }

// Control reports whether the veth leads to or from the control namespace.
func (k Veth) Control() bool { return k.From == Control || k.To == Control }

// Counters are the byte and packet counters of every veth, read from the veth devices
// (what they count: whole Ethernet frames, so IP and TCP headers, ACKs and ARP are
// included). They count from the lab's start; Sub gives the traffic between two reads.
type Counters struct {
	Bytes   map[Veth]uint64
	Packets map[Veth]uint64
	// CrossZone is the sum of Bytes over the zone-to-zone veths: every byte that
	// crossed zones, controller and object store traffic excluded.
	CrossZone uint64
	// Control is the sum of Bytes over the veths to and from the control namespace.
	Control uint64
}

func (c *Counters) total() {
	c.CrossZone, c.Control = 0, 0
	for k, v := range c.Bytes {
		if k.Control() {
			c.Control += v
		} else {
			c.CrossZone += v
		}
	}
}

// Sub returns c - base (base an earlier read).
func (c Counters) Sub(base Counters) Counters {
	out := Counters{Bytes: map[Veth]uint64{}, Packets: map[Veth]uint64{}}
	for k, v := range c.Bytes {
		out.Bytes[k] = v - base.Bytes[k]
	}
	for k, v := range c.Packets {
		out.Packets[k] = v - base.Packets[k]
	}
	out.total()
	return out
}

// Pair is the bytes between zones a and b in both directions.
func (c Counters) Pair(a, b string) uint64 {
	return c.Bytes[Veth{a, b}] + c.Bytes[Veth{b, a}]
}

// Veths returns the veths sorted, zone-to-zone veths first.
func (c Counters) Veths() []Veth {
	var out []Veth
	for k := range c.Bytes {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Control() != b.Control() {
			return !a.Control()
		}
		if a.From != b.From {
			return a.From < b.From
		}
		return a.To < b.To
	})
	return out
}

// String is a table of every veth's bytes and packets with the two sums.
func (c Counters) String() string {
	var b strings.Builder
	for _, k := range c.Veths() {
		fmt.Fprintf(&b, "%-20s %14d bytes %10d packets\n", k.String(), c.Bytes[k], c.Packets[k])
	}
	fmt.Fprintf(&b, "cross-zone %d bytes, control %d bytes\n", c.CrossZone, c.Control)
	return b.String()
}

// MarshalJSON writes the veths as "from→to" keys.
func (c Counters) MarshalJSON() ([]byte, error) {
	type veth struct {
		Bytes   uint64 `json:"bytes"`
		Packets uint64 `json:"packets"`
	}
	m := map[string]veth{}
	for k, v := range c.Bytes {
		m[k.String()] = veth{v, c.Packets[k]}
	}
	return json.Marshal(struct {
		Veths     map[string]veth `json:"links"` // the key is kept: earlier reports use it
		CrossZone uint64          `json:"cross_zone_bytes"`
		Control   uint64          `json:"control_bytes"`
	}{m, c.CrossZone, c.Control})
}

// CrossZoneBytes reads the counters of every veth. Each veth is read at its end in a
// zone's namespace (tx: the zone sent, rx: it received), one `ip -s link` per zone.
func (l *Lab) CrossZoneBytes() (Counters, error) {
	c := Counters{Bytes: map[Veth]uint64{}, Packets: map[Veth]uint64{}}
	for i, z := range l.zones {
		out, err := ip("-n", l.Namespace(z), "-s", "-j", "link", "show")
		if err != nil {
			return c, err
		}
		var devs []struct {
			Name  string `json:"ifname"`
			Stats struct {
				RX, TX struct {
					Bytes   uint64 `json:"bytes"`
					Packets uint64 `json:"packets"`
				}
			} `json:"stats64"`
		}
		if err := json.Unmarshal(out, &devs); err != nil {
			return c, fmt.Errorf("zonelab: ip -s -j link in %s: %w", z, err)
		}
		// Zone i reads its veths to the control namespace and to the zones after it;
		// the veths to the zones before it were read there.
		peers := append([]string{Control}, l.zones[i+1:]...)
		for _, peer := range peers {
			found := false
			for _, d := range devs {
				if d.Name != vethName(peer) {
					continue
				}
				found = true
				c.Bytes[Veth{z, peer}], c.Packets[Veth{z, peer}] = d.Stats.TX.Bytes, d.Stats.TX.Packets
				c.Bytes[Veth{peer, z}], c.Packets[Veth{peer, z}] = d.Stats.RX.Bytes, d.Stats.RX.Packets
			}
			if !found {
				return c, fmt.Errorf("zonelab: no veth %s in %s", vethName(peer), l.Namespace(z))
			}
		}
	}
	c.total()
	return c, nil
}
