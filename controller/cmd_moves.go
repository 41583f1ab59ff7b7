package controller

import (
	"fmt"

	"github.com/weir-io/weir/metadata"
)

// beginMoveCmd marks a partition as moving to Target, an accepting broker (active, not
// draining) other than the leader. Asking again for the same target changes nothing; another target while a move
// is pending is refused (cancel it first), and so is a partition still Recovering (its
// leader must complete the recovery first). With Gen (every begin proposed since moves
// have generations) the move's MoveGen is the state version this command produces:
// unique, and equal on every replica. Entries written before leave MoveGen 0, as their
// snapshots hold it.
type beginMoveCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	Target    int32            `json:"target"`
	Gen       bool             `json:"gen,omitempty"`
}

func (*beginMoveCmd) kind() cmdType { return cmdBeginMove }

func (c *beginMoveCmd) apply(m *machine) (any, bool, error) {
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	b, ok := m.st.Brokers[c.Target]
	if !ok || !b.Accepting() {
		return nil, false, fmt.Errorf("%w: target broker %d is not active (or draining)", metadata.ErrMoveRefused, c.Target)
	}
	if p.Moving {
		if p.MovingTo == c.Target {
			return p.MoveGen, false, nil
		}
		return nil, false, fmt.Errorf("%w: %s/%d is already moving to %d", metadata.ErrMoveRefused, t.Name, c.Partition, p.MovingTo)
	}
	if p.Leader == c.Target {
		return nil, false, fmt.Errorf("%w: broker %d already leads %s/%d", metadata.ErrMoveRefused, c.Target, t.Name, c.Partition)
	}
	if p.Recovering {
		return nil, false, fmt.Errorf("%w: %s/%d is recovering from a failover", metadata.ErrMoveRefused, t.Name, c.Partition)
	}
	p.Moving = true
	p.MovingTo = c.Target
	if c.Gen {
		p.MoveGen = m.st.Version + 1 // the version Apply gives the state after this command
	}
	m.putTopic(t)
	return p.MoveGen, true, nil
}

// completeMoveCmd hands a moving partition to its target. Only the current leader (From,
// in its current epoch when FromEpoch is set) may complete, only the pending move (its
// MoveGen, when MoveGen is set: a completion of a cancelled move must not complete a
// later one with an old end offset) and only while the target is accepting (active, not
// draining: draining a broker cancels the moves to it): the target
// leads with the next leader epoch, its log starting at EndOffset.
type completeMoveCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	From      int32            `json:"from"`
	FromEpoch int64            `json:"from_epoch,omitempty"`
	EndOffset int64            `json:"end_offset"`
	MoveGen   uint64           `json:"move_gen,omitempty"`
}

func (*completeMoveCmd) kind() cmdType { return cmdCompleteMove }

func (c *completeMoveCmd) apply(m *machine) (any, bool, error) {
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	if c.FromEpoch != 0 {
		b, ok := m.st.Brokers[c.From]
		if !ok || b.Epoch != c.FromEpoch || !b.Active() {
			return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.From, c.FromEpoch)
		}
	}
	if err := completeMoveOf(m, t.Name, p, c.From, c.EndOffset, c.MoveGen); err != nil {
		return nil, false, err
	}
	m.putTopic(t)
	return p.LeaderEpoch, true, nil
}

// completeMoveOf hands p (of topic name, a modifiable clone) from leader from to its
// move's target at endOffset, for the move moveGen (0: whatever move is pending), or
// says why not (completeMoveCmd has the rules).
func completeMoveOf(m *machine, name string, p *metadata.Partition, from int32, endOffset int64, moveGen uint64) error {
	if !p.Moving {
		return fmt.Errorf("%w: %s/%d is not moving", metadata.ErrMoveRefused, name, p.Index)
	}
	if moveGen != 0 && moveGen != p.MoveGen {
		return fmt.Errorf("%w: %s/%d: move %d is not the pending one (%d)", metadata.ErrMoveRefused, name, p.Index, moveGen, p.MoveGen)
	}
	if p.Leader != from {
		return fmt.Errorf("%w: broker %d does not lead %s/%d (leader %d)", metadata.ErrMoveRefused, from, name, p.Index, p.Leader)
	}
	if b, ok := m.st.Brokers[p.MovingTo]; !ok || !b.Accepting() {
		return fmt.Errorf("%w: target broker %d is not active (or draining)", metadata.ErrMoveRefused, p.MovingTo)
	}
	if n := len(p.Logs); (n > 0 && endOffset < p.Logs[n-1].StartOffset) || endOffset < 0 {
		return fmt.Errorf("%w: end offset %d before the leader's first offset", metadata.ErrInvalidOffset, endOffset)
	}
	p.Leader = p.MovingTo
	p.LeaderEpoch++
	p.Logs = append(p.Logs, metadata.LogRange{Broker: p.MovingTo, StartOffset: endOffset})
	p.Moving = false
	p.MovingTo = -1
	p.MoveGen = 0
	return nil
}

// cancelMoveCmd abandons a pending move; without one it changes nothing.
type cancelMoveCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
}

func (*cancelMoveCmd) kind() cmdType { return cmdCancelMove }

func (c *cancelMoveCmd) apply(m *machine) (any, bool, error) {
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	if !p.Moving {
		return nil, false, nil
	}
	p.Moving = false
	p.MovingTo = -1
	p.MoveGen = 0
	m.putTopic(t)
	return nil, true, nil
}

// completeRecoveryCmd ends the recovery of a partition its leader took over from a
// fenced broker (metadata.ApplyRecovery): only the leader (Leader, in its current
// registration epoch BrokerEpoch) in the takeover's leader epoch (LeaderEpoch) may
// complete, with an end offset at or after the recovered range's start; {Leader,
// EndOffset} joins the log chain and the partition is no longer Recovering. The same
// completion again succeeds without a change (a retry whose answer was lost). The value
// reports whether this command completed it (false for such a retry).
type completeRecoveryCmd struct {
	TopicID     metadata.TopicID `json:"topic_id"`
	Partition   int32            `json:"partition"`
	Leader      int32            `json:"leader"`
	BrokerEpoch int64            `json:"broker_epoch"`
	LeaderEpoch int32            `json:"leader_epoch"`
	EndOffset   int64            `json:"end_offset"`
}

func (*completeRecoveryCmd) kind() cmdType { return cmdCompleteRecovery }

func (c *completeRecoveryCmd) apply(m *machine) (any, bool, error) {
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	if b, ok := m.st.Brokers[c.Leader]; !ok || b.Epoch != c.BrokerEpoch || !b.Active() {
		return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.Leader, c.BrokerEpoch)
	}
	done, err := completeRecoveryOf(t.Name, p, c.Leader, c.LeaderEpoch, c.EndOffset)
	if err != nil || !done {
		return done, false, err
	}
	m.putTopic(t)
	return true, true, nil
}

// completeRecoveryOf completes the recovery of p (of topic name, a modifiable clone) by
// leader in leaderEpoch at endOffset: true if it changed p, false for a retry of this
// very completion.
func completeRecoveryOf(name string, p *metadata.Partition, leader, leaderEpoch int32, endOffset int64) (bool, error) {
	if metadata.RecoveryDone(*p, leader, leaderEpoch, endOffset) {
		return false, nil
	}
	np, err := metadata.ApplyRecovery(name, *p, leader, leaderEpoch, endOffset)
	if err != nil {
		return false, err
	}
	*p = np
	return true, nil
}
