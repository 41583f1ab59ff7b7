package metadata

import (
	"fmt"
	"slices"
	"sort"
)

// Failover rules, shared by the Raft controller (applied inside its FenceBroker and
// RegisterBroker commands, so a plan is atomic with the fence and survives a change of
// controller leader) and metatest.Store (Fence, RegisterBroker). They are pure functions
// of the metadata: every replica computes the same plan.
//
// When broker X is fenced, every partition X leads gets a new leader among the accepting
// brokers (active, not draining) other than X (PlanFence):
//
//   - if X was moving it gracefully to an active broker, that broker;
//   - otherwise a broker in X's zone (rack) if one is active, else any; among those the
//     one leading the fewest partitions, counting the picks of this plan; ties go to
//     the lowest ID;
//   - no active broker: no leader (-1) until a broker registers (PlanAdopt).
//
// The partition becomes Recovering with the next leader epoch, RecoverEpoch = X's
// epoch, and no pending move. A partition that was already Recovering (X took it over
// and died before completing) keeps its log chain and RecoverEpoch, which describe the
// earlier dead broker, and just gets a new leader and epoch. Moves to X are cancelled.
// The new leader completes the recovery with CompleteRecovery (ApplyRecovery).
//
// When broker X is drained (PlanDrain), every partition X leads that is neither
// Recovering nor moving already starts a graceful move to an accepting broker other
// than X, picked as for a fence (X's zone first, then the fewest partitions led, then the
// lowest ID), counting moves under way at their target; moves to X are cancelled.
// Nothing fails over: X hands each partition off (CompleteMove) as for any move.

// PartitionUpdate is a partition's new metadata decided by a plan.
type PartitionUpdate struct {
	Topic     string
	Partition Partition
}

// PlanFence returns the partition changes of fencing broker fenced (its ID and the
// epoch being fenced): the failover of the partitions it leads and the cancellation of
// moves to it. brokers are all registered brokers; only accepting ones (active, not
// draining) other than fenced are picked. Topics and partitions are visited in order (name, index), so the plan is
// deterministic. The updates carry copies of the log chains; nothing in topics changes.
func PlanFence(brokers []Broker, topics map[string]*Topic, fenced Broker) []PartitionUpdate {
	pk := newFailoverPicker(brokers, topics, fenced.ID)
	var out []PartitionUpdate
	for _, name := range sortedTopicNames(topics) {
		for _, p := range topics[name].Partitions {
			switch {
			case p.Leader == fenced.ID:
				np := p
				np.Logs = slices.Clone(p.Logs)
				if len(np.Logs) == 0 {
					// State written before log chains: the leader wrote everything.
					np.Logs = []LogRange{{Broker: fenced.ID, StartOffset: 0}}
				}
				np.Objects = slices.Clip(p.Objects)
				target := int32(-1)
				if p.Moving && pk.active(p.MovingTo) {
					target = pk.take(p.MovingTo)
				} else {
					target = pk.pick(fenced.Rack)
				}
				if !p.Recovering {
					np.RecoverEpoch = fenced.Epoch
				}
				np.Recovering = true
				np.Leader = target
				np.LeaderEpoch++
				np.Moving, np.MovingTo, np.MoveGen = false, -1, 0
				out = append(out, PartitionUpdate{Topic: name, Partition: np})
			case p.Moving && p.MovingTo == fenced.ID:
				np := p
				np.Logs = slices.Clone(p.Logs)
				np.Objects = slices.Clip(p.Objects)
				np.Moving, np.MovingTo, np.MoveGen = false, -1, 0
				out = append(out, PartitionUpdate{Topic: name, Partition: np})
			}
		}
	}
	return out
}

// DrainCounts sums up a drain plan.
type DrainCounts struct {
	// Moves counts the moves the plan begins; AlreadyMoving the partitions of the
	// drained broker moving to an accepting broker already (left as they are).
	Moves, AlreadyMoving int
	// Recovering counts the partitions the drained broker leads that are still
	// Recovering: they move once recovered (the controller's balancer moves them).
	Recovering int
	// NoTarget counts the partitions left in place for want of an accepting broker.
	NoTarget int
	// MovesCancelled counts the moves to the drained broker that were abandoned.
	MovesCancelled int
}

// PlanDrain returns the partition changes of draining broker drained (see above):
// moves begin with MoveGen moveGen (the state version the plan's command produces),
// moves to drained are cancelled. brokers are all registered brokers; only accepting
// ones other than drained are picked. Topics and partitions are visited in order
// (name, index), so the plan is deterministic. Nothing in topics changes.
func PlanDrain(brokers []Broker, topics map[string]*Topic, drained Broker, moveGen uint64) ([]PartitionUpdate, DrainCounts) {
	pk := newFailoverPicker(brokers, topics, drained.ID)
	// Count moves under way at their target, not their leader.
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Moving && pk.active(p.MovingTo) && p.MovingTo != p.Leader {
				pk.count[p.MovingTo]++
				if pk.active(p.Leader) {
					pk.count[p.Leader]--
				}
			}
		}
	}
	var out []PartitionUpdate
	var n DrainCounts
	for _, name := range sortedTopicNames(topics) {
		for _, p := range topics[name].Partitions {
			switch {
			case p.Leader == drained.ID && p.Recovering:
				n.Recovering++
			case p.Leader == drained.ID && p.Moving && pk.active(p.MovingTo):
				n.AlreadyMoving++
			case p.Leader == drained.ID:
				target := pk.pick(drained.Rack)
				if target < 0 {
					n.NoTarget++
					continue
				}
				np := p
				np.Logs = slices.Clone(p.Logs)
				np.Objects = slices.Clip(p.Objects)
				np.Moving, np.MovingTo, np.MoveGen = true, target, moveGen
				out = append(out, PartitionUpdate{Topic: name, Partition: np})
				n.Moves++
			case p.Moving && p.MovingTo == drained.ID:
				np := p
				np.Logs = slices.Clone(p.Logs)
				np.Objects = slices.Clip(p.Objects)
				np.Moving, np.MovingTo, np.MoveGen = false, -1, 0
				out = append(out, PartitionUpdate{Topic: name, Partition: np})
				n.MovesCancelled++
			}
		}
	}
	return out, n
}

