package chaos

import (
	"strings"
	"testing"
	"time"
)

// sample is a Metadata sample at t0+ms with the brokers listed and leaders[i] leading
// partition i.
func sample(t0 time.Time, ms int, brokers []int32, leaders []int32) metaSample {
	s := metaSample{at: t0.Add(time.Duration(ms) * time.Millisecond), brokers: map[int32]bool{}, leaders: map[int32]int32{}}
	for _, b := range brokers {
		s.brokers[b] = true
	}
	for p, l := range leaders {
		s.leaders[int32(p)] = l
	}
	return s
}

// leadersOf lays out 30 partitions: n[i] for broker i+1, in order.
func leadersOf(n ...int) []int32 {
	var out []int32
	for i, k := range n {
		for j := 0; j < k; j++ {
			out = append(out, int32(i+1))
		}
	}
	return out
}

// TestSpread: leaders are spread when every listed broker leads at least its share less
// max(1, 10 %); partitions led by an unlisted broker (fenced) do not count.
func TestSpread(t *testing.T) {
	t0 := time.Unix(1000, 0)
	all := []int32{1, 2, 3}
	for _, c := range []struct {
		brokers []int32
		leaders []int32
		want    bool
	}{
		{all, leadersOf(10, 10, 10), true},
		{all, leadersOf(11, 10, 9), true},  // 9: the share 10 less 1
		{all, leadersOf(12, 10, 8), false}, // 8 < 9
		{all, leadersOf(0, 15, 15), false}, // returned, empty
		{[]int32{2, 3}, leadersOf(0, 15, 15), true},
		{[]int32{2, 3}, leadersOf(10, 10, 10), true}, // 1's partitions (unlisted) do not count
		{all, leadersOf(200, 200, 170), false},       // share 190, floor 171
		{all, leadersOf(195, 195, 172), true},        // share 187.3, floor 168.6
	} {
		if got := spread(sample(t0, 0, c.brokers, c.leaders)); got != c.want {
			t.Errorf("brokers %v, leaders per broker %v: spread %v, want %v", c.brokers, counts(c.leaders), got, c.want)
		}
	}
}

func counts(leaders []int32) map[int32]int {
	n := map[int32]int{}
	for _, l := range leaders {
		n[l]++
	}
	return n
}

// TestRespreadAndTargets: broker 1 is killed at t0 and leaves Metadata; it is listed
// again (returned) at t0+5 s leading nothing, leads 5 at t0+6 s and 9 (spread) at
// t0+7.5 s: the fault's figure is 2.5 s from the return, 9 partitions given back, and
// target 5 passes; with the leaders never spread before the next fault it fails with a
// note. Target 1 comes from the first write sent after the kill and acked (a write sent
// before and acked after, its callback late, does not count).
func TestRespreadAndTargets(t *testing.T) {
	t0 := time.Unix(1000, 0)
	all := []int32{1, 2, 3}
	w := &watcher{samples: []metaSample{
		sample(t0, -200, all, leadersOf(10, 10, 10)),
		sample(t0, 1000, []int32{2, 3}, leadersOf(10, 10, 10)),
		sample(t0, 2000, []int32{2, 3}, fill(30, nil, 2, 3)),
		sample(t0, 5000, all, fill(30, map[int32]int32{}, 2, 3)),
		sample(t0, 6000, all, fill(30, map[int32]int32{0: 1, 1: 1, 2: 1, 15: 1, 16: 1}, 2, 3)),
		sample(t0, 7500, all, fill(30, map[int32]int32{0: 1, 1: 1, 2: 1, 3: 1, 15: 1, 16: 1, 17: 1, 18: 1, 19: 1}, 2, 3)),
	}}
	l := &load{start: t0.Add(-10 * time.Second), acks: map[int32][]time.Time{}, ackWaits: map[int32][]time.Duration{}}
	ack := func(p int32, atMs, waitMs int) {
		l.acks[p] = append(l.acks[p], t0.Add(time.Duration(atMs)*time.Millisecond))
		l.ackWaits[p] = append(l.ackWaits[p], time.Duration(waitMs)*time.Millisecond)
	}
	for p := int32(0); p < 10; p++ {
		ack(p, -100, 20)
		ack(p, 100, 500) // sent before the kill, its callback late
		ack(p, 1500+int(p)*10, 300)
		ack(p, 5200, 3000) // sent before the return (the failover held it): not the move's
		ack(p, 6000, 80)   // moved back: a write waited 80 ms
	}
	ev := Event{Fault: Fault{Kind: Kill, At: 10 * time.Second}, Start: t0, End: t0.Add(5500 * time.Millisecond), Brokers: []int32{1},
		Steps: []EventStep{{1, t0}}}
	cfg := Config{Partitions: 30, Rate: 300}
	fr := analyzeFault(cfg, l, w, ev, t0.Add(15*time.Second))
	respread(&fr, l, w, ev, t0.Add(20*time.Second))
	if fr.Returned == nil || *fr.Returned != Dur(5*time.Second) || fr.Respread == nil || *fr.Respread != Dur(2500*time.Millisecond) {
		t.Fatalf("returned %v, respread %v (%s); want 5s and 2.5s", fr.Returned, fr.Respread, fr.RespreadNote)
	}
	if fr.BalancerMoved != 9 || fr.BalancerWait == nil || fr.BalancerWait.P99 != Dur(80*time.Millisecond) {
		t.Fatalf("given back %d, wait %v; want 9, 80ms", fr.BalancerMoved, fr.BalancerWait)
	}
	if fr.FirstAck == nil || fr.FirstAck.N != 10 || fr.FirstAck.P50 != Dur(1550*time.Millisecond) || fr.FirstAck.Max != Dur(1590*time.Millisecond) {
		t.Fatalf("first ack %v, want 10 partitions from 1.5s to 1.59s (not the late callbacks at 100ms)", fr.FirstAck)
	}
	r := &Report{Faults: []FaultReport{fr}}
	ts := targets(r)
	want := map[int]bool{1: false, 3: true, 5: true} // 1.59 s > 1 s; 80 ms; 2.5 s
	if len(ts) != len(want) {
		t.Fatalf("targets %+v, want %v", ts, want)
	}
	for _, x := range ts {
		if pass, ok := want[x.Target]; !ok || x.Pass != pass {
			t.Fatalf("target %+v, want pass %v", x, pass)
		}
	}

	// Never spread before the next fault: no figure, a note, target 5 fails.
	fr = analyzeFault(cfg, l, w, ev, t0.Add(7*time.Second))
	respread(&fr, l, w, ev, t0.Add(7*time.Second))
	if fr.Respread != nil || fr.RespreadAtLeast == nil || *fr.RespreadAtLeast != Dur(2*time.Second) || !strings.Contains(fr.RespreadNote, "not spread") {
		t.Fatalf("respread %v, at least %v, note %q", fr.Respread, fr.RespreadAtLeast, fr.RespreadNote)
	}
	ts = targets(&Report{Faults: []FaultReport{fr}})
	if x := ts[len(ts)-1]; x.Target != 5 || x.Pass || x.Figure != Dur(2*time.Second) {
		t.Fatalf("target 5 without a spread: %+v", x)
	}
}

