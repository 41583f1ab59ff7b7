package routing

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series gathers reg's weir_traffic_bytes_total as "local/peer/kind/direction" → value.
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != MetricName {
			continue
		}
		if mf.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("%s is a %v", MetricName, mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["local_zone"]+"/"+l["peer_zone"]+"/"+l["kind"]+"/"+l["direction"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// pipe is a connected pair: the broker's end wrapped by tr, and the peer's end.
func pipe(tr *Traffic, peer string, kind Kind) (*Conn, net.Conn) {
	a, b := net.Pipe()
	return tr.Conn(a, peer, kind), b
}

func TestTrafficConnCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("a", reg)
	defer tr.Close()
	c, peer := pipe(tr, "", KindClientOther)
	defer c.Close()
	defer peer.Close()

	// The first request arrives before the client's zone is known.
	go peer.Write(make([]byte, 100))
	if _, err := io.ReadFull(c, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	// Its client.id names zone b: later bytes count there.
	c.SetPeer("b", KindClientOther)
	go peer.Write(make([]byte, 1000))
	if _, err := io.ReadFull(c, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	c.Records(In, 900) // a produce whose batch is 900 of those 1000 bytes
	go io.ReadFull(peer, make([]byte, 5000))
	c.Records(Out, 4500) // a fetch answer: records marked before the write
	if _, err := c.Write(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	got := series(t, reg)
	want := map[string]float64{
		"a/unknown/client_other/in": 100,
		"a/b/client_other/in":       100,
		"a/b/client_records/in":     900,
		"a/b/client_other/out":      500,
		"a/b/client_records/out":    4500,
	}
	if !mapsEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if c.Unwrap() == nil || c.RemoteAddr() == nil {
		t.Fatal("wrapped connection")
	}
}

func TestTrafficKindsAndReaderAt(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("us-east-1a", reg)
	defer tr.Close()

	conn, peer := pipe(tr, "us-east-1b", KindPeer)
	go peer.Write([]byte("peer answer"))
	io.ReadFull(conn, make([]byte, 11))
	go io.ReadFull(peer, make([]byte, 40))
	conn.Write(make([]byte, 40))
	conn.Records(Out, 40) // not a client connection: no-op
	conn.Close()
	peer.Close()

	r := tr.ReaderAt(bytes.NewReader(make([]byte, 4096)), "us-east-1c")
	n, err := r.ReadAt(make([]byte, 1000), 3500) // short read at the end: 596 bytes
	if n != 596 || err != io.EOF {
		t.Fatalf("ReadAt %d %v", n, err)
	}
	r.ReadAt(make([]byte, 100), 0)

	g := tr.Counter("us-east-1b", KindGossip)
	g.Add(Out, 1400)
	g.Add(In, 1400)
	g.Add(In, 0)
	g.Add(In, -5)
	tr.Counter("", KindController).Add(Out, 300)
	// Record bytes counted without a connection count in both the records and the total.
	cr := tr.Counter("us-east-1a", KindClientRecords)
	cr.Add(In, 70)
	tr.Counter("us-east-1a", KindClientOther).Add(In, 30)

	want := map[string]float64{
		"us-east-1a/us-east-1b/link/in":           11,
		"us-east-1a/us-east-1b/link/out":          40,
		"us-east-1a/us-east-1c/wal_read/in":       696,
		"us-east-1a/us-east-1b/gossip/in":         1400,
		"us-east-1a/us-east-1b/gossip/out":        1400,
		"us-east-1a/unknown/controller/out":       300,
		"us-east-1a/us-east-1a/client_records/in": 70,
		"us-east-1a/us-east-1a/client_other/in":   30,
	}
	if got := series(t, reg); !mapsEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// client_other never decreases, whatever the order of marks and bytes.
func TestTrafficClientOtherMonotonic(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("a", reg)
	defer tr.Close()
	c, peer := pipe(tr, "b", KindClientOther)
	defer c.Close()
	go io.Copy(io.Discard, peer)
	c.Write(make([]byte, 1000))
	if v := series(t, reg)["a/b/client_other/out"]; v != 1000 {
		t.Fatalf("other %v", v)
	}
	c.Records(Out, 800) // marked after the fact (and more than were written since)
	if v := series(t, reg)["a/b/client_other/out"]; v != 1000 {
		t.Fatalf("other went to %v", v)
	}
	c.Write(make([]byte, 1000)) // the truth is now 1200
	s := series(t, reg)
	if s["a/b/client_other/out"] != 1200 || s["a/b/client_records/out"] != 800 {
		t.Fatalf("%v", s)
	}
	c.Records(Out, 2000) // marked ahead of bytes still buffered: a dip, not exported
	if v := series(t, reg)["a/b/client_other/out"]; v != 1200 {
		t.Fatalf("other went to %v", v)
	}
}

func TestTrafficLabelBounds(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("", reg)
	defer tr.Close()
	if tr.LocalZone() != UnknownZone {
		t.Fatalf("local %q", tr.LocalZone())
	}
	for i := 0; i < MaxPeerZones+10; i++ {
		tr.Counter(strings.Repeat("z", i+1), KindClientOther).Add(In, 1)
	}
	tr.Counter("bad zone", KindPeer).Add(In, 1)
	tr.Counter("\xff", KindPeer).Add(In, 1)
	s := series(t, reg)
	peers := map[string]bool{}
	for k := range s {
		peers[strings.Split(k, "/")[1]] = true
	}
	if len(peers) > MaxPeerZones {
		t.Fatalf("%d peer labels", len(peers))
	}
	if s["unknown/"+OtherZone+"/client_other/in"] != float64(MaxPeerZones+10-(MaxPeerZones-1)) || s["unknown/"+OtherZone+"/link/in"] != 2 {
		t.Fatalf("overflow: %v", s)
	}
	// Invalid kinds count as client_other rather than panicking.
	tr.Counter("z", Kind(200)).Add(In, 1)
	tr.Counter("z", KindPeer).Add(Direction(7), 1)
	if series(t, reg)["unknown/z/client_other/in"] != 2 {
		t.Fatal("invalid kind")
	}
}

func TestTrafficRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("a", reg)
	tr.Counter("b", KindPeer).Add(Out, 1)
	if len(series(t, reg)) != 1 {
		t.Fatal("not exported")
	}
	// A second one on the same registry is a wiring bug.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("two Traffics registered on one registry")
			}
		}()
		NewTraffic("a", reg)
	}()
	tr.Close()
	if len(series(t, reg)) != 0 {
		t.Fatal("still exported after Close")
	}
	// Restart on the same registry; and without one (counts, exports nothing).
	tr2 := NewTraffic("a", reg)
	defer tr2.Close()
	NewTraffic("a", nil).Counter("b", KindPeer).Add(Out, 1)
}

func TestTrafficConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("a", reg)
	defer tr.Close()
	var wg sync.WaitGroup
	const conns, writes = 8, 200
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, peer := pipe(tr, "", KindClientOther)
			defer c.Close()
			done := make(chan struct{})
			go func() { io.Copy(io.Discard, peer); close(done) }()
			for j := 0; j < writes; j++ {
				if j == 10 {
					c.SetPeer([]string{"a", "b", "c"}[i%3], KindClientOther)
				}
				c.Write(make([]byte, 10))
				if j >= 10 {
					c.Records(Out, 4)
				}
			}
			c.Close()
			<-done
		}(i)
	}
	for i := 0; i < 20; i++ {
		series(t, reg) // scrapes while counting
	}
	wg.Wait()
	s := series(t, reg)
	var records, other float64
	for k, v := range s {
		if strings.Contains(k, "/client_records/") {
			records += v
		} else {
			other += v
		}
	}
	// Records are exact; client_other may stay ahead by what a scrape saw written and
	// not yet marked (at most one mark per connection).
	wantRecords := float64(conns * (writes - 10) * 4)
	wantOther := float64(conns*writes*10) - wantRecords
	if records != wantRecords || other < wantOther || other > wantOther+conns*4 {
		t.Fatalf("records %v (want %v), other %v (want %v): %v", records, wantRecords, other, wantOther, s)
	}
	if s["a/unknown/client_other/out"] != conns*10*10 {
		t.Fatalf("bytes before SetPeer: %v", s)
	}
}

