package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
)

// shareStart returns DescribeShareGroupOffsets' start offset of group's partition p of
// topic (the group-level error code when there is one).
func shareStart(t *testing.T, cl *kgo.Client, group, topic string, p int32) (int64, int16, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{p}}}
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
	resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
	switch {
	case err != nil:
		return 0, 0, err
	case len(resp.Groups) != 1:
		return 0, 0, fmt.Errorf("%d groups", len(resp.Groups))
	case resp.Groups[0].ErrorCode != 0:
		return 0, resp.Groups[0].ErrorCode, nil
	case len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1:
		return 0, 0, fmt.Errorf("answer %+v", resp.Groups[0])
	}
	pp := resp.Groups[0].Topics[0].Partitions[0]
	return pp.StartOffset, pp.ErrorCode, nil
}

// listedShare returns how ListGroups (sent to every broker by kgo) lists group: its
// type, protocol type and state; ok false when it is not listed.
func listedShare(t *testing.T, cl *kgo.Client, group string, types ...string) (kmsg.ListGroupsResponseGroup, bool) {
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = types
	shards := cl.RequestSharded(ctxFor(t, 10*time.Second), req)
	for _, sh := range shards {
		if sh.Err != nil {
			t.Logf("ListGroups on broker %d: %v", sh.Meta.NodeID, sh.Err)
			continue
		}
		for _, g := range sh.Resp.(*kmsg.ListGroupsResponse).Groups {
			if g.Group == group {
				return g, true
			}
		}
	}
	return kmsg.ListGroupsResponseGroup{}, false
}

// shareHeartbeat sends one ShareGroupHeartbeat of member at epoch.
func shareHeartbeat(t *testing.T, cl *kgo.Client, group, member, topic string, epoch int32) (*kmsg.ShareGroupHeartbeatResponse, error) {
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = group, member, epoch
	if epoch == 0 {
		hb.SubscribedTopicNames = []string{topic}
	}
	return hb.RequestWith(ctxFor(t, 10*time.Second), cl)
}

