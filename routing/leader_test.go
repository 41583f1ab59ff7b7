package routing

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/weir-io/weir/metadata"
)

func topicID(i int) metadata.TopicID {
	var id metadata.TopicID
	for j := range id {
		id[j] = byte(i*31 + j*7)
	}
	return id
}

// view builds a View with the given brokers and no topics.
func view(version uint64, brokers ...metadata.Broker) *metadata.View {
	return metadata.NewView(version, "c", 1, brokers, nil)
}

func br(id int32, zone string, state metadata.BrokerState) metadata.Broker {
	return metadata.Broker{ID: id, Rack: zone, Host: "h", Port: 9000 + id, Epoch: 1, State: state}
}

// Three zones of three brokers: a = 1,4,7; b = 2,5,8; c = 3,6,9.
func nineBrokers() []metadata.Broker {
	var bs []metadata.Broker
	for id := int32(1); id <= 9; id++ {
		bs = append(bs, br(id, string(rune('a'+(id-1)%3)), metadata.BrokerActive))
	}
	return bs
}

// The hash is part of the cluster protocol: brokers must agree on it, so a change
// must be deliberate (and is an upgrade concern: during a rolling restart brokers of
// two builds would name different proxies).
func TestRendezvousGolden(t *testing.T) {
	var zero metadata.TopicID
	got := []uint64{Score(zero, 0, 0), Score(zero, 0, 1), Score(topicID(1), 7, 3), Score(topicID(2), -1, 1<<30)}
	want := []uint64{goldenScores[0], goldenScores[1], goldenScores[2], goldenScores[3]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scores %#x, want %#x", got, want)
	}
	var picks []int32
	for p := int32(0); p < 12; p++ {
		picks = append(picks, Choose(topicID(5), p, []int32{1, 4, 7}))
	}
	if !reflect.DeepEqual(picks, goldenPicks) {
		t.Fatalf("picks %v, want %v", picks, goldenPicks)
	}
}

var (
	goldenScores = [4]uint64{0x6d688654e9834407, 0x3363b47808e9ef3e, 0xe60e7d24f0adfef9, 0x1428fafb08f94d70}
	goldenPicks  = []int32{1, 4, 1, 1, 4, 4, 1, 4, 7, 4, 7, 4}
)

func TestZoneLeaderBasics(t *testing.T) {
	bs := nineBrokers()
	bs = append(bs, br(10, "", metadata.BrokerActive)) // no zone
	v := view(1, bs...)
	zv := NewZoneView(v)
	if !reflect.DeepEqual(zv.Zones(), []string{"a", "b", "c"}) {
		t.Fatalf("zones %v", zv.Zones())
	}
	if !reflect.DeepEqual(zv.Peers("b"), []int32{2, 5, 8}) || zv.Zone(5) != "b" || zv.Zone(10) != "" || zv.Zone(99) != "" {
		t.Fatalf("peers %v, zone(5) %q", zv.Peers("b"), zv.Zone(5))
	}
	if !zv.HasZone("c") || zv.HasZone("d") || zv.HasZone("") {
		t.Fatal("HasZone")
	}
	tid := topicID(1)
	for p := int32(0); p < 200; p++ {
		leader := int32(1 + p%9)
		lzone := zv.Zone(leader)
		for _, zone := range []string{"a", "b", "c"} {
			got := zv.Leader(zone, tid, p, leader)
			if zone == lzone {
				if got != leader {
					t.Fatalf("p%d zone %s: the leader %d is in the zone, got %d", p, zone, leader, got)
				}
			} else if zv.Zone(got) != zone {
				t.Fatalf("p%d zone %s: got broker %d of zone %q", p, zone, got, zv.Zone(got))
			}
			if rr := zv.ReadReplica(zone, tid, p, leader); rr != got {
				t.Fatalf("read replica %d, leader for the zone %d", rr, got)
			}
			if fn := ZoneLeader(v, tid, p, leader, zone); fn != got {
				t.Fatalf("ZoneLeader %d, ZoneView.Leader %d", fn, got)
			}
			// The chosen broker knows it is the proxy; nobody else in its zone does.
			for _, b := range zv.Peers(zone) {
				want := b == got && b != leader
				if zv.IsProxy(b, tid, p, leader) != want {
					t.Fatalf("p%d: IsProxy(%d) = %v, chosen %d, leader %d", p, b, !want, got, leader)
				}
			}
		}
		// Fallbacks: unknown zone, a zone without brokers, the leader's own.
		for _, zone := range []string{"", "d"} {
			if got := zv.Leader(zone, tid, p, leader); got != leader {
				t.Fatalf("zone %q: got %d, want the leader %d", zone, got, leader)
			}
			if got := ZoneLeader(v, tid, p, leader, zone); got != leader {
				t.Fatalf("ZoneLeader zone %q: got %d, want the leader %d", zone, got, leader)
			}
		}
		if zv.IsProxy(leader, tid, p, leader) || zv.IsProxy(10, tid, p, leader) {
			t.Fatal("the leader or a broker without zone is a proxy")
		}
	}
	// No serving leader: the answer stays "no leader".
	for _, leader := range []int32{-1, 42} {
		if got := zv.Leader("a", tid, 0, leader); got != leader {
			t.Fatalf("leader %d: got %d", leader, got)
		}
		if got := ZoneLeader(v, tid, 0, leader, "a"); got != leader {
			t.Fatalf("ZoneLeader leader %d: got %d", leader, got)
		}
	}
	if got := ZoneLeader(nil, tid, 0, 3, "a"); got != 3 {
		t.Fatalf("nil view: %d", got)
	}
	if got := NewZoneView(nil).Leader("a", tid, 0, 3); got != 3 {
		t.Fatalf("empty view: %d", got)
	}
}