func TestTrafficCountingAllocs(t *testing.T) {
	tr := NewTraffic("a", nil)
	c := tr.Conn(nopConn{}, "b", KindClientOther)
	buf := make([]byte, 64)
	if n := testing.AllocsPerRun(100, func() {
		c.Read(buf)
		c.Write(buf)
		c.Records(In, 10)
	}); n != 0 {
		t.Fatalf("%v allocations per Read+Write", n)
	}
	r := tr.ReaderAt(bytes.NewReader(buf), "c")
	if n := testing.AllocsPerRun(100, func() { r.ReadAt(buf[:8], 0) }); n != 0 {
		t.Fatalf("%v allocations per ReadAt", n)
	}
}

func BenchmarkTrafficConnWrite(b *testing.B) {
	tr := NewTraffic("a", nil)
	c := tr.Conn(nopConn{}, "b", KindClientOther)
	buf := make([]byte, 64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Write(buf)
		}
	})
}

type nopConn struct{ net.Conn }

func (nopConn) Read(p []byte) (int, error)  { return len(p), nil }
func (nopConn) Write(p []byte) (int, error) { return len(p), nil }

func TestKindNames(t *testing.T) {
	for _, k := range Kinds {
		if p, ok := ParseKind(k.String()); !ok || p != k {
			t.Fatalf("%v", k)
		}
	}
	if _, ok := ParseKind("nope"); ok || Kind(99).String() != "invalid" {
		t.Fatal("invalid kind")
	}
	if !KindPeer.BothEndsCount() || !KindGossip.BothEndsCount() || KindClientRecords.BothEndsCount() || KindWALRead.BothEndsCount() || KindController.BothEndsCount() {
		t.Fatal("BothEndsCount")
	}
	if In.String() != "in" || Out.String() != "out" {
		t.Fatal("directions")
	}
	for s, want := range map[Source]string{SourceNone: "none", SourceListener: "listener", SourceClientID: "client_id", SourceRack: "rack", SourceCIDR: "cidr"} {
		if s.String() != want {
			t.Fatalf("%v", s)
		}
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A PendingConn holds what it counted until its first SetPeer (a client's first request
// says its zone), then counts it there; Settle claims unclaimed bytes for a peer.
func TestTrafficPendingConn(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := NewTraffic("a", reg)
	defer tr.Close()
	a, peer := net.Pipe()
	c := tr.PendingConn(a)
	defer c.Close()
	defer peer.Close()
	go peer.Write(make([]byte, 700))
	if _, err := io.ReadFull(c, make([]byte, 700)); err != nil {
		t.Fatal(err)
	}
	c.Records(In, 600) // ignored: nobody's yet
	c.SetPeer("b", KindClientOther)
	c.Records(In, 600) // the produce's batch, marked once its zone is known
	c.Settle("c", KindPeer)
	got := series(t, reg)
	want := map[string]float64{"a/b/client_other/in": 100, "a/b/client_records/in": 600}
	if !mapsEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	b, peer2 := net.Pipe()
	c2 := tr.PendingConn(b)
	defer peer2.Close()
	go io.ReadFull(peer2, make([]byte, 50))
	c2.Write(make([]byte, 50))
	c2.Settle(UnknownZone, KindClientOther)
	if got := series(t, reg)["a/unknown/client_other/out"]; got != 50 {
		t.Fatalf("settled bytes: %v, want 50", got)
	}
}
