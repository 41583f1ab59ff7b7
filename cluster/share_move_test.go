package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/internal/testutil"
)

// startShareCluster starts three brokers serving share groups with short locks and
// heartbeats, the balancer off; more change the brokers' config after that.
func startShareCluster(t *testing.T, more ...func(*broker.Config)) *Cluster {
	return startCluster(t, func(cfg *Config) {
		cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
		own := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			own(b)
			b.Share.Enabled = true
			b.Share.AutoOffsetReset = "earliest"
			b.Share.LockDuration = 3 * time.Second
			b.Share.HeartbeatInterval = 250 * time.Millisecond
			b.Share.StatePartitions = 3
			for _, f := range more {
				f(b)
			}
		}
	})
}

// describeShare returns group's ShareGroupDescribe answer (routed to its coordinator).
func describeShare(t *testing.T, cl *kgo.Client, group string) (kmsg.ShareGroupDescribeResponseGroup, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
	switch {
	case err != nil:
		return kmsg.ShareGroupDescribeResponseGroup{}, err
	case len(resp.Groups) != 1:
		return kmsg.ShareGroupDescribeResponseGroup{}, fmt.Errorf("%d groups described", len(resp.Groups))
	case resp.Groups[0].ErrorCode != 0:
		return resp.Groups[0], fmt.Errorf("describing %s: code %d", group, resp.Groups[0].ErrorCode)
	}
	return resp.Groups[0], nil
}

// memberEpochs is a described share group's member ID → member epoch.
func memberEpochs(g kmsg.ShareGroupDescribeResponseGroup) map[string]int32 {
	out := map[string]int32{}
	for _, m := range g.Members {
		out[m.MemberID] = m.MemberEpoch
	}
	return out
}

// Issue 26, share groups: a graceful move of a share group's coordinator (its
// __consumer_offsets partition) keeps its membership: the new coordinator knows both
// franz-go share consumers at their member epochs and the group at its epoch (none was
// told UNKNOWN_MEMBER_ID and rejoined, which would restart the epochs), consumption goes
// on, and no record is delivered twice.
func TestShareGroupMembersSurviveCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startShareCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "squeue", "sg-move"
	if err := createTopic(t, adm, 3, topic); err != nil {
		t.Fatal(err)
	}
	// A member that joins and leaves first: the group's epoch is then well above what a
	// group rebuilt by rejoining members would reach.
	testutil.Eventually(t, 30*time.Second, "the warm-up member joins", func() bool {
		resp, err := shareHeartbeat(t, raw, group, "warm", topic, 0)
		return err == nil && resp.ErrorCode == 0
	})
	if resp, err := shareHeartbeat(t, raw, group, "warm", topic, -1); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("the warm-up member leaving: %v %+v", err, resp)
	}

	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := produceValues(t, prod, topic, 3, 40, "a")
	s := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	startShareConsumer(t, c, "c1", group, topic, s)
	startShareConsumer(t, c, "c2", group, topic, s)
	testutil.Eventually(t, 90*time.Second, "every record read before the move", func() bool {
		n, _ := s.n()
		return n == len(produced)
	})
	var before kmsg.ShareGroupDescribeResponseGroup
	testutil.EventuallyNoError(t, 30*time.Second, "two members at the group's assignment epoch", func() error {
		g, err := describeShare(t, raw, group)
		if err != nil {
			return err
		}
		if len(g.Members) != 2 {
			return fmt.Errorf("%d members", len(g.Members))
		}
		for _, m := range g.Members {
			if m.MemberEpoch != g.AssignmentEpoch {
				return fmt.Errorf("member %s at epoch %d, assignment epoch %d", m.MemberID, m.MemberEpoch, g.AssignmentEpoch)
			}
		}
		before = g
		return nil
	})

	from := findCoordinator(t, adm, group)
	to := from%3 + 1
	moveCoordinator(t, c, adm, group, to)
	more := produceValues(t, prod, topic, 3, 40, "b")
	testutil.Eventually(t, 90*time.Second, "every record read after the move", func() bool {
		n, _ := s.n()
		return n == len(produced)+len(more)
	})
	time.Sleep(2 * time.Second) // why: eight heartbeat intervals, so a member told UNKNOWN_MEMBER_ID would have rejoined by now
	after, err := describeShare(t, raw, group)
	if err != nil {
		t.Fatal(err)
	}
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch {
		t.Errorf("group epoch %d, assignment epoch %d after the move; %d, %d before", after.GroupEpoch, after.AssignmentEpoch, before.GroupEpoch, before.AssignmentEpoch)
	}
	if b, a := memberEpochs(before), memberEpochs(after); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("members after the move %v, before %v", a, b)
	}
	if _, dup := s.n(); dup != 0 {
		t.Errorf("%d records delivered more than once", dup)
	}
}
