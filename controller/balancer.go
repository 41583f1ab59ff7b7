package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// The balancer runs on the Raft leader: every Config.BalanceInterval it plans a few
// graceful moves (planBalance, a pure function of the View, the reported loads and its
// own recent moves) and proposes them with beginMoveCmd, as an admin's move would be.
// The partitions' leaders hand them off (CompleteMove); nothing fails over.
//
// Rules (planBalance):
//
//   - Cost: a partition costs 1 + its reported bytes/s over the mean bytes/s per
//     partition (1 for every partition while nothing is reported), so the costs of all
//     partitions weigh their number and their traffic equally and a hot partition counts
//     more. A moving partition counts at its target.
//   - Throttle: no move starts while BalanceMaxMoves partitions (or more) are moving,
//     whatever moved them (admin, drain, balancer); a round starts at most the rest,
//     or, if that is more, its catch-up up to half a share (the mean count) moving.
//   - Catch-up: a broker it may move to that is short (below the threshold of the
//     mean in partitions counted and in cost alike: one that joined, or returned empty
//     after a failover) is owed partitions up to the mean count (rounded down): the
//     middle of the band, not its edge. The sum over short brokers is the catch-up,
//     which rounds start half a share in flight at a time, the next round as soon as
//     the moves are done (moves under way count at their targets, so a catch-up in
//     flight is not started twice). After the drain moves, catch-up moves come first:
//     to the short broker owed the most, from the most loaded broker with a partition
//     it may move there, the one whose cost is closest to what the broker lacks in cost
//     per partition owed and below the gap; until it is owed nothing or full in cost.
//     A returned broker gets its share in two rounds a hand-off apart (doc.go:
//     Balancer).
//   - Never moved: Recovering partitions (their new leader completes the recovery
//     first), moving ones, and any partition the balancer moved within BalanceCooldown.
//     Never a target: a draining, fenced or silent broker (not heard from within the
//     granted lease).
//   - Drain first: partitions a draining broker still leads (recovered since the drain,
//     or whose drain move was cancelled) move to its zone if an accepting broker is there,
//     else anywhere; the fewest cost, then the lowest ID.
//   - Zones: a zone's fair share of the total cost is proportional to its accepting
//     brokers. Zones are uneven when one is more than max(1, 10%) of its share above or
//     below it; then a partition moves from the most loaded broker of the zone furthest
//     above its share to the least loaded broker of the zone furthest below.
//   - Brokers: otherwise, within each zone, a broker more than max(1, 10%) of the zone's
//     mean above it (or below it) makes a partition move from the zone's most loaded
//     broker to its least loaded one. Zones being even, moves stay within zones.
//   - Each move takes the partition whose cost is closest to half the gap between the
//     two brokers (or zones) and strictly below the gap, so every move lowers the spread;
//     ties go to the first in (topic, index) order. No move goes from broker A to B
//     within BalanceCooldown of one the balancer made from B to A.
//   - Memory: a move it made (cooldown, no move back) counts only while both brokers
//     are the registrations it was made between. A broker fenced or registered anew is
//     a new process that leads nothing of the old one's: its partitions were failed
//     over, not moved by the balancer, and giving it some undoes no move.
//
// The thresholds are the hysteresis: a steady state inside them makes no move (and has
// no catch-up: no broker is short), and with unchanged costs every move strictly lowers
// the sum of squared costs (zones first), so the balancer cannot oscillate. Rates that
// change do change costs; the cooldown then keeps a partition from bouncing.

const (
	// balanceMinExcess and balanceExcessRatio: a broker (or zone) is out of balance when
	// it is more than max(balanceMinExcess, balanceExcessRatio × mean) away from its
	// mean (or share); balanceMinExcess is one idle partition.
	balanceMinExcess   = 1.0
	balanceExcessRatio = 0.10
)

