package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/weir-io/weir/internal/ackcheck"
)

// Report is the outcome of a run.
type Report struct {
	Duration   Dur     `json:"duration"`
	Partitions int     `json:"partitions"`
	Rate       float64 `json:"rate"`
	Acked      int     `json:"acked"`
	Failed     int     `json:"failed"`
	// Failures counts the failed produces by error (the first 10 kinds).
	Failures map[string]int  `json:"failures,omitempty"`
	Read     int             `json:"read"`
	Faults   []FaultReport   `json:"faults"`
	Timeline []Sample        `json:"timeline"`
	Check    ackcheck.Report `json:"check"`
	// Txn is the transactional mode's check (--txn; txn.go).
	Txn *TxnReport `json:"txn,omitempty"`
	// GroupProtocol is the consumer group's protocol (classic or consumer, KIP-848;
	// empty without a group); Group the KIP-848 group at the end (groupproto.go).
	GroupProtocol string       `json:"group_protocol,omitempty"`
	Group         *GroupReport `json:"group,omitempty"`
	// Compacted is the compacted topic's check (--compacted; compacted.go), Share the
	// share group's (--share; share.go).
	Compacted *CompactedReport `json:"compacted,omitempty"`
	Share     *ShareReport     `json:"share,omitempty"`
	OK        bool             `json:"ok"`
	Baseline  LatencyFigures   `json:"baseline"`
	// Targets are issue 22's figures, each beside its target with pass or fail
	// (targets.go).
	Targets []TargetResult `json:"targets"`
	// BaselineGroupGap is the time between consecutive reads of the consumer group
	// outside faults (after Settle): the floor under every fault's group_pause. It is
	// at least the time between records (1/rate over the whole topic; at a low rate a
	// pause cannot be told from the gaps of the load) plus the fetch round trip.
	BaselineGroupGap Quantiles `json:"baseline_group_gap"`
}

// Sample is one second of the run.
type Sample struct {
	T           float64 `json:"t"` // seconds since the start
	Acked       int     `json:"acked"`
	Failed      int     `json:"failed"`
	AckP99      float64 `json:"ack_p99_ms"`
	E2EP99      float64 `json:"e2e_p99_ms"`
	GroupRead   int     `json:"group_read"`
	Unavailable int     `json:"unavailable"`
}

// LatencyFigures are p99s over a window.
type LatencyFigures struct {
	AckP99 Dur `json:"ack_p99"`
	E2EP99 Dur `json:"e2e_p99"`
}

// FaultReport is what one fault did.
type FaultReport struct {
	Fault     string         `json:"fault"`
	At        Dur            `json:"at"`
	Took      Dur            `json:"took"`
	Brokers   []int32        `json:"brokers,omitempty"`
	Error     string         `json:"error,omitempty"`
	Detection *Dur           `json:"detection,omitempty"`
	NewLeader *Quantiles     `json:"new_leader,omitempty"`
	Unavail   Quantiles      `json:"unavailability"`
	Affected  int            `json:"affected_partitions"`
	Latency   LatencyFigures `json:"latency_after"`
	// GroupPause is the longest time the consumer group read nothing in the fault's
	// window (from its start to 10 s after its end, or the next fault's start), to the
	// millisecond; a pause already under way when the fault began counts from its start
	// (the fault did not cause the rest). Compare with Report.BaselineGroupGap.
	GroupPause Dur `json:"group_pause"`
	// GroupRebalances counts the group's rebalances in the window (see rebalances);
	// GroupGenerationBefore/After are the generation last assigned before the fault
	// and at the window's end (-1: unknown); GroupEvents the members' callbacks.
	GroupRebalances       int                `json:"group_rebalances"`
	GroupGenerationBefore int32              `json:"group_generation_before"`
	GroupGenerationAfter  int32              `json:"group_generation_after"`
	GroupEvents           []GroupEventReport `json:"group_events,omitempty"`
	// GroupEpochChanges (--group-protocol consumer) counts the members' epoch changes
	// in the window: with KIP-848 an epoch moves without a callback when another
	// member's assignment changes (groupproto.go).
	GroupEpochChanges int    `json:"group_epoch_changes,omitempty"`
	Note              string `json:"note,omitempty"`

	// FirstAck: per affected partition, the time from the step that hit its leader (or
	// the controller) to the first ack of a write of it sent at or after the step
	// (issue 22's targets 1 and 2).
	FirstAck *Quantiles `json:"first_ack,omitempty"`
	// WriteWait: per affected partition, the longest a write of it acked in the window
	// waited for its ack: the pause a producer saw (target 3 for graceful moves; the
	// load writes a partition every partitions/rate, so the time between its acks cannot
	// show a pause shorter than that, while a write's wait does).
	WriteWait *Quantiles `json:"write_wait,omitempty"`
	// Returned is when every broker the fault took out was listed in Metadata again,
	// since the fault's start; Respread the time from then to the first Metadata sample
	// with the leaders spread (watch.go, spread: every listed broker leads at least its
	// share less max(1, 10 %)), looked for until the next fault or the end of the run;
	// nil with RespreadNote saying why (never spread in that time: RespreadAtLeast is
	// that time; or no return).
	Returned        *Dur   `json:"returned,omitempty"`
	Respread        *Dur   `json:"respread,omitempty"`
	RespreadAtLeast *Dur   `json:"respread_at_least,omitempty"`
	RespreadNote    string `json:"respread_note,omitempty"`
	// BalancerMoved counts the partitions given to the returned brokers between their
	// return and the spread, or the end of the look (the balancer's moves);
	// BalancerWait is, per such partition, the longest wait of a write of it sent in
	// that time (plus a second).
	BalancerMoved int        `json:"balancer_moved,omitempty"`
	BalancerWait  *Quantiles `json:"balancer_write_wait,omitempty"`
}

