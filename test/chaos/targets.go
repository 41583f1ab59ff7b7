package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Issue 22's targets, each measured on the faults it is about (see targets).
const (
	targetKillFirstAck  = time.Second             // 1: SIGKILL → first acked write, p99
	targetPauseFirstAck = 1500 * time.Millisecond // 2: SIGSTOP → served elsewhere, p99
	targetMoveWait      = 150 * time.Millisecond  // 3: graceful move → longest write pause, p99
	targetRespread      = 10 * time.Second        // 5: a broker's return → leaders spread
	// 4: a controller leader change → ack p99 at most twice the baseline's.
	targetControllerAckFactor = 2
)

// TargetResult is one figure of issue 22 beside its target: the fault it was measured
// on, the figure, the limit and whether the figure is within it.
type TargetResult struct {
	// Target is the number for it (1 to 5); What says what the figure is.
	Target int    `json:"target"`
	What   string `json:"what"`
	Fault  string `json:"fault"`
	Figure Dur    `json:"figure"`
	Limit  Dur    `json:"limit"`
	// N counts what the figure is over (partitions; 1 for a single time).
	N    int    `json:"n"`
	Pass bool   `json:"pass"`
	Note string `json:"note,omitempty"`
}

// returns reports whether a fault takes brokers out of the cluster and brings them back
// (so the balancer has leaders to give back to them).
func returns(k FaultKind) bool {
	switch k {
	case Kill, KillMany, Pause, Isolate, CoordinatorKill, TxnCoordinatorKill, ZoneOutage, ZonePartition, RollingRestart:
		return true
	}
	return false
}