// fill lays out n partitions: those in set to their broker, the rest alternately to a
// and b.
func fill(n int, set map[int32]int32, a, b int32) []int32 {
	out := make([]int32, n)
	for p := range out {
		if l, ok := set[int32(p)]; ok {
			out[p] = l
		} else if p%2 == 0 {
			out[p] = a
		} else {
			out[p] = b
		}
	}
	return out
}

// TestControllerTarget: a controller leader change passes when the ack p99 in its
// window is at most twice the baseline's, and fails above or without a baseline.
func TestControllerTarget(t *testing.T) {
	for _, c := range []struct {
		base, fault time.Duration
		pass        bool
	}{
		{100 * time.Millisecond, 150 * time.Millisecond, true},
		{100 * time.Millisecond, 200 * time.Millisecond, true},
		{100 * time.Millisecond, 250 * time.Millisecond, false},
		{0, 10 * time.Millisecond, false},
	} {
		r := &Report{Baseline: LatencyFigures{AckP99: Dur(c.base)}, Faults: []FaultReport{{Fault: "controller-leader-kill@30s",
			Latency: LatencyFigures{AckP99: Dur(c.fault)}}}}
		ts := targets(r)
		if len(ts) != 1 || ts[0].Target != 4 || ts[0].Pass != c.pass || ts[0].Limit != Dur(2*c.base) {
			t.Errorf("baseline %v, fault %v: %+v, want pass %v", c.base, c.fault, ts, c.pass)
		}
	}
}

// TestProgressLineNamesFaultUnderWay: while a fault is being measured the line names
// it (it said "last fault: none" until the fault's figures were in), and a partition
// without a recent ack counts as unavailable now.
func TestProgressLineNamesFaultUnderWay(t *testing.T) {
	now := time.Now()
	l := &load{start: now.Add(-5 * time.Second), acks: map[int32][]time.Time{0: {now}, 1: {now.Add(-3 * time.Second)}}}
	var out strings.Builder
	progress(&out, l, Config{Partitions: 2, Rate: 100}, 0, "fault: kill at 4s, under way")
	if s := out.String(); !strings.Contains(s, "unavailable now 1 (no ack in 1s)") || !strings.HasSuffix(s, "fault: kill at 4s, under way\n") {
		t.Fatalf("progress line: %q", s)
	}
}
