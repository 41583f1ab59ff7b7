package controller

import (
	"fmt"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// completeMovesCmd hands many partitions from one leader to their moves' targets (the
// batched form of completeMoveCmd, with MoveGen and FromEpoch required): one Raft entry
// for every hand-off a leader finished at about the same time, instead of one each, so
// that the last of 100 moves requested at once does not wait for the 99 entries before
// it. Each item is judged alone, exactly as completeMoveCmd judges it; the value is one
// error (nil: handed off) per item, in order.
type completeMovesCmd struct {
	From      int32                  `json:"from"`
	FromEpoch int64                  `json:"from_epoch"`
	Items     []ctlwire.MoveDoneItem `json:"items"`
}

func (*completeMovesCmd) kind() cmdType { return cmdCompleteMoves }

func (c *completeMovesCmd) apply(m *machine) (any, bool, error) {
	if b, ok := m.st.Brokers[c.From]; !ok || b.Epoch != c.FromEpoch || !b.Active() {
		return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.From, c.FromEpoch)
	}
	errs := make([]error, len(c.Items))
	tc := newTopicClones(m) // one clone per topic, as for recoveries
	for i, it := range c.Items {
		if it.MoveGen == 0 {
			errs[i] = fmt.Errorf("%w: a batched completion names its move", metadata.ErrMoveRefused)
			continue
		}
		t, p, err := tc.partition(it.TopicID, it.Partition)
		if err == nil {
			err = completeMoveOf(m, t.Name, p, c.From, it.EndOffset, it.MoveGen)
		}
		if errs[i] = err; err == nil {
			tc.changedTopic(it.TopicID)
		}
	}
	return errs, tc.put(), nil
}