// PlanAdopt returns the partitions broker b takes over when it registers: every
// Recovering partition without a leader (their broker was fenced while no broker was
// active), with the next leader epoch. They stay Recovering: b completes them.
func PlanAdopt(topics map[string]*Topic, b Broker) []PartitionUpdate {
	var out []PartitionUpdate
	for _, name := range sortedTopicNames(topics) {
		for _, p := range topics[name].Partitions {
			if p.Leader >= 0 || !p.Recovering {
				continue
			}
			np := p
			np.Logs = slices.Clone(p.Logs)
			np.Objects = slices.Clip(p.Objects)
			np.Leader = b.ID
			np.LeaderEpoch++
			out = append(out, PartitionUpdate{Topic: name, Partition: np})
		}
	}
	return out
}

// ApplyRecovery returns partition p of topic after leader completed its recovery in
// leaderEpoch at endOffset: {leader, endOffset} appended to the log chain, no longer
// Recovering. Refused with ErrRecoveryRefused when p is not Recovering, leader does
// not lead it or leaderEpoch is not its leader epoch (a completion of an earlier
// takeover), with ErrInvalidOffset when endOffset is negative or before the last
// log range's start. Whether leader's registration is current is the caller's check.
func ApplyRecovery(topic string, p Partition, leader int32, leaderEpoch int32, endOffset int64) (Partition, error) {
	if !p.Recovering {
		return p, fmt.Errorf("%w: %s/%d is not recovering", ErrRecoveryRefused, topic, p.Index)
	}
	if p.Leader != leader {
		return p, fmt.Errorf("%w: broker %d does not lead %s/%d (leader %d)", ErrRecoveryRefused, leader, topic, p.Index, p.Leader)
	}
	if p.LeaderEpoch != leaderEpoch {
		return p, fmt.Errorf("%w: %s/%d is in leader epoch %d, not %d", ErrRecoveryRefused, topic, p.Index, p.LeaderEpoch, leaderEpoch)
	}
	if n := len(p.Logs); endOffset < 0 || (n > 0 && endOffset < p.Logs[n-1].StartOffset) {
		return p, fmt.Errorf("%w: end offset %d before the recovered log range's first offset", ErrInvalidOffset, endOffset)
	}
	np := p
	np.Logs = append(slices.Clone(p.Logs), LogRange{Broker: leader, StartOffset: endOffset})
	np.Objects = slices.Clip(p.Objects)
	np.Recovering, np.RecoverEpoch = false, 0
	return np, nil
}

// RecoveryDone reports whether p shows leader's recovery in leaderEpoch completed at
// endOffset and nothing changed its leadership since: what a retry of a completion whose
// answer was lost finds.
func RecoveryDone(p Partition, leader int32, leaderEpoch int32, endOffset int64) bool {
	n := len(p.Logs)
	return !p.Recovering && p.Leader == leader && p.LeaderEpoch == leaderEpoch &&
		n > 0 && p.Logs[n-1] == (LogRange{Broker: leader, StartOffset: endOffset})
}

// failoverPicker chooses new leaders: accepting brokers (active, not draining) other
// than the fenced or drained one, by zone, then fewest partitions led (its own picks
// counted), then lowest ID.
type failoverPicker struct {
	ids   []int32 // ascending
	rack  map[int32]string
	count map[int32]int
}

func newFailoverPicker(brokers []Broker, topics map[string]*Topic, exclude int32) *failoverPicker {
	pk := &failoverPicker{rack: map[int32]string{}, count: map[int32]int{}}
	for _, b := range brokers {
		if b.Accepting() && b.ID != exclude {
			pk.ids = append(pk.ids, b.ID)
			pk.rack[b.ID] = b.Rack
			pk.count[b.ID] = 0
		}
	}
	slices.Sort(pk.ids)
	for _, t := range topics {
		for _, p := range t.Partitions {
			if _, ok := pk.count[p.Leader]; ok {
				pk.count[p.Leader]++
			}
		}
	}
	return pk
}

func (pk *failoverPicker) active(id int32) bool {
	_, ok := pk.count[id]
	return ok
}

// take counts a pick of id (a move's target).
func (pk *failoverPicker) take(id int32) int32 {
	pk.count[id]++
	return id
}

// pick returns the next leader, preferring zone; -1 when no broker is active.
func (pk *failoverPicker) pick(zone string) int32 {
	best, bestSame := int32(-1), false
	for _, id := range pk.ids {
		same := pk.rack[id] == zone
		switch {
		case best < 0:
		case same != bestSame:
			if !same {
				continue
			}
		case pk.count[id] >= pk.count[best]:
			continue
		}
		best, bestSame = id, same
	}
	if best >= 0 {
		pk.count[best]++
	}
	return best
}

func sortedTopicNames(topics map[string]*Topic) []string {
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