// Reasons of balancer moves (BalanceMove.Reason; the metric's label).
const (
	reasonDrain  = "drain"
	reasonZone   = "zone"
	reasonBroker = "broker"
)

// balanceProposers bounds the BeginMove proposals of a round in flight at once: raft's
// default MaxAppendEntries, the most entries its leader writes in one append.
const balanceProposers = 64

func balanceThreshold(mean float64) float64 { return max(balanceMinExcess, balanceExcessRatio*mean) }

// recentMove is a move the balancer made: the cooldown's memory. fromEpoch and toEpoch
// are the two brokers' registrations then (0: unknown, any registration): the move is
// remembered only while both are still those registrations, active (see planBalance).
type recentMove struct {
	key                partKey
	from, to           int32
	fromEpoch, toEpoch int64
	at                 time.Time
}

// balanceInput is everything a decision depends on.
type balanceInput struct {
	view     *metadata.View
	loads    map[partKey]int64
	recent   []recentMove
	now      time.Time
	maxMoves int
	cooldown time.Duration
	// target, when set, also filters the brokers a move may go to (the leader: those
	// heard from within the granted lease).
	target func(id int32) bool
}

// balancePlan is a decision: the moves to propose, and what it saw.
type balancePlan struct {
	Moves []ctlwire.BalanceMove
	// InFlight counts the partitions moving before the round.
	InFlight int
	// Imbalance is the most loaded accepting broker's cost over the mean, minus 1 (0:
	// even).
	Imbalance float64
	// CatchUp is the round's catch-up allowance: the moves that bring every broker the
	// round may move to within the threshold of its share (0: none below it).
	CatchUp int
	Brokers []ctlwire.BrokerBalance
	// Note says why nothing (more) moves.
	Note string
}

// candidate is a partition the balancer may move.
type candidate struct {
	key  partKey
	id   metadata.TopicID
	cost float64
	from int32
}

type balBroker struct {
	b     metadata.Broker
	cost  float64
	leads int
	// parts counts the partitions in cost (moving ones at their target).
	parts int
	bytes int64
	cands []*candidate
	// cooled and recovering count the partitions it leads that may not move now
	// (idleNote says so).
	cooled, recovering int
}

