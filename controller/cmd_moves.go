package controller

import (
	"fmt"

	"github.com/weir-io/weir/metadata"
)

// beginMoveCmd marks a partition as moving to Target, an active broker other than the
// leader. Asking again for the same target changes nothing; another target while a move
// is pending is refused (cancel it first).
type beginMoveCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	Target    int32            `json:"target"`
}

func (*beginMoveCmd) kind() cmdType { return cmdBeginMove }

func (c *beginMoveCmd) apply(m *machine) (any, bool, error) {
	t, p, err := m.partitionForUpdate(c.TopicID, c.Partition)
	if err != nil {
		return nil, false, err
	}
	b, ok := m.st.Brokers[c.Target]
	if !ok || !b.Active() {
		return nil, false, fmt.Errorf("%w: target broker %d is not active", metadata.ErrMoveRefused, c.Target)
	}
	if p.Moving {
		if p.MovingTo == c.Target {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%w: %s/%d is already moving to %d", metadata.ErrMoveRefused, t.Name, c.Partition, p.MovingTo)
	}
	if p.Leader == c.Target {
		return nil, false, fmt.Errorf("%w: broker %d already leads %s/%d", metadata.ErrMoveRefused, c.Target, t.Name, c.Partition)
	}
	p.Moving = true
	p.MovingTo = c.Target
	m.putTopic(t)
	return nil, true, nil
}

// completeMoveCmd hands a moving partition to its target. Only the current leader (From,
// in its current epoch when FromEpoch is set) may complete, and only while the target is
// active: the target leads with the next leader epoch, its log starting at EndOffset.
type completeMoveCmd struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	From      int32            `json:"from"`
	FromEpoch int64            `json:"from_epoch,omitempty"`
	EndOffset int64            `json:"end_offset"`
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
	if !p.Moving {
		return nil, false, fmt.Errorf("%w: %s/%d is not moving", metadata.ErrMoveRefused, t.Name, c.Partition)
	}
	if p.Leader != c.From {
		return nil, false, fmt.Errorf("%w: broker %d does not lead %s/%d (leader %d)", metadata.ErrMoveRefused, c.From, t.Name, c.Partition, p.Leader)
	}
	if b, ok := m.st.Brokers[p.MovingTo]; !ok || !b.Active() {
		return nil, false, fmt.Errorf("%w: target broker %d is not active", metadata.ErrMoveRefused, p.MovingTo)
	}
	if n := len(p.Logs); (n > 0 && c.EndOffset < p.Logs[n-1].StartOffset) || c.EndOffset < 0 {
		return nil, false, fmt.Errorf("%w: end offset %d before the leader's first offset", metadata.ErrInvalidOffset, c.EndOffset)
	}
	p.Leader = p.MovingTo
	p.LeaderEpoch++
	p.Logs = append(p.Logs, metadata.LogRange{Broker: p.MovingTo, StartOffset: c.EndOffset})
	p.Moving = false
	p.MovingTo = -1
	m.putTopic(t)
	return p.LeaderEpoch, true, nil
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
	m.putTopic(t)
	return nil, true, nil
}
