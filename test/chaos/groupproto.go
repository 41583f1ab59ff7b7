package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer group protocol (--group-protocol). With "consumer" the load's members
// are franz-go clients with kgo.ServerSideBalancer (KIP-848: ConsumerGroupHeartbeat,
// the broker's assignor), checked as the classic ones are: where each partition
// resumed against the group's commits, every acked record read. franz-go's
// GroupMetadata gives the member epoch in place of the generation, and calls
// OnPartitionsAssigned only when a member's assignment changes; a member's epoch also
// moves without one (the group epoch bumped by another member's join or leave), so
// each member's epoch is sampled after every poll and a change recorded as an "epoch"
// event. The report counts both per fault: rebalances (assignments changed, as for
// classic) and epoch changes. At the end ConsumerGroupDescribe must find the group a
// consumer group (a classic one answers GROUP_ID_NOT_FOUND): its epoch is reported.

// consumerProtocol reports whether the group uses KIP-848.
func (c *Config) consumerProtocol() bool { return c.GroupProtocol == "consumer" }

// groupProtocol names the protocol for the report.
func (c *Config) groupProtocol() string {
	if c.consumerProtocol() {
		return "consumer"
	}
	return "classic"
}

// noteEpoch records member m's epoch when it differs from last (the value seen at
// its previous poll) and returns it.
func (l *load) noteEpoch(cl *kgo.Client, m int, last int32, now time.Time) int32 {
	_, epoch := cl.GroupMetadata()
	if epoch == last || epoch <= 0 {
		return last // 0: joining, -1: not in the group; neither is an epoch the group gave
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.groupEvents = append(l.groupEvents, groupEvent{At: now, Member: m, Kind: "epoch", Generation: epoch, First: last <= 0})
	return epoch
}

// epochChanges counts the members' epoch changes in [from, to] (a member's first epoch
// is its join, not a change).
func epochChanges(evs []groupEvent, from, to time.Time) int {
	n := 0
	for _, e := range evs {
		if e.Kind == "epoch" && !e.First && !e.At.Before(from) && !e.At.After(to) {
			n++
		}
	}
	return n
}

// GroupReport is the consumer group as ConsumerGroupDescribe saw it at the end of a
// run with --group-protocol consumer.
type GroupReport struct {
	Protocol string `json:"protocol"`
	// Epoch is the group epoch at the end; AssignmentEpoch the target assignment's.
	Epoch           int32  `json:"epoch"`
	AssignmentEpoch int32  `json:"assignment_epoch"`
	Assignor        string `json:"assignor"`
	// EpochChanges counts every member's epoch changes over the run (not their joins).
	EpochChanges int `json:"epoch_changes"`
}

func (g *GroupReport) String() string {
	return fmt.Sprintf("consumer group (KIP-848): group epoch %d at the end (assignment epoch %d, assignor %s), %d member epoch changes over the run",
		g.Epoch, g.AssignmentEpoch, g.Assignor, g.EpochChanges)
}

// describeConsumerGroup asks ConsumerGroupDescribe for group; an error when the group
// is not a KIP-848 consumer group.
func describeConsumerGroup(ctx context.Context, boot []string, group string) (*GroupReport, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("chaos: ConsumerGroupDescribe %s: %w", group, err)
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("chaos: ConsumerGroupDescribe %s: %d groups in the answer", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, fmt.Errorf("chaos: ConsumerGroupDescribe %s (not a consumer group?): %w", group, err)
	}
	return &GroupReport{Protocol: "consumer", Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch, Assignor: g.AssignorName}, nil
}