// Fenced and draining brokers are never chosen; a draining or fenced real leader is
// handled as the leader it is (live) or is not (fenced).
func TestZoneLeaderStates(t *testing.T) {
	bs := nineBrokers()
	bs[3].State = metadata.BrokerDraining // 4, zone a
	bs[6].State = metadata.BrokerFenced   // 7, zone a
	v := view(1, bs...)
	zv := NewZoneView(v)
	if !reflect.DeepEqual(zv.Peers("a"), []int32{1}) {
		t.Fatalf("peers of a: %v", zv.Peers("a"))
	}
	tid := topicID(3)
	for p := int32(0); p < 100; p++ {
		if got := zv.Leader("a", tid, p, 2); got != 1 {
			t.Fatalf("p%d: zone a's only candidate is 1, got %d", p, got)
		}
		// A draining leader still serves: clients of its zone go to it.
		if got := zv.Leader("a", tid, p, 4); got != 4 {
			t.Fatalf("p%d: draining leader in the zone, got %d", p, got)
		}
		// Clients of other zones are proxied as for any leader.
		if got := zv.Leader("b", tid, p, 4); zv.Zone(got) != "b" {
			t.Fatalf("p%d: draining leader, zone b got %d", p, got)
		}
		// A fenced leader is no leader: nothing to proxy to.
		if got := zv.Leader("b", tid, p, 7); got != 7 {
			t.Fatalf("p%d: fenced leader, got %d", p, got)
		}
		if zv.IsProxy(4, tid, p, 2) || zv.IsProxy(7, tid, p, 2) {
			t.Fatal("a draining or fenced broker is a proxy")
		}
		if ZoneLeader(v, tid, p, 2, "a") != 1 || ZoneLeader(v, tid, p, 4, "a") != 4 || ZoneLeader(v, tid, p, 7, "b") != 7 {
			t.Fatal("ZoneLeader differs")
		}
	}
	// A zone whose brokers are all draining or fenced keeps the real leader.
	bs[0].State = metadata.BrokerDraining
	zv = NewZoneView(view(2, bs...))
	if zv.HasZone("a") || zv.Leader("a", tid, 0, 2) != 2 || ZoneLeader(view(2, bs...), tid, 0, 2, "a") != 2 {
		t.Fatal("zone without candidates")
	}
}

// Every zone's brokers share the partitions evenly, and the partitions a zone's broker
// stands in for are independent of the leader's zone.
func TestZoneLeaderSpread(t *testing.T) {
	zv := NewZoneView(view(1, nineBrokers()...))
	counts := map[int32]int{}
	const topics, parts = 20, 150
	for ti := 0; ti < topics; ti++ {
		for p := int32(0); p < parts; p++ {
			counts[zv.Leader("a", topicID(ti), p, 2)]++
		}
	}
	mean := topics * parts / 3
	for _, id := range []int32{1, 4, 7} {
		if c := counts[id]; c < mean*9/10 || c > mean*11/10 {
			t.Fatalf("broker %d stands in for %d partitions, mean %d: %v", id, c, mean, counts)
		}
	}
	// Partitions of one topic spread too (not all of a topic on one broker).
	one := map[int32]int{}
	for p := int32(0); p < 30; p++ {
		one[Choose(topicID(9), p, []int32{1, 4, 7})]++
	}
	for _, id := range []int32{1, 4, 7} {
		if one[id] < 4 {
			t.Fatalf("30 partitions of one topic: %v", one)
		}
	}
}