// planBalance decides one round (see the rules above). Deterministic: the same input
// gives the same plan.
func planBalance(in balanceInput) balancePlan {
	var plan balancePlan
	v := in.view
	bs := map[int32]*balBroker{}
	var ids []int32
	for _, b := range v.Brokers {
		if b.Active() {
			bs[b.ID] = &balBroker{b: b}
			ids = append(ids, b.ID)
		}
	}
	slices.Sort(ids)

	names := make([]string, 0, len(v.Topics))
	var total int64
	parts := 0
	for name, t := range v.Topics {
		names = append(names, name)
		parts += len(t.Partitions)
	}
	sort.Strings(names)
	for k, b := range in.loads {
		if t := v.Topics[k.topic]; t != nil && int(k.partition) < len(t.Partitions) {
			total += b
		}
	}
	ref := 0.0
	if total > 0 && parts > 0 {
		ref = float64(total) / float64(parts)
	}
	cost := func(k partKey) float64 {
		if ref == 0 {
			return 1
		}
		return 1 + float64(in.loads[k])/ref
	}
	cooled := map[partKey]bool{}
	forbidden := map[[2]int32]bool{} // {from, to} pairs that would undo a recent move
	current := func(id int32, epoch int64) bool {
		b, ok := bs[id]
		return ok && (epoch == 0 || b.b.Epoch == epoch)
	}
	for _, r := range in.recent {
		// A move is remembered while both brokers are the registrations it was made
		// between: once one was fenced or registered anew (a restart), giving partitions
		// to the new registration undoes nothing, and a partition moved to the old one
		// was failed over from it, not left by the balancer.
		if in.now.Sub(r.at) < in.cooldown && current(r.from, r.fromEpoch) && current(r.to, r.toEpoch) {
			cooled[r.key] = true
			forbidden[[2]int32{r.to, r.from}] = true
		}
	}

	var evac []*candidate
	for _, name := range names {
		t := v.Topics[name]
		for _, p := range t.Partitions {
			k := partKey{name, p.Index}
			c := cost(k)
			lb := bs[p.Leader]
			if lb != nil {
				lb.leads++
				lb.bytes += in.loads[k]
			}
			switch {
			case p.Moving:
				plan.InFlight++
				if tb := bs[p.MovingTo]; tb != nil && tb.b.Accepting() {
					tb.cost += c
					tb.parts++
				}
			case lb == nil:
				// Leaderless, or led by a fenced broker: the failover plan's business.
			case lb.b.Draining():
				if !p.Recovering {
					evac = append(evac, &candidate{key: k, id: t.ID, cost: c, from: p.Leader})
				}
			default:
				lb.cost += c
				lb.parts++
				switch {
				case p.Recovering:
					lb.recovering++
				case cooled[k]:
					lb.cooled++
				default:
					lb.cands = append(lb.cands, &candidate{key: k, id: t.ID, cost: c, from: p.Leader})
				}
			}
		}
	}

	var accepting []*balBroker
	sum := 0.0
	for _, id := range ids {
		b := bs[id]
		// The state as `weir admin describe` shows it, from the same field.
		plan.Brokers = append(plan.Brokers, ctlwire.BrokerBalance{ID: id, Rack: b.b.Rack, State: ctlwire.StateOf(b.b), Leads: b.leads, Cost: b.cost, BytesPerSec: b.bytes})
		if b.b.Accepting() {
			accepting = append(accepting, b)
			sum += b.cost
		}
	}
	if len(accepting) > 0 && sum > 0 {
		mean := sum / float64(len(accepting))
		for _, b := range accepting {
			plan.Imbalance = max(plan.Imbalance, b.cost/mean-1)
		}
	}

	canTarget := func(b *balBroker) bool {
		return b.b.Accepting() && (in.target == nil || in.target(b.b.ID))
	}
	// Catch-up: a broker a move may go to that is short, below the threshold of the mean
	// in partitions (counted as in cost) and in cost alike, as one that joined or
	// returned empty after a failover is (by about a share), is owed partitions up to
	// the mean count (rounded down): filled to the middle of the hysteresis band, not
	// its edge, so that noise then moves nothing. Counts, not costs, decide who is
	// short: traffic uneven over even counts (and the partitions a hot broker sheds) is
	// corrected at the steady rate.
	owed := map[int32]int{}
	var short []*balBroker
	meanCost := 0.0
	catchUpLimit := 0 // partitions moving at once during a catch-up: half a share
	if len(accepting) > 0 {
		n := 0
		for _, b := range accepting {
			n += b.parts
		}
		mean := float64(n) / float64(len(accepting))
		meanCost = sum / float64(len(accepting))
		catchUpLimit = max(in.maxMoves, int(math.Ceil(mean/2)))
		for _, b := range accepting {
			if !canTarget(b) || mean-float64(b.parts) <= balanceThreshold(mean) || meanCost-b.cost <= balanceThreshold(meanCost) {
				continue
			}
			if k := int(mean) - b.parts; k > 0 {
				owed[b.b.ID] = k
				short = append(short, b)
				plan.CatchUp += k
			}
		}
	}
	// Throttle: BalanceMaxMoves in flight, whatever moved them; but a catch-up may have
	// half a share in flight (the moves under way already count at their targets in it,
	// so none is started twice), the rest in the next rounds, which the loop runs as soon
	// as these moves are done.
	budget := max(in.maxMoves-plan.InFlight, min(plan.CatchUp, catchUpLimit-plan.InFlight))
	if budget <= 0 {
		plan.Note = fmt.Sprintf("%d partitions moving (limit %d)", plan.InFlight, in.maxMoves)
		return plan
	}
	move := func(c *candidate, to *balBroker, reason string) {
		plan.Moves = append(plan.Moves, ctlwire.BalanceMove{Topic: c.key.topic, TopicID: c.id, Partition: c.key.partition, From: c.from, To: to.b.ID, Reason: reason, Cost: c.cost})
		if from := bs[c.from]; from.b.Accepting() {
			from.cost -= c.cost
			from.parts--
			from.cands = slices.DeleteFunc(from.cands, func(x *candidate) bool { return x == c })
		}
		to.cost += c.cost
		to.parts++
		budget--
		forbidden[[2]int32{to.b.ID, c.from}] = true // no move back within the round either
	}

	// Drain first: what draining brokers still lead.
	for _, c := range evac {
		if budget <= 0 {
			break
		}
		var best *balBroker
		bestSame := false
		zone := bs[c.from].b.Rack
		for _, b := range accepting {
			if !canTarget(b) {
				continue
			}
			same := b.b.Rack == zone
			if best == nil || (same && !bestSame) || (same == bestSame && b.cost < best.cost) {
				best, bestSame = b, same
			}
		}
		if best == nil {
			plan.Note = "no broker to move draining brokers' partitions to"
			return plan
		}
		move(c, best, reasonDrain)
	}

	zones := map[string][]*balBroker{}
	var zoneNames []string
	for _, b := range accepting {
		if zones[b.b.Rack] == nil {
			zoneNames = append(zoneNames, b.b.Rack)
		}
		zones[b.b.Rack] = append(zones[b.b.Rack], b)
	}
	sort.Strings(zoneNames)

	// pickNear returns the candidate of src whose cost is closest to want and below gap
	// (ties: the first in (topic, index) order), unless moving src → dst would undo a
	// recent move.
	pickNear := func(src, dst *balBroker, want, gap float64) *candidate {
		if forbidden[[2]int32{src.b.ID, dst.b.ID}] {
			return nil
		}
		var best *candidate
		for _, c := range src.cands {
			if c.cost >= gap {
				continue
			}
			if best == nil || abs(c.cost-want) < abs(best.cost-want) {
				best = c
			}
		}
		return best
	}
	// pick: the candidate closest to half the gap.
	pick := func(src, dst *balBroker, gap float64) *candidate { return pickNear(src, dst, gap/2, gap) }
	// byCost returns bs sorted by descending cost (ties: lower ID first).
	byCost := func(bs []*balBroker) []*balBroker {
		out := slices.Clone(bs)
		sort.SliceStable(out, func(i, j int) bool {
			if out[i].cost != out[j].cost {
				return out[i].cost > out[j].cost
			}
			return out[i].b.ID < out[j].b.ID
		})
		return out
	}
	// targets returns the brokers of bs a move may go to, by ascending cost (ties: lower
	// ID first).
	targets := func(bs []*balBroker) []*balBroker {
		var out []*balBroker
		for _, b := range bs {
			if canTarget(b) {
				out = append(out, b)
			}
		}
		sort.SliceStable(out, func(i, j int) bool {
			if out[i].cost != out[j].cost {
				return out[i].cost < out[j].cost
			}
			return out[i].b.ID < out[j].b.ID
		})
		return out
	}

	// zoneStep makes one move between zones if their totals are uneven: from the zone
	// most above its share to the one most below (the next pairs if those have nothing
	// to move), from its most loaded broker to the least loaded target.
	zoneStep := func() bool {
		if len(zoneNames) < 2 {
			return false
		}
		total := 0.0
		for _, b := range accepting {
			total += b.cost
		}
		type zoneDev struct {
			name       string
			dev, share float64
		}
		var srcs []zoneDev
		for _, z := range zoneNames {
			c := 0.0
			for _, b := range zones[z] {
				c += b.cost
			}
			share := total * float64(len(zones[z])) / float64(len(accepting))
			srcs = append(srcs, zoneDev{z, c - share, share})
		}
		dsts := slices.Clone(srcs)
		sort.SliceStable(srcs, func(i, j int) bool { return srcs[i].dev > srcs[j].dev })
		sort.SliceStable(dsts, func(i, j int) bool { return dsts[i].dev < dsts[j].dev })
		for _, sz := range srcs {
			for _, dz := range dsts {
				if dz.dev >= sz.dev {
					break
				}
				if sz.dev <= balanceThreshold(sz.share) && -dz.dev <= balanceThreshold(dz.share) {
					continue // this pair is even enough
				}
				gap := sz.dev - dz.dev
				for _, from := range byCost(zones[sz.name]) {
					for _, to := range targets(zones[dz.name]) {
						if c := pick(from, to, gap); c != nil {
							move(c, to, reasonZone)
							return true
						}
					}
				}
			}
		}
		return false
	}

	// brokerStep makes one move within a zone whose brokers are uneven, in the zone
	// where the move closes the widest gap.
	brokerStep := func() bool {
		var bestTo *balBroker
		var bestC *candidate
		bestSpread := 0.0
		for _, z := range zoneNames {
			bz := zones[z]
			if len(bz) < 2 {
				continue
			}
			mean := 0.0
			for _, b := range bz {
				mean += b.cost
			}
			mean /= float64(len(bz))
			thr := balanceThreshold(mean)
			tos := targets(bz)
		zone:
			for _, from := range byCost(bz) {
				for _, to := range tos {
					spread := from.cost - to.cost
					if spread <= 0 {
						break // the targets after it cost more still
					}
					if from.cost-mean <= thr && mean-to.cost <= thr {
						continue // this pair is even enough
					}
					if c := pick(from, to, spread); c != nil {
						if bestC == nil || spread > bestSpread {
							bestTo, bestC, bestSpread = to, c, spread
						}
						break zone
					}
				}
			}
		}
		if bestC == nil {
			return false
		}
		move(bestC, bestTo, reasonBroker)
		return true
	}

	// catchUpStep makes one move to the short broker owed the most (ties: the lowest
	// ID): from the most loaded broker that has a partition it may move there, the one
	// whose cost is closest to what the broker still lacks in cost per partition owed
	// (so that count and cost fill together) and below the gap between the two. A short
	// broker full in cost, or that nothing may move to, is owed nothing more.
	catchUpStep := func() bool {
		for {
			var dst *balBroker
			for _, b := range short {
				if owed[b.b.ID] > 0 && (dst == nil || owed[b.b.ID] > owed[dst.b.ID]) {
					dst = b
				}
			}
			if dst == nil {
				return false
			}
			if dst.cost >= meanCost {
				owed[dst.b.ID] = 0
				continue
			}
			want := (meanCost - dst.cost) / float64(owed[dst.b.ID])
			for _, src := range byCost(accepting) {
				gap := src.cost - dst.cost
				if gap <= 0 {
					break
				}
				if c := pickNear(src, dst, want, gap); c != nil {
					reason := reasonBroker
					if src.b.Rack != dst.b.Rack {
						reason = reasonZone
					}
					move(c, dst, reason)
					owed[dst.b.ID]--
					return true
				}
			}
			owed[dst.b.ID] = 0
		}
	}

	for budget > 0 && catchUpStep() {
	}
	for budget > 0 {
		if !zoneStep() && !brokerStep() {
			break
		}
	}
	if len(plan.Moves) == 0 {
		plan.Note = "no active broker"
		if len(accepting) > 0 {
			plan.Note = idleNote(accepting, meanCost, canTarget, in.cooldown)
		}
	}
	return plan
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// balancer is the leader's balancing loop and its memory (recent moves, the last
// decision). Only the balancer goroutine runs rounds; mu guards what Status reads.
type balancer struct {
	c *Controller

	mu        sync.Mutex
	recent    []recentMove
	last      balancePlan
	lastRound time.Time
	total     uint64
	// movingRounds counts the rounds that began a move.
	movingRounds uint64
}

func (b *balancer) loop() {
	c := b.c
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.BalanceInterval)
	defer t.Stop()
	// While a catch-up is under way (a round began part of it), the next round comes as
	// soon as its moves are done, looked at every tenth of an interval, not a whole
	// interval later.
	quick := time.NewTicker(max(c.cfg.BalanceInterval/10, 10*time.Millisecond))
	defer quick.Stop()
	leading, hurry := false, false
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-quick.C:
			if !hurry || movesInFlight(c.fsm.View()) > 0 {
				continue
			}
		}
		if !c.IsLeader() {
			if leading {
				b.forget()
			}
			leading, hurry = false, false
			continue
		}
		if !leading {
			// Newly elected: the first round one interval later, once brokers had time to
			// report their loads and the leases are known.
			leading = true
			b.forget()
			continue
		}
		plan := b.round(time.Now())
		hurry = false
		for _, m := range plan.Moves {
			hurry = hurry || (plan.CatchUp > 0 && m.Error == "")
		}
	}
}