// targets lists each fault's figures beside issue 22's targets:
//
//  1. kill, coordinator-kill (SIGKILL of one broker): first acked write after the kill,
//     p99 over the partitions it led, ≤ 1 s.
//  2. pause (SIGSTOP): first acked write after the pause, p99 over the partitions it
//     led (served elsewhere), ≤ 1.5 s.
//  3. graceful moves: rolling-restart (drain), the longest wait of a write of a moved
//     partition for its ack, p99 over those partitions; and the balancer's moves to
//     returned brokers (any fault with a return), the same figure over the partitions
//     given back; ≤ 150 ms. (coordinator-move moves a __consumer_offsets partition, which
//     the load does not write: its figure is the group's pause.)
//  4. controller-leader-kill: ack p99 in the fault's window ≤ twice the baseline ack p99
//     (outside faults).
//  5. any fault with a return: the time from the return to the leaders being spread
//     (watch.go, spread), ≤ 10 s.
func targets(r *Report) []TargetResult {
	var out []TargetResult
	add := func(n int, what string, f FaultReport, fig, limit time.Duration, count int, note string) {
		out = append(out, TargetResult{Target: n, What: what, Fault: f.Fault, Figure: Dur(fig), Limit: Dur(limit), N: count,
			Pass: fig <= limit && note == "", Note: note})
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			continue
		}
		kind := FaultKind(f.Fault)
		if i := strings.IndexAny(f.Fault, ":@"); i >= 0 {
			kind = FaultKind(f.Fault[:i])
		}
		switch kind {
		case Kill, CoordinatorKill, TxnCoordinatorKill:
			if f.FirstAck != nil {
				add(1, "SIGKILL of a broker: first acked write after the kill, p99", f, time.Duration(f.FirstAck.P99), targetKillFirstAck, f.FirstAck.N, "")
			}
		case Pause:
			if f.FirstAck != nil {
				add(2, "SIGSTOP of a broker: first acked write (served elsewhere), p99", f, time.Duration(f.FirstAck.P99), targetPauseFirstAck, f.FirstAck.N, "")
			}
		case RollingRestart:
			if f.WriteWait != nil {
				add(3, "graceful moves (drain): longest write wait of a moved partition, p99", f, time.Duration(f.WriteWait.P99), targetMoveWait, f.WriteWait.N, "")
			}
		case ControllerLeaderKill:
			limit := targetControllerAckFactor * time.Duration(r.Baseline.AckP99)
			note := ""
			if r.Baseline.AckP99 == 0 {
				note = "no baseline (no time outside faults)"
			}
			add(4, fmt.Sprintf("controller leader killed: ack p99 in the fault's window vs %d × baseline ack p99 (%v)", targetControllerAckFactor, r.Baseline.AckP99),
				f, time.Duration(f.Latency.AckP99), limit, 1, note)
		}
		if f.BalancerWait != nil {
			add(3, "graceful moves (balancer, back to the returned brokers): longest write wait, p99", f, time.Duration(f.BalancerWait.P99), targetMoveWait, f.BalancerWait.N, "")
		}
		if returns(kind) {
			switch {
			case f.Respread != nil:
				add(5, "a broker returned: leaders spread again after", f, time.Duration(*f.Respread), targetRespread, 1, "")
			case f.RespreadNote != "":
				var fig time.Duration
				if f.RespreadAtLeast != nil {
					fig = time.Duration(*f.RespreadAtLeast)
				}
				add(5, "a broker returned: leaders spread again after", f, fig, targetRespread, 1, f.RespreadNote)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// writeTargets prints the targets as a table.
func writeTargets(w io.Writer, ts []TargetResult) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nissue 22 targets (figure / target):")
	for _, t := range ts {
		mark := "PASS"
		if !t.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  (%d) %-4s %-26s %9v / %-7v %s", t.Target, mark, t.Fault, t.Figure, t.Limit, t.What)
		if t.N > 1 {
			fmt.Fprintf(w, " (%d partitions)", t.N)
		}
		if t.Note != "" {
			fmt.Fprintf(w, " — %s", t.Note)
		}
		fmt.Fprintln(w)
	}
}

// firstAck is the time from at to the first ack (to until when none) of a write sent
// at or after at (waits[i] belongs to the ack at ts[i]): a write sent before may have
// been acked before at, its callback run late on a busy client.
func firstAck(ts []time.Time, waits []time.Duration, at, until time.Time) time.Duration {
	first := until
	for i, t := range ts {
		if i < len(waits) && t.After(at) && !t.After(first) && !t.Add(-waits[i]).Before(at) {
			first = t
		}
	}
	return first.Sub(at)
}

// longestWait is the longest of waits (waits[i] belongs to the ack at ts[i]) of the acks
// in [from, to].
func longestWait(ts []time.Time, waits []time.Duration, from, to time.Time) time.Duration {
	var longest time.Duration
	for i, t := range ts {
		if t.Before(from) || t.After(to) || i >= len(waits) {
			continue
		}
		longest = max(longest, waits[i])
	}
	return longest
}

// longestWaitSent is the longest of waits of the writes sent in [from, to] (a write
// acked at ts[i] was sent waits[i] before): those the balancer's moves held up, not
// writes stuck since a failover before from.
func longestWaitSent(ts []time.Time, waits []time.Duration, from, to time.Time) time.Duration {
	var longest time.Duration
	for i, t := range ts {
		if i >= len(waits) {
			break
		}
		if sent := t.Add(-waits[i]); !sent.Before(from) && !sent.After(to) {
			longest = max(longest, waits[i])
		}
	}
	return longest
}

// respread measures how long after a fault's brokers returned the leaders were spread
// again (Returned, Respread, BalancerMoved, BalancerWait), looking until next.
func respread(fr *FaultReport, l *load, w *watcher, ev Event, next time.Time) {
	if !returns(ev.Fault.Kind) || ev.Err != "" || len(ev.Brokers) == 0 {
		return
	}
	// A broker's return is when it was listed again (registered anew: the balancer may
	// give it partitions from then on, before the fault's end, which waits for it to
	// serve), or the fault's end for one never out of Metadata; the brokers' return is
	// the last of theirs.
	var back time.Time
	for _, b := range ev.Brokers {
		at := ev.Start
		for _, st := range ev.Steps {
			if st.Broker == b {
				at = st.At
			}
		}
		gone, ok := w.brokerGone(b, at)
		if !ok || gone.After(next) {
			back = maxTime(back, ev.End)
			continue
		}
		bk, ok := w.brokerBack(b, gone)
		if !ok || bk.After(next) {
			fr.RespreadNote = fmt.Sprintf("broker %d not listed again before %v", b, Dur(next.Sub(l.start)))
			return
		}
		back = maxTime(back, bk)
	}
	ret := Dur(back.Sub(ev.Start))
	fr.Returned = &ret
	s, ok := w.spreadAt(back, next, ev.Brokers)
	if ok {
		d := Dur(s.at.Sub(back))
		fr.Respread = &d
	} else {
		lb := Dur(next.Sub(back))
		fr.RespreadAtLeast = &lb
		fr.RespreadNote = fmt.Sprintf("not spread in the %v from the return to the next fault or the end (more than that)", lb)
		if s, ok = w.latest(next); !ok || len(s.brokers) == 0 {
			return
		}
		led := map[int32]int{}
		for _, l := range s.leaders {
			led[l]++
		}
		var parts []string
		for _, b := range ev.Brokers {
			parts = append(parts, fmt.Sprintf("broker %d led %d", b, led[b]))
		}
		fr.RespreadNote += fmt.Sprintf("; then %s of a share of %d", strings.Join(parts, ", "), len(s.leaders)/len(s.brokers))
	}
	// The partitions given to the returned brokers from the return to the spread (or
	// the end of the look): the balancer's moves.
	before, _ := w.latest(back.Add(-time.Nanosecond)) // the last sample before the return
	returned := map[int32]bool{}
	for _, b := range ev.Brokers {
		returned[b] = true
	}
	var waits []time.Duration
	for p, leader := range s.leaders {
		if returned[leader] && before.leaders[p] != leader {
			waits = append(waits, longestWaitSent(l.acks[p], l.ackWaits[p], back, s.at.Add(time.Second)))
		}
	}
	fr.BalancerMoved = len(waits)
	if len(waits) > 0 {
		q := quantiles(waits)
		fr.BalancerWait = &q
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
