package gossip

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/weir-io/weir/internal/testutil"
)

// byteTally records what Config.Count reports.
type byteTally struct {
	mu    sync.Mutex
	bytes map[string][2]int // peer address → [in, out]
}

func (b *byteTally) count(peer string, out bool, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes == nil {
		b.bytes = map[string][2]int{}
	}
	v := b.bytes[peer]
	if out {
		v[1] += n
	} else {
		v[0] += n
	}
	b.bytes[peer] = v
}

func (b *byteTally) snapshot() map[string][2]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][2]int, len(b.bytes))
	for k, v := range b.bytes {
		out[k] = v
	}
	return out
}

// TestCountSeesEveryByte: with Count set, two members on loopback report packets both
// ways under each other's gossip address, and the streams of the join (broker 2 dials
// its seed, broker 1) on both ends: at the dialer under the seed's address, at the
// acceptor under the dialer's ephemeral address, which PeerZone still resolves.
func TestCountSeesEveryByte(t *testing.T) { testCountSeesEveryByte(t, testConfig) }

// TestCountSeesEveryByteInMemory: Count wraps a Config.Transport as it wraps the real
// one.
func TestCountSeesEveryByteInMemory(t *testing.T) {
	simulate(t, func(t *testing.T, mn *memNetwork) { testCountSeesEveryByte(t, mn.config) })
}

func testCountSeesEveryByte(t *testing.T, mk configFunc) {
	var tally [2]byteTally
	cfg1 := mk(1, 1, "127.0.0.1:0")
	cfg1.Count = tally[0].count
	n1 := startNode(t, cfg1)
	cfg2 := mk(2, 1, "127.0.0.1:0", n1.g.Addr())
	cfg2.Count = tally[1].count
	n2 := startNode(t, cfg2)
	nodes := []*testNode{n1, n2}
	waitConverged(t, nodes, 2)

	addr1, addr2 := n1.g.Addr(), n2.g.Addr()
	if addr1 == "" || addr2 == "" || addr1 == addr2 || addr1 == cfg1.BindAddr {
		t.Fatalf("gossip addresses %q and %q (port 0 must advertise the picked port)", addr1, addr2)
	}
	// Probes go both ways every ProbeInterval: UDP bytes at each end, both directions,
	// under the other's gossip address.
	testutil.Eventually(t, convergeTimeout, "packets counted both ways under the peer's address", func() bool {
		s1, s2 := tally[0].snapshot(), tally[1].snapshot()
		return s1[addr2][0] > 0 && s1[addr2][1] > 0 && s2[addr1][0] > 0 && s2[addr1][1] > 0
	})

	// Broker 1 accepted broker 2's join stream: bytes both ways from another port of
	// broker 2's IP.
	ip2 := netip.MustParseAddrPort(addr2).Addr()
	var accepted string
	testutil.Eventually(t, convergeTimeout, "accepted stream counted", func() bool {
		for peer, v := range tally[0].snapshot() {
			ap, err := netip.ParseAddrPort(peer)
			if peer != addr2 && err == nil && ap.Addr() == ip2 && v[0] > 0 && v[1] > 0 {
				accepted = peer
				return true
			}
		}
		return false
	})
	// Every address either end reported is the other member's.
	for i, n := range nodes {
		other := nodes[1-i]
		for peer, v := range tally[i].snapshot() {
			ap, err := netip.ParseAddrPort(peer)
			if err != nil || ap.Addr() != netip.MustParseAddrPort(other.g.Addr()).Addr() {
				t.Fatalf("broker %d counted %v bytes with %q, not broker %d", n.cfg.BrokerID, v, peer, other.cfg.BrokerID)
			}
		}
	}

	for _, tc := range []struct {
		n      *testNode
		addr   string
		zone   string
		wantOK bool
	}{
		{n1, addr2, cfg2.Zone, true},
		{n1, accepted, cfg2.Zone, true}, // the only peer at that IP
		{n2, addr1, cfg1.Zone, true},
		{n1, "192.0.2.1:7946", "", false},
		{n1, "not an address", "", false},
	} {
		if z, ok := tc.n.g.PeerZone(tc.addr); z != tc.zone || ok != tc.wantOK {
			t.Errorf("broker %d PeerZone(%q) = %q, %v; want %q, %v", tc.n.cfg.BrokerID, tc.addr, z, ok, tc.zone, tc.wantOK)
		}
	}

	// After Close the transport is gone and the view is empty of peers.
	if err := n2.g.Close(); err != nil {
		t.Fatal(err)
	}
	if z, ok := n2.g.PeerZone(addr1); ok {
		t.Fatalf("PeerZone after Close = %q, true", z)
	}
}

// TestPeerZoneAmbiguousIP: peers at one IP in different zones resolve only by their
// exact gossip address.
func TestPeerZoneAmbiguousIP(t *testing.T) {
	nodes := startCluster(t, testConfig, 3) // zones b, c and a, all on 127.0.0.1
	g := nodes[0].g
	if z, ok := g.PeerZone(nodes[2].g.Addr()); !ok || z != nodes[2].cfg.Zone {
		t.Fatalf("PeerZone(broker 3) = %q, %v", z, ok)
	}
	if z, ok := g.PeerZone("127.0.0.1:1"); ok {
		t.Fatalf("PeerZone of an ephemeral port with two peers in two zones = %q, true", z)
	}
}
