package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A coordinator answers NOT_COORDINATOR for groups it does not own and leaves them out of
// ListGroups, so clients re-route after the group's offsets partition moved.
func TestOwnsRoutesForeignGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clock = newFakeClock()
	cfg.Owns = func(g string) bool { return g != "foreign" }
	c := New(cfg, nil, nil)
	defer c.Close()
	call := func(req kmsg.Request) kmsg.Response {
		ch := make(chan kmsg.Response, 1)
		c.Handle(context.Background(), req, func(r kmsg.Response) { ch <- r })
		return <-ch
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "foreign", "m", 1
	if code := call(hb).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat to a foreign group: %v", kerr.ErrorForCode(code))
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.SetVersion(8)
	oc.Group, oc.Generation = "mine", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Offset = 5
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	if code := call(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit to an owned group: %v", kerr.ErrorForCode(code))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"mine", "foreign"}
	if resp := call(dg).(*kmsg.DescribeGroupsResponse); resp.Groups[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("describe with a foreign group: %v", kerr.ErrorForCode(resp.Groups[0].ErrorCode))
	}
	c.Restore("foreign", Offset{Topic: "t", Offset: 1})
	lg := kmsg.NewPtrListGroupsRequest()
	for _, g := range call(lg).(*kmsg.ListGroupsResponse).Groups {
		if g.Group == "foreign" {
			t.Fatal("ListGroups lists a group this coordinator does not own")
		}
	}
}
