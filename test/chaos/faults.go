package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"
)

// Event is one fault as it ran: when, on which brokers, and the steps it took (a rolling
// restart stops each broker in turn).
type Event struct {
	Fault   Fault       `json:"fault"`
	Start   time.Time   `json:"start"`
	End     time.Time   `json:"end"`
	Brokers []int32     `json:"brokers,omitempty"`
	Steps   []EventStep `json:"steps,omitempty"`
	Err     string      `json:"error,omitempty"`
	Note    string      `json:"note,omitempty"` // what the fault did, when more than its brokers
}

// EventStep is one broker hit by a fault, at a time.
type EventStep struct {
	Broker int32     `json:"broker"`
	At     time.Time `json:"at"`
}

// runFaults runs the schedule in time order (a fault starts at its offset or when the
// previous one ended, whichever is later) and returns what ran.
// active holds the fault under way (nil between faults), for the progress lines: a
// fault's Event reaches the run loop only once it has been measured, seconds later.
func runFaults(ctx context.Context, cfg Config, t target, w *watcher, tl *txnLoad, start time.Time, log *slog.Logger, events chan<- Event, active *atomic.Pointer[string]) {
	defer close(events)
	faults := append([]Fault(nil), cfg.Faults...)
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].At < faults[j].At })
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0xfa17))
	for _, f := range faults {
		select {
		case <-time.After(time.Until(start.Add(f.At))):
		case <-ctx.Done():
			return
		}
		now := fmt.Sprintf("%v at %v, under way", f.Kind, time.Since(start).Round(time.Second))
		active.Store(&now)
		ev := runFault(ctx, cfg, t, w, tl, f, r, log)
		active.Store(nil)
		events <- ev
	}
}

// busiest is the broker leading the most partitions of the topic now (a fault on a broker
// that leads nothing, one just restarted say, would test nothing); ties at random.
func busiest(w *watcher, ids []int32, r *rand.Rand) int32 {
	s, ok := w.latest(time.Now())
	if !ok {
		return pick(r, ids, 1)[0]
	}
	count := map[int32]int{}
	for _, l := range s.leaders {
		count[l]++
	}
	best := pick(r, ids, len(ids))
	sort.SliceStable(best, func(i, j int) bool { return count[best[i]] > count[best[j]] })
	return best[0]
}

func pick(r *rand.Rand, ids []int32, n int) []int32 {
	p := append([]int32(nil), ids...)
	r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:min(n, len(p))]
}

func runFault(ctx context.Context, cfg Config, t target, w *watcher, tl *txnLoad, f Fault, r *rand.Rand, log *slog.Logger) Event {
	ev := Event{Fault: f, Start: time.Now()}
	fail := func(err error) Event {
		ev.Err = err.Error()
		ev.End = time.Now()
		log.Error("fault failed", "fault", f, "err", err)
		return ev
	}
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	victim := f.Broker
	if victim == 0 && (f.Kind == Kill || f.Kind == Pause || f.Kind == Isolate || f.Kind == StorageSlow) {
		victim = busiest(w, t.Brokers(), r)
	}
	if f.Kind == CoordinatorKill {
		id, err := findCoordinator(ctx, t.Bootstrap(), cfg.group(), 0)
		if err != nil {
			return fail(err)
		}
		victim = id
		ev.Note = coordinatorNote(cfg, t, id)
	}
	if f.Kind == TxnCoordinatorKill {
		id, err := findCoordinator(ctx, t.Bootstrap(), cfg.txnID(0), 1)
		if err != nil {
			return fail(err)
		}
		victim = id
		ev.Note = fmt.Sprintf("FindCoordinator named broker %d for transactional id %s", id, cfg.txnID(0))
	}
	if f.Kind != TxnLeaderKill && f.Kind != TxnProducerPause { // they log what they chose
		log.Info("fault", "fault", f, "broker", victim)
	}
	switch f.Kind {
	case Kill, CoordinatorKill, TxnCoordinatorKill:
		ev.Brokers = []int32{victim}
		ev.Steps = []EventStep{{victim, time.Now()}}
		if err := t.Kill(victim); err != nil {
			return fail(err)
		}
		wait(cfg.RestartAfter)
		if err := t.Start(victim); err != nil {
			return fail(err)
		}
		if f.Kind == TxnCoordinatorKill && tl != nil {
			ev.Note += "; " + tl.recovered(ctx, 0, ev.Steps[0].At)
		}
	case TxnLeaderKill:
		if err := runTxnLeaderKill(ctx, cfg, t, tl, &ev, wait, log); err != nil {
			return fail(err)
		}
	case TxnProducerPause:
		if err := runTxnProducerPause(ctx, cfg, t, tl, &ev, log); err != nil {
			return fail(err)
		}
	case CoordinatorMove:
		if err := runCoordinatorMove(ctx, cfg, t, f, r, &ev, log); err != nil {
			return fail(err)
		}
	case KillMany:
		ev.Brokers = pick(r, t.Brokers(), f.N)
		for i, b := range ev.Brokers {
			if i > 0 && !wait(time.Second) {
				break
			}
			ev.Steps = append(ev.Steps, EventStep{b, time.Now()})
			if err := t.Kill(b); err != nil {
				return fail(err)
			}
		}
		wait(cfg.RestartAfter)
		for _, b := range ev.Brokers {
			if err := t.Start(b); err != nil {
				return fail(err)
			}
		}
	case Pause:
		ev.Brokers = []int32{victim}
		ev.Steps = []EventStep{{victim, time.Now()}}
		if err := t.Pause(victim); err != nil {
			return fail(err)
		}
		wait(cfg.PauseFor)
		if err := t.Resume(victim); err != nil {
			return fail(err)
		}
	case Isolate:
		ev.Brokers = []int32{victim}
		ev.Steps = []EventStep{{victim, time.Now()}}
		if err := t.Cut(victim); err != nil {
			return fail(err)
		}
		wait(cfg.CutFor)
		if err := t.Heal(victim); err != nil {
			return fail(err)
		}
	case ControllerLeaderKill:
		id, err := t.ControllerLeader()
		if err != nil {
			return fail(err)
		}
		ev.Steps = []EventStep{{-id, time.Now()}} // a controller: negative
		if err := t.KillController(id); err != nil {
			return fail(err)
		}
		wait(cfg.RestartAfter)
		if err := t.StartController(id); err != nil {
			return fail(err)
		}
	case RollingRestart:
		ev.Brokers = append([]int32(nil), t.Brokers()...)
		for _, b := range ev.Brokers {
			ev.Steps = append(ev.Steps, EventStep{b, time.Now()})
			if err := t.Stop(b); err != nil {
				return fail(err)
			}
			if err := t.Start(b); err != nil {
				return fail(err)
			}
			// Let the restarted broker settle before the next goes down, as an operator's
			// rolling restart waits for health between steps.
			if !wait(2 * time.Second) {
				break
			}
		}
	case StorageFreeze, StorageSlow, StorageError:
		if err := runStorageFault(ctx, cfg, t, f, victim, &ev, wait); err != nil {
			return fail(err)
		}
	case ZoneOutage, ZonePartition:
		if err := runZoneFault(cfg, t, w, f, r, &ev, wait, log); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("chaos: unknown fault %q", f.Kind))
	}
	ev.End = time.Now()
	return ev
}
