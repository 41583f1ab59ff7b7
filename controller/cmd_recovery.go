package controller

import (
	"fmt"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// completeRecoveriesCmd ends the recoveries of many partitions one leader took over
// (the batched form of completeRecoveryCmd): one Raft entry for every partition a
// failover gave the broker, instead of one per partition, so the last partition of a
// large failover is served as soon as the first. Each item is judged alone, exactly as
// completeRecoveryCmd judges it; the value is one error (nil: completed or a retry of
// this very completion) per item, in order.
type completeRecoveriesCmd struct {
	Leader      int32                      `json:"leader"`
	BrokerEpoch int64                      `json:"broker_epoch"`
	Items       []ctlwire.RecoveryDoneItem `json:"items"`
}

func (*completeRecoveriesCmd) kind() cmdType { return cmdCompleteRecoveries }

func (c *completeRecoveriesCmd) apply(m *machine) (any, bool, error) {
	if b, ok := m.st.Brokers[c.Leader]; !ok || b.Epoch != c.BrokerEpoch || !b.Active() {
		return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.Leader, c.BrokerEpoch)
	}
	out := recoveriesResult{Errs: make([]error, len(c.Items)), Done: make([]bool, len(c.Items))}
	tc := newTopicClones(m)
	for i, it := range c.Items {
		t, p, err := tc.partition(it.TopicID, it.Partition)
		if err == nil {
			out.Done[i], err = completeRecoveryOf(t.Name, p, c.Leader, it.LeaderEpoch, it.EndOffset)
		}
		out.Errs[i] = err
		if out.Done[i] {
			tc.changedTopic(it.TopicID)
		}
	}
	return out, tc.put(), nil
}

// recoveriesResult is a completeRecoveriesCmd's value: per item its error, and whether
// this command completed it (false for a retry or an error).
type recoveriesResult struct {
	Errs []error
	Done []bool
}
