package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// __share_group_state partitions are loaded when they become Ready here (the load loop
// is woken), not at the loop's safety poll: the first ShareGroupHeartbeat, whose store
// read creates the topic and waits for its partition's load, is answered well within
// shareSafetyPoll. A restarted broker answers its members at once too, with the
// membership it wrote (same member epoch).
func TestShareStateLoadsWhenReady(t *testing.T) {
	dir := t.TempDir()
	on := func(c *Config) {
		c.Share.Enabled = true
		c.Share.StatePartitions = 2
	}
	tb := startBroker(t, dir, on)
	createTopic(t, tb.admin(t), "q", 1, nil)
	heartbeat := func(tb *testBroker, epoch int32) (*kmsg.ShareGroupHeartbeatResponse, time.Duration) {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.MemberEpoch = "g", "m", epoch
		if epoch == 0 {
			hb.SubscribedTopicNames = []string{"q"}
		}
		cl := tb.client(t)
		for tries := 0; ; tries++ {
			start := time.Now()
			resp, err := hb.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			// The group's __consumer_offsets partition loads first: until it has, the
			// broker is not yet the coordinator.
			if c := kerr.ErrorForCode(resp.ErrorCode); (c == kerr.NotCoordinator || c == kerr.CoordinatorNotAvailable) && tries < 100 {
				time.Sleep(20 * time.Millisecond) // why: the coordinator's load is under way
				continue
			}
			return resp, time.Since(start)
		}
	}
	resp, took := heartbeat(tb, 0)
	if resp.ErrorCode != 0 || took >= shareSafetyPoll/2 {
		t.Fatalf("first heartbeat: code %d after %v (the safety poll is %v)", resp.ErrorCode, took, shareSafetyPoll)
	}
	epoch := resp.MemberEpoch
	tb.Close()
	tb = startBroker(t, dir, on)
	resp, took = heartbeat(tb, epoch)
	if resp.ErrorCode != 0 || resp.MemberEpoch != epoch || took >= shareSafetyPoll/2 {
		t.Fatalf("heartbeat after a restart: code %d, epoch %d (was %d) after %v", resp.ErrorCode, resp.MemberEpoch, epoch, took)
	}
}