// forget drops the memory of an earlier leadership.
func (b *balancer) forget() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recent, b.last, b.lastRound = nil, balancePlan{}, time.Time{}
}

// round makes one decision and proposes its moves.
func (b *balancer) round(now time.Time) balancePlan {
	c := b.c
	b.mu.Lock()
	b.recent = slices.DeleteFunc(b.recent, func(r recentMove) bool { return now.Sub(r.at) >= c.cfg.BalanceCooldown })
	b.mu.Unlock()
	v, _, plan := b.plan(now)
	// The moves are independent commands: a catch-up's hundreds are proposed side by
	// side, balanceProposers at a time, which Raft's leader gathers into appends of up to
	// MaxAppendEntries (64) entries, one write and fsync each, not one round trip a move.
	errs := make([]error, len(plan.Moves))
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, balanceProposers)
	for i := range plan.Moves {
		m := plan.Moves[i]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, errs[i] = c.propose(&beginMoveCmd{TopicID: m.TopicID, Partition: m.Partition, Target: m.To, Gen: true})
		}()
	}
	wg.Wait()
	epoch := func(id int32) int64 {
		b, _ := v.Broker(id)
		return b.Epoch
	}
	var made []recentMove
	for i := range plan.Moves {
		m := &plan.Moves[i]
		if err := errs[i]; err != nil {
			m.Error = err.Error()
			c.log.Info("balancer: move not begun", "topic", m.Topic, "partition", m.Partition, "from", m.From, "to", m.To, "reason", m.Reason, "err", err)
			continue
		}
		c.metrics.balancerMoves.WithLabelValues(m.Reason).Inc()
		made = append(made, recentMove{key: partKey{m.Topic, m.Partition}, from: m.From, to: m.To,
			fromEpoch: epoch(m.From), toEpoch: epoch(m.To), at: now})
		level := slog.LevelInfo
		if plan.CatchUp > 0 {
			level = slog.LevelDebug // hundreds at once: the catch-up's own line below says it
		}
		c.log.Log(context.Background(), level, "balancer: moving partition", "topic", m.Topic, "partition", m.Partition, "from", m.From, "to", m.To,
			"reason", m.Reason, "cost", m.Cost, "imbalance", plan.Imbalance, "catch_up", plan.CatchUp)
	}
	if plan.CatchUp > 0 {
		c.log.Info("balancer: catch-up begun", "moves", len(made), "catch_up", plan.CatchUp, "moving_before", plan.InFlight,
			"proposing", time.Since(began).Round(time.Millisecond))
	}
	b.mu.Lock()
	b.recent = append(b.recent, made...)
	b.total += uint64(len(made))
	if len(made) > 0 {
		b.movingRounds++
	}
	b.last, b.lastRound = plan, now
	b.mu.Unlock()
	return plan
}