// GroupEventReport is one rebalance callback of a group member.
type GroupEventReport struct {
	At         Dur    `json:"at"` // since the start of the run
	Member     int    `json:"member"`
	Kind       string `json:"kind"` // assigned, revoked, lost, error
	Partitions int    `json:"partitions"`
	Generation int32  `json:"generation"`
	Err        string `json:"err,omitempty"` // kind error: why the member left its session
}

// maxGroupEvents bounds GroupEvents per fault (a group thrashing would fill the report).
const maxGroupEvents = 30

// Dur is a duration that prints as text.
type Dur time.Duration

func (d Dur) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads what MarshalJSON wrote (a report read back to draw it again).
func (d *Dur) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Dur(v)
	return err
}
func (d Dur) String() string { return time.Duration(d).Round(time.Millisecond).String() }

// Quantiles of durations.
type Quantiles struct {
	N   int `json:"n"`
	P50 Dur `json:"p50"`
	P99 Dur `json:"p99"`
	Max Dur `json:"max"`
}

func (q Quantiles) String() string {
	if q.N == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %v p99 %v max %v (%d)", q.P50, q.P99, q.Max, q.N)
}

func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return Quantiles{N: len(s), P50: Dur(at(0.5)), P99: Dur(at(0.99)), Max: Dur(s[len(s)-1])}
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(0.99*float64(len(s))))]
}