// A refresh (new version, new epochs, brokers listed in another order) changes no
// choice; a broker leaving moves only the partitions that had chosen it; a broker
// joining takes only partitions, and about its share.
func TestZoneLeaderStability(t *testing.T) {
	const parts = 3000
	tid := topicID(7)
	choices := func(zv *ZoneView) []int32 {
		out := make([]int32, parts)
		for p := range out {
			out[p] = zv.Leader("a", tid, int32(p), 2)
		}
		return out
	}
	bs := nineBrokers()
	before := choices(NewZoneView(view(1, bs...)))

	shuffled := append([]metadata.Broker(nil), bs...)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for i := range shuffled {
		shuffled[i].Epoch += 10
		shuffled[i].Host = "elsewhere"
	}
	if after := choices(NewZoneView(view(99, shuffled...))); !reflect.DeepEqual(before, after) {
		t.Fatal("a refresh changed choices")
	}

	// Broker 4 fenced (left): only its partitions move, to 1 and 7, about evenly.
	left := append([]metadata.Broker(nil), bs...)
	left[3].State = metadata.BrokerFenced
	after := choices(NewZoneView(view(2, left...)))
	moved := map[int32]int{}
	for p := range before {
		switch {
		case before[p] != 4 && after[p] != before[p]:
			t.Fatalf("p%d moved %d → %d though 4 left", p, before[p], after[p])
		case before[p] == 4:
			moved[after[p]]++
		}
	}
	if moved[4] != 0 || moved[1] < moved[7]/2 || moved[7] < moved[1]/2 {
		t.Fatalf("4's partitions went to %v", moved)
	}

	// Broker 11 joins zone a: partitions move only to it, about a quarter of them.
	joined := append(append([]metadata.Broker(nil), bs...), br(11, "a", metadata.BrokerActive))
	after = choices(NewZoneView(view(3, joined...)))
	n := 0
	for p := range before {
		if after[p] != before[p] {
			if after[p] != 11 {
				t.Fatalf("p%d moved %d → %d when 11 joined", p, before[p], after[p])
			}
			n++
		}
	}
	if n < parts/4*8/10 || n > parts/4*12/10 {
		t.Fatalf("%d of %d partitions moved to the new broker, want about a quarter", n, parts)
	}

	// Draining a broker is leaving as far as choices go; coming back restores them.
	back := choices(NewZoneView(view(4, bs...)))
	if !reflect.DeepEqual(before, back) {
		t.Fatal("choices differ after the broker came back")
	}
}

// Choose depends on the set of candidates, not their order.
func TestChooseOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 500; i++ {
		n := 1 + r.Intn(8)
		ids := r.Perm(20)[:n]
		c := make([]int32, n)
		for j, id := range ids {
			c[j] = int32(id)
		}
		tid, p := topicID(r.Intn(100)), int32(r.Intn(1000))
		want := Choose(tid, p, c)
		r.Shuffle(n, func(a, b int) { c[a], c[b] = c[b], c[a] })
		if got := Choose(tid, p, c); got != want {
			t.Fatalf("%v: %d then %d", c, want, got)
		}
	}
	if Choose(topicID(1), 0, nil) != -1 {
		t.Fatal("no candidates")
	}
}

// ZoneLeader (no index) and ZoneView.Leader agree on random clusters.
func TestZoneLeaderMatchesView(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	states := []metadata.BrokerState{"", metadata.BrokerActive, metadata.BrokerDraining, metadata.BrokerFenced}
	zones := []string{"", "a", "b", "c"}
	for i := 0; i < 300; i++ {
		var bs []metadata.Broker
		for id := int32(0); id < int32(1+r.Intn(10)); id++ {
			bs = append(bs, br(id, zones[r.Intn(len(zones))], states[r.Intn(len(states))]))
		}
		v := view(uint64(i), bs...)
		zv := NewZoneView(v)
		for j := 0; j < 20; j++ {
			tid, p, leader := topicID(r.Intn(50)), int32(r.Intn(100)), int32(r.Intn(12)-1)
			zone := zones[r.Intn(len(zones))] + []string{"", "x"}[r.Intn(2)]
			if a, b := ZoneLeader(v, tid, p, leader, zone), zv.Leader(zone, tid, p, leader); a != b {
				t.Fatalf("%v zone %q leader %d: ZoneLeader %d, view %d", bs, zone, leader, a, b)
			}
		}
	}
}

func BenchmarkZoneViewLeader(b *testing.B) {
	zv := NewZoneView(view(1, nineBrokers()...))
	tid := topicID(1)
	for i := 0; i < b.N; i++ {
		zv.Leader("a", tid, int32(i), 2)
	}
}

func ExampleZoneView_Leader() {
	v := metadata.NewView(1, "c", 1, []metadata.Broker{
		{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}, {ID: 3, Rack: "b"},
	}, nil)
	zv := NewZoneView(v)
	var tid metadata.TopicID
	// Partition 0 is led by broker 1 in zone a.
	fmt.Println(zv.Leader("a", tid, 0, 1)) // a client in a: the leader itself
	fmt.Println(zv.Peers("b"))             // a client in b: one of these
	fmt.Println(zv.Leader("", tid, 0, 1))  // zone unknown: the leader
	// Output:
	// 1
	// [2 3]
	// 1
}
