package bench

import (
	"testing"
	"time"
)

// probeOf builds a probe's record from (sent, acked, offset) triples in milliseconds
// after t0.
func probeOf(t0 time.Time, p int32, acks ...[3]int64) *probe {
	pr := &probe{acks: map[int32][]ack{}}
	for _, a := range acks {
		pr.acks[p] = append(pr.acks[p], ack{sent: t0.Add(time.Duration(a[0]) * time.Millisecond),
			at: t0.Add(time.Duration(a[1]) * time.Millisecond), off: a[2]})
	}
	return pr
}

// A move's pause runs from the last ack before the request to the first ack at the new
// leader, however long after the switch that comes: the measurement that reported 62 ms
// stopped its window a second after the last switch and never counted a pause still under
// way at the window's end.
func TestMovePauseRunsToTheFirstAckAtTheNewLeader(t *testing.T) {
	t0 := time.Now()
	// Acks every ~55 ms at the old leader (offsets 10-12), the request at 100 ms, the
	// old leader's last ack at 110 ms, the new leader (from offset 13) first acks at 3 s.
	pr := probeOf(t0, 7, [3]int64{0, 5, 10}, [3]int64{55, 60, 11}, [3]int64{105, 110, 12}, [3]int64{160, 3000, 13}, [3]int64{3050, 3055, 14})
	pause, first, ok := pr.movePause(7, t0.Add(100*time.Millisecond), 13)
	if !ok || pause != 2890*time.Millisecond || !first.Equal(t0.Add(3000*time.Millisecond)) {
		t.Fatalf("pause %v first %v ok %v; want 2.89s at 3s", pause, first.Sub(t0), ok)
	}
	// The gap that spans the request counts from the ack before it.
	pause, _, _ = pr.movePause(7, t0.Add(30*time.Millisecond), 12)
	if pause != 55*time.Millisecond {
		t.Fatalf("pause %v; want 55ms (5 → 60 ms)", pause)
	}
	// No ack at the new leader yet: not done, whatever the acks of the old one.
	if _, _, ok := pr.movePause(7, t0.Add(100*time.Millisecond), 15); ok {
		t.Fatal("a move without an ack at the new leader counted as done")
	}
}

// The controller phase's figure is the longest ack latency in the window, including a
// write still unacked at its end.
func TestLongestStallCountsAWriteUnackedAtTheEnd(t *testing.T) {
	t0 := time.Now()
	every := 50 * time.Millisecond
	pr := probeOf(t0, 1, [3]int64{0, 10, 0}, [3]int64{60, 300, 1}, [3]int64{350, 360, 2})
	if got := pr.longestStall(t0.Add(100*time.Millisecond), t0.Add(400*time.Millisecond), every); got != 240*time.Millisecond {
		t.Fatalf("stall %v; want the 240 ms write", got)
	}
	// The last ack at 360 ms, the window ending at 1 s: the next write (sent at 410 ms)
	// has waited 590 ms.
	if got := pr.longestStall(t0.Add(100*time.Millisecond), t0.Add(time.Second), every); got != 590*time.Millisecond {
		t.Fatalf("stall %v; want 590ms", got)
	}
}

// A paused broker's answers that arrive after the stop acked writes sent before it.
func TestFirstSentAfterIgnoresWritesSentBefore(t *testing.T) {
	t0 := time.Now()
	pr := probeOf(t0, 3, [3]int64{0, 40, 0}, [3]int64{90, 1500, 1})
	stop := t0.Add(20 * time.Millisecond)
	if got := pr.firstAfter(stop)[3]; !got.Equal(t0.Add(40 * time.Millisecond)) {
		t.Fatalf("firstAfter %v", got.Sub(t0))
	}
	if got := pr.firstSentAfter(stop)[3]; !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("firstSentAfter %v; want 1.5s", got.Sub(t0))
	}
}