// analyze turns the load's samples, the metadata watch and the events into a report.
func analyze(cfg Config, l *load, w *watcher, events []Event, end time.Time) *Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &Report{Duration: Dur(end.Sub(l.start)), Partitions: cfg.Partitions, Rate: cfg.Rate}
	if cfg.Members > 0 {
		r.GroupProtocol = cfg.groupProtocol()
	}
	// A partition counts as unavailable in a second when its last ack is older than four
	// times the usual interval between its records (at least one second).
	gapLimit := max(time.Second, 4*time.Duration(float64(time.Second)*float64(cfg.Partitions)/cfg.Rate))
	idx := map[int32]int{}
	for i, s := range l.seconds {
		at := l.start.Add(time.Duration(i+1) * time.Second)
		if at.After(end) {
			break // the last, partial second: the load stopped in it
		}
		unavail := 0
		for p := int32(0); p < int32(cfg.Partitions); p++ {
			ts := l.acks[p]
			j := idx[p]
			for j < len(ts) && !ts[j].After(at) {
				j++
			}
			idx[p] = j
			if at.Sub(l.start) < gapLimit {
				continue
			}
			if j == 0 || at.Sub(ts[j-1]) > gapLimit {
				unavail++
			}
		}
		r.Timeline = append(r.Timeline, Sample{T: float64(i + 1), Acked: s.acked, Failed: s.failed,
			AckP99: ms(p99(s.ackLat)), E2EP99: ms(p99(s.e2eLat)), GroupRead: s.groupRead, Unavailable: unavail})
	}
	for _, s := range l.seconds {
		r.Acked += s.acked
		r.Failed += s.failed
		r.Failures = l.failures
	}
	var base, baseE2E []time.Duration
	for i, s := range l.seconds {
		at := l.start.Add(time.Duration(i) * time.Second)
		if at.Sub(l.start) < cfg.Settle || at.After(end) || inAnyFault(events, at) {
			continue // start-up (the group joining, catching up) and faults are not the baseline
		}
		base = append(base, s.ackLat...)
		baseE2E = append(baseE2E, s.e2eLat...)
	}
	r.Baseline = LatencyFigures{AckP99: Dur(p99(base)), E2EP99: Dur(p99(baseE2E))}
	// Members append reads and callbacks under the lock but stamp them before taking
	// it: sort.
	reads := append([]time.Time(nil), l.groupReads...)
	sort.Slice(reads, func(i, j int) bool { return reads[i].Before(reads[j]) })
	gevs := append([]groupEvent(nil), l.groupEvents...)
	sort.SliceStable(gevs, func(i, j int) bool { return gevs[i].At.Before(gevs[j].At) })
	r.BaselineGroupGap = quantiles(baselineGaps(reads, l.start.Add(cfg.Settle), end, events))
	for i, ev := range events {
		// A fault's effects are measured until 10 s after it ended, or until the next
		// fault began, so one fault's outage is not counted for another.
		until := ev.End.Add(10 * time.Second)
		if i+1 < len(events) && events[i+1].Start.Before(until) {
			until = events[i+1].Start
		}
		until = minTime(until, end)
		// The spread after a return is looked for until the next fault or the end.
		next := end
		if i+1 < len(events) && events[i+1].Start.Before(next) {
			next = events[i+1].Start
		}
		fr := analyzeFault(cfg, l, w, ev, until)
		respread(&fr, l, w, ev, next)
		if cfg.Members > 0 {
			fr.GroupPause = Dur(longestQuiet(reads, ev.Start, until))
			fr.GroupRebalances = rebalances(gevs, ev.Start, until)
			fr.GroupGenerationBefore, fr.GroupGenerationAfter = generation(gevs, ev.Start), generation(gevs, until)
			fr.GroupEpochChanges = epochChanges(gevs, ev.Start, until)
			for _, e := range gevs {
				if !e.At.Before(ev.Start) && !e.At.After(until) && len(fr.GroupEvents) < maxGroupEvents {
					fr.GroupEvents = append(fr.GroupEvents, GroupEventReport{At: Dur(e.At.Sub(l.start)), Member: e.Member,
						Kind: e.Kind, Partitions: e.Partitions, Generation: e.Generation, Err: e.Err})
				}
			}
		}
		r.Faults = append(r.Faults, fr)
	}
	r.Targets = targets(r)
	return r
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// inAnyFault reports whether t lies in a fault or the 10 s after it.
func inAnyFault(events []Event, t time.Time) bool {
	for _, ev := range events {
		if !t.Before(ev.Start.Add(-time.Second)) && t.Before(ev.End.Add(10*time.Second)) {
			return true
		}
	}
	return false
}

// maxGap is the longest time between consecutive acks of a partition in [from, to], the
// time from the last ack before from counting too (a partition unwritable across the
// fault shows it whole).
func maxGap(ts []time.Time, from, to time.Time) time.Duration {
	var gap time.Duration
	prev := from
	for _, t := range ts {
		if t.Before(from) {
			prev = t
			continue
		}
		if t.After(to) {
			break // the window ends first
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, to.Sub(prev))
}

// longestQuiet is the longest time in [from, to] without one of ts (sorted); a quiet
// time under way at from counts from from.
func longestQuiet(ts []time.Time, from, to time.Time) time.Duration {
	i := sort.Search(len(ts), func(i int) bool { return !ts[i].Before(from) })
	return maxGap(ts[i:], from, to)
}

// baselineGaps are the times between consecutive group reads in [from, to] whose span
// overlaps no fault (from a second before its start to 10 s after its end).
func baselineGaps(reads []time.Time, from, to time.Time, events []Event) []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(reads); i++ {
		a, b := reads[i-1], reads[i]
		if a.Before(from) || b.After(to) {
			continue
		}
		quiet := true
		for _, ev := range events {
			if a.Before(ev.End.Add(10*time.Second)) && b.After(ev.Start.Add(-time.Second)) {
				quiet = false
				break
			}
		}
		if quiet {
			gaps = append(gaps, b.Sub(a))
		}
	}
	return gaps
}