// plan decides a round at now from the current View, the loads and the recent moves
// (those within the cooldown); it proposes nothing.
func (b *balancer) plan(now time.Time) (*metadata.View, map[partKey]int64, balancePlan) {
	c := b.c
	v := c.fsm.View()
	loads := c.loads.snapshot(now)
	b.mu.Lock()
	recent := slices.DeleteFunc(slices.Clone(b.recent), func(r recentMove) bool { return now.Sub(r.at) >= c.cfg.BalanceCooldown })
	b.mu.Unlock()
	lease := c.cfg.GrantedLease()
	return v, loads, planBalance(balanceInput{
		view: v, loads: loads, recent: recent, now: now,
		maxMoves: c.cfg.BalanceMaxMoves, cooldown: c.cfg.BalanceCooldown,
		target: func(id int32) bool {
			br, ok := v.Broker(id)
			if !ok {
				return false
			}
			_, fresh := c.leases.holder(id, br.Epoch, now, lease)
			return fresh
		},
	})
}

// status describes the balancer as this controller runs it. The brokers, the imbalance
// and the decision come from one plan of the current View (what a round would decide
// now; nothing is proposed), so the brokers' states are describe's and the imbalance
// and the decision are read from the same numbers. They were the last round's, up to
// an interval old: a broker drained since showed active beside describe's draining.
func (b *balancer) status() ctlwire.BalancerStatus {
	c := b.c
	now := time.Now()
	v, loads, plan := b.plan(now)
	st := ctlwire.BalancerStatus{
		Enabled: c.cfg.Balance, Controller: c.cfg.NodeID, MaxMoves: c.cfg.BalanceMaxMoves,
		IntervalMs: c.cfg.BalanceInterval.Milliseconds(), CooldownMs: c.cfg.BalanceCooldown.Milliseconds(),
		MovesInFlight: movesInFlight(v), ViewVersion: v.Version,
		Imbalance: plan.Imbalance, Brokers: plan.Brokers, ReportedPartitions: len(loads),
		Decision: describePlan(plan, "a round would begin"),
	}
	if !c.cfg.Balance {
		st.Decision = "off (a round would decide: " + st.Decision + ")"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st.MovesTotal, st.LastRound, st.LastMoves = b.total, b.lastRound, b.last.Moves
	if !b.lastRound.IsZero() {
		st.LastDecision = describePlan(b.last, "began")
	}
	return st
}

// imbalance is the last round's imbalance (0 before the first and on followers).
func (b *balancer) imbalance() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last.Imbalance
}

// describeMoves bounds the moves describePlan names (a catch-up begins hundreds).
const describeMoves = 8

// describePlan summarises a decision in one line; verb says what became of its moves
// ("began").
func describePlan(p balancePlan, verb string) string {
	if len(p.Moves) == 0 {
		return p.Note
	}
	var parts []string
	failed, begun := 0, 0
	for _, m := range p.Moves {
		if m.Error != "" {
			failed++
			continue
		}
		if begun++; len(parts) < describeMoves {
			parts = append(parts, fmt.Sprintf("%s/%d %d→%d (%s)", m.Topic, m.Partition, m.From, m.To, m.Reason))
		}
	}
	if more := begun - len(parts); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	s := fmt.Sprintf("%s %d moves: %s", verb, begun, strings.Join(parts, ", "))
	if p.CatchUp > 0 {
		s += fmt.Sprintf(" (a catch-up of %d)", p.CatchUp)
	}
	if failed > 0 {
		s += fmt.Sprintf("; %d refused", failed)
	}
	return s
}

// movesInFlight counts the partitions of v that are moving.
func movesInFlight(v *metadata.View) int {
	n := 0
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if p.Moving {
				n++
			}
		}
	}
	return n
}