// Issue 26, share groups: the group admin keys know share groups (ListGroups types them
// "share", DescribeGroups does not describe them, DeleteGroups deletes them with their
// state), and AlterShareGroupOffsets / DeleteShareGroupOffsets reset an empty group's
// share partitions: after an alter to 10, a new consumer gets exactly offsets 10-29 again
// (the leader, which had the state loaded, loads the reset one).
func TestShareGroupAdmin(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startShareCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "sadmin", "sg-admin"
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := produceValues(t, prod, topic, 1, 30, "a")
	s := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	c1 := startShareConsumer(t, c, "c1", group, topic, s)
	testutil.Eventually(t, 60*time.Second, "every record read", func() bool {
		n, _ := s.n()
		return n == len(produced)
	})
	testutil.Eventually(t, 30*time.Second, "start offset 30", func() bool {
		start, code, err := shareStart(t, raw, group, topic, 0)
		return err == nil && code == 0 && start == 30
	})
	c1.Close()

	testutil.Eventually(t, 30*time.Second, "ListGroups lists the share group, Empty", func() bool {
		g, ok := listedShare(t, raw, group)
		return ok && g.GroupType == "share" && g.ProtocolType == "share" && g.GroupState == "Empty"
	})
	if _, ok := listedShare(t, raw, group, "classic", "consumer"); ok {
		t.Error("a share group listed under the types classic and consumer")
	}
	if _, ok := listedShare(t, raw, group, "Share"); !ok {
		t.Error("the share group not listed under the type filter Share")
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{group}
	if resp, err := dg.RequestWith(ctxFor(t, 10*time.Second), raw); err != nil || len(resp.Groups) != 1 || resp.Groups[0].State != "Dead" {
		t.Errorf("DescribeGroups v5 of a share group: %v %+v, want Dead", err, resp)
	}

	alter := func(offset int64) (*kmsg.AlterShareGroupOffsetsResponse, error) {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: offset}, {Partition: 7, StartOffset: 0}}
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{rt}
		return req.RequestWith(ctxFor(t, 10*time.Second), raw)
	}
	// A member in the group: alter and delete are refused.
	if resp, err := shareHeartbeat(t, raw, group, "blocker", topic, 0); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("blocker joining: %v %+v", err, resp)
	}
	if resp, err := alter(10); err != nil || resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("altering a group with a member: %v %+v, want NON_EMPTY_GROUP", err, resp)
	}
	if res, err := adm.DeleteGroup(ctxFor(t, 10*time.Second), group); err == nil && res.Err == nil {
		t.Fatal("deleting a share group with a member succeeded")
	} else if res.Err != nil && res.Err != kerr.NonEmptyGroup {
		t.Fatalf("deleting a share group with a member: %v, want NON_EMPTY_GROUP", res.Err)
	}
	if resp, err := shareHeartbeat(t, raw, group, "blocker", topic, -1); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("blocker leaving: %v %+v", err, resp)
	}

	resp, err := alter(10)
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("altering: %v %+v", err, resp)
	}
	if p := resp.Topics[0].Partitions; p[0].ErrorCode != 0 || p[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("altering partitions 0 and 7: codes %d, %d", p[0].ErrorCode, p[1].ErrorCode)
	}
	if start, code, err := shareStart(t, raw, group, topic, 0); err != nil || code != 0 || start != 10 {
		t.Fatalf("start offset after the alter: %d (code %d, %v), want 10", start, code, err)
	}
	s2 := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	c2 := startShareConsumer(t, c, "c2", group, topic, s2)
	testutil.Eventually(t, 60*time.Second, "offsets 10-29 read again", func() bool {
		n, _ := s2.n()
		return n >= 20
	})
	time.Sleep(time.Second) // why: a record below 10, or one twice, would show by now
	s2.mu.Lock()
	for v, k := range s2.count {
		if off, ok := produced[v]; !ok || off < 10 || k != 1 {
			t.Errorf("after the alter: %s (offset %d) read %d times", v, off, k)
		}
	}
	s2.mu.Unlock()
	if n, _ := s2.n(); n != 20 {
		t.Errorf("%d records read after the alter, want 20", n)
	}
	c2.Close()

	// DeleteShareGroupOffsets: the state is gone (start -1).
	testutil.EventuallyNoError(t, 30*time.Second, "DeleteShareGroupOffsets once c2 has left", func() error {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = group
		req.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: topic}, {Topic: "nope"}}
		resp, err := req.RequestWith(ctxFor(t, 10*time.Second), raw)
		switch {
		case err != nil:
			return err
		case resp.ErrorCode != 0:
			return kerr.ErrorForCode(resp.ErrorCode)
		case len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code:
			t.Fatalf("DeleteShareGroupOffsets: %+v", resp.Topics)
		}
		return nil
	})
	if start, code, err := shareStart(t, raw, group, topic, 0); err != nil || code != 0 || start != -1 {
		t.Fatalf("start offset after DeleteShareGroupOffsets: %d (code %d, %v), want -1", start, code, err)
	}

	// DeleteGroups: the group is gone.
	if res, err := adm.DeleteGroup(ctxFor(t, 10*time.Second), group); err != nil || res.Err != nil {
		t.Fatalf("deleting the empty share group: %v %v", err, res.Err)
	}
	if _, ok := listedShare(t, raw, group); ok {
		t.Error("a deleted share group is listed")
	}
	if _, err := describeShare(t, raw, group); err == nil {
		t.Error("a deleted share group is described")
	}
	if _, code, err := shareStart(t, raw, group, topic, 0); err != nil || code != kerr.GroupIDNotFound.Code {
		t.Errorf("DescribeShareGroupOffsets of a deleted group: code %d, %v; want GROUP_ID_NOT_FOUND", code, err)
	}
}