// rebalances counts the group's rebalances among the members' callbacks in [from, to]
// (evs in time order). Each member sees a rebalance: an assignment that is not its first
// (franz-go calls OnPartitionsAssigned at the end of every join and sync, even with
// nothing new), or partitions revoked or lost. One rebalance of the group is one new
// generation, which every member sees: the count is the number of generations assigned
// (but as a member's first) in the window, plus one when partitions were revoked or lost
// after the last of those assignments (a rebalance the window ends in).
func rebalances(evs []groupEvent, from, to time.Time) int {
	gens := map[int32]bool{}
	unfinished := false
	for _, e := range evs {
		if e.At.Before(from) || e.At.After(to) {
			continue
		}
		switch e.Kind {
		case "assigned":
			if !e.First {
				gens[e.Generation] = true
			}
			unfinished = false
		case "revoked", "lost":
			if e.Partitions > 0 {
				unfinished = true
			}
		}
	}
	n := len(gens)
	if unfinished {
		n++
	}
	return n
}

// generation is the generation last assigned to a member at or before t (-1: none yet);
// with KIP-848, the member epoch last seen (assigned, or an "epoch" event).
func generation(evs []groupEvent, t time.Time) int32 {
	g := int32(-1)
	for _, e := range evs {
		if e.At.After(t) {
			break
		}
		if e.Kind == "assigned" || e.Kind == "epoch" {
			g = e.Generation
		}
	}
	return g
}

func analyzeFault(cfg Config, l *load, w *watcher, ev Event, window time.Time) FaultReport {
	fr := FaultReport{Fault: ev.Fault.String(), At: Dur(ev.Start.Sub(l.start)), Took: Dur(ev.End.Sub(ev.Start)), Brokers: ev.Brokers, Error: ev.Err, Note: ev.Note}
	affected := map[int32]bool{}
	hit := map[int32]time.Time{} // partition → the first step that hit it
	mark := func(p int32, at time.Time) {
		affected[p] = true
		if _, ok := hit[p]; !ok {
			hit[p] = at
		}
	}
	var detect []time.Duration
	var newLeader []time.Duration
	for _, st := range ev.Steps {
		if st.Broker < 0 { // a controller: every partition may notice
			for p := int32(0); p < int32(cfg.Partitions); p++ {
				mark(p, st.At)
			}
			continue
		}
		s, ok := w.latest(st.At)
		if !ok {
			continue
		}
		for p, leader := range s.leaders {
			if leader == st.Broker {
				mark(p, st.At)
				if at, ok := w.newLeader(p, st.Broker, st.At); ok {
					newLeader = append(newLeader, at.Sub(st.At))
				}
			}
		}
		if ev.Fault.Kind != RollingRestart {
			if at, ok := w.brokerGone(st.Broker, st.At); ok {
				detect = append(detect, at.Sub(st.At))
			}
		}
	}
	if len(detect) > 0 {
		d := Dur(detect[0])
		fr.Detection = &d
	}
	if len(newLeader) > 0 {
		q := quantiles(newLeader)
		fr.NewLeader = &q
	}
	var gaps []time.Duration
	for p := range affected {
		gaps = append(gaps, maxGap(l.acks[p], ev.Start.Add(-time.Second), window))
	}
	fr.Affected = len(affected)
	fr.Unavail = quantiles(gaps)
	var first, waits []time.Duration
	for p, at := range hit {
		first = append(first, firstAck(l.acks[p], l.ackWaits[p], at, window))
		waits = append(waits, longestWait(l.acks[p], l.ackWaits[p], at, window))
	}
	if len(first) > 0 {
		q, wq := quantiles(first), quantiles(waits)
		fr.FirstAck, fr.WriteWait = &q, &wq
	}
	var lat, e2e []time.Duration
	for i, s := range l.seconds {
		at := l.start.Add(time.Duration(i) * time.Second)
		if at.Before(ev.Start) || at.After(window) {
			continue
		}
		lat = append(lat, s.ackLat...)
		e2e = append(e2e, s.e2eLat...)
	}
	fr.Latency = LatencyFigures{AckP99: Dur(p99(lat)), E2EP99: Dur(p99(e2e))}
	return fr // the group's figures: analyze
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nweir chaos: %v, %d partitions at %.0f records/s: %d acked, %d failed, %d read\n",
		r.Duration, r.Partitions, r.Rate, r.Acked, r.Failed, r.Read)
	for e, n := range r.Failures {
		fmt.Fprintf(w, "  failed produces: %d × %s\n", n, e)
	}
	fmt.Fprintf(w, "baseline (outside faults): ack p99 %v, end-to-end p99 %v\n", r.Baseline.AckP99, r.Baseline.E2EP99)
	if r.BaselineGroupGap.N > 0 {
		fmt.Fprintf(w, "baseline time between consumer group reads: %v (a group pause is no shorter; records come every %v)\n",
			r.BaselineGroupGap, Dur(time.Duration(float64(time.Second)/r.Rate)))
	}
	for _, f := range r.Faults {
		fmt.Fprintf(w, "\n%s at %v (took %v)", f.Fault, f.At, f.Took)
		if len(f.Brokers) > 0 {
			fmt.Fprintf(w, " on brokers %v", f.Brokers)
		}
		fmt.Fprintln(w)
		if f.Error != "" {
			fmt.Fprintf(w, "  failed: %s\n", f.Error)
		}
		if f.Note != "" {
			fmt.Fprintf(w, "  %s\n", f.Note)
		}
		if f.Detection != nil {
			fmt.Fprintf(w, "  detection (fault → broker fenced, out of Metadata)  %v\n", *f.Detection)
		}
		if f.NewLeader != nil {
			fmt.Fprintf(w, "  new leader (fault → partition led elsewhere)        %v\n", *f.NewLeader)
		}
		fmt.Fprintf(w, "  unavailability of %d partitions (longest time between acks)  %v\n", f.Affected, f.Unavail)
		if f.FirstAck != nil {
			fmt.Fprintf(w, "  first acked write after the fault, per partition        %v\n", *f.FirstAck)
			fmt.Fprintf(w, "  longest wait of a write for its ack, per partition      %v\n", *f.WriteWait)
		}
		switch {
		case f.Respread != nil:
			fmt.Fprintf(w, "  leaders spread again %v after the brokers returned (at %v); %d partitions given back, their longest write wait %v\n",
				*f.Respread, *f.Returned, f.BalancerMoved, orNone(f.BalancerWait))
		case f.RespreadNote != "":
			fmt.Fprintf(w, "  leaders spread again: %s; %d partitions given back meanwhile, their longest write wait %v\n",
				f.RespreadNote, f.BalancerMoved, orNone(f.BalancerWait))
		}
		fmt.Fprintf(w, "  after the fault: ack p99 %v, end-to-end p99 %v\n", f.Latency.AckP99, f.Latency.E2EP99)
		if r.GroupProtocol == "consumer" {
			fmt.Fprintf(w, "  consumer group (KIP-848) paused %v, %d rebalances (member epoch %d → %d), %d member epoch changes\n",
				f.GroupPause, f.GroupRebalances, f.GroupGenerationBefore, f.GroupGenerationAfter, f.GroupEpochChanges)
		} else {
			fmt.Fprintf(w, "  consumer group paused %v, %d rebalances (generation %d → %d)\n", f.GroupPause, f.GroupRebalances, f.GroupGenerationBefore, f.GroupGenerationAfter)
		}
	}
	writeTargets(w, r.Targets)
	fmt.Fprintf(w, "\ncheck: %s\n", r.Check.String())
	if r.Txn != nil {
		fmt.Fprintf(w, "check: %s\n", r.Txn)
	}
	if r.Group != nil {
		fmt.Fprintf(w, "%s\n", r.Group)
	}
	if r.Compacted != nil {
		fmt.Fprintf(w, "check: %s\n", r.Compacted)
	}
	if r.Share != nil {
		fmt.Fprintf(w, "check: %s\n", r.Share)
	}
	if r.OK {
		fmt.Fprintln(w, "verdict: OK — nothing acked was lost, duplicated or changed; the group resumed at its commits")
	} else {
		fmt.Fprintln(w, "verdict: VIOLATIONS")
	}
}

func orNone(q *Quantiles) Quantiles {
	if q == nil {
		return Quantiles{}
	}
	return *q
}
