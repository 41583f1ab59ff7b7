package kafka

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
)

// result is one partition's answer.
type result struct {
	code int16
	msg  string
}

func (r result) String() string {
	if r.code == 0 {
		return "ok"
	}
	return fmt.Sprintf("%s (%s)", kerr.ErrorForCode(r.code), r.msg)
}

func alterReq(version int16, topic string, parts map[int32][]int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.SetVersion(version)
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 1000; p++ { // request order = partition order
		if rs, ok := parts[p]; ok {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p, rs
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// alter asks AlterPartitionReassignments for one partition and returns its answer.
func alter(t *testing.T, s *Server, topic string, p int32, replicas []int32) result {
	t.Helper()
	resp := s.handleAlterPartitionReassignments(context.Background(), alterReq(1, topic, map[int32][]int32{p: replicas}))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != topic || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].Partition != p {
		t.Fatalf("alter %s/%d %v: response %+v", topic, p, replicas, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	r := result{code: sp.ErrorCode}
	if sp.ErrorMessage != nil {
		r.msg = *sp.ErrorMessage
	}
	return r
}

func wantResult(t *testing.T, what string, got result, code int16, msgPart string) {
	t.Helper()
	if got.code != code || !strings.Contains(got.msg, msgPart) {
		t.Fatalf("%s: %v, want %v with a message containing %q", what, got, kerr.ErrorForCode(code), msgPart)
	}
}

func wantCalls(t *testing.T, f *fakeMover, want ...string) {
	t.Helper()
	if got := f.Calls(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("controller calls %q, want %q", got, want)
	}
}

func part(f *fakeMover, p int32) metadata.Partition {
	return f.View().Topics["t"].Partitions[p]
}

// A replica list of one broker other than the leader starts a graceful move to it;
// asking again, or for the leader, calls nothing.
func TestAlterReassignmentMoves(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	wantResult(t, "t/0 to 2", alter(t, s, "t", 0, []int32{2}), 0, "")
	if p := part(f, 0); !p.Moving || p.MovingTo != 2 || p.Leader != 1 {
		t.Fatalf("after the reassignment: %+v", p)
	}
	wantResult(t, "t/0 to 2 again", alter(t, s, "t", 0, []int32{2}), 0, "")
	wantResult(t, "t/1 to its leader 2", alter(t, s, "t", 1, []int32{2}), 0, "")
	wantCalls(t, f, "move t/0 to 2")
	if p := part(f, 1); p.Moving {
		t.Fatalf("t/1 moving after an assignment to its leader: %+v", p)
	}
}

// Replica lists Weir cannot have: none, several (there are no followers), a broker that
// is not registered, a fenced one; an unknown partition. Nothing reaches the controller.
func TestAlterReassignmentInvalidLists(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	if err := f.Fence(4); err != nil { // leads nothing
		t.Fatal(err)
	}
	wantResult(t, "empty list", alter(t, s, "t", 0, []int32{}), kerr.InvalidReplicaAssignment.Code, "empty")
	wantResult(t, "two replicas", alter(t, s, "t", 0, []int32{1, 2}), kerr.InvalidReplicaAssignment.Code, "no followers")
	wantResult(t, "the leader and another", alter(t, s, "t", 0, []int32{2, 1}), kerr.InvalidReplicaAssignment.Code, "exactly one replica")
	wantResult(t, "unregistered broker", alter(t, s, "t", 0, []int32{9}), kerr.InvalidReplicaAssignment.Code, "broker 9 is not registered")
	wantResult(t, "fenced broker", alter(t, s, "t", 0, []int32{4}), kerr.BrokerNotAvailable.Code, "broker 4 is fenced")
	wantResult(t, "unknown partition", alter(t, s, "t", 7, []int32{2}), kerr.UnknownTopicOrPartition.Code, "t/7")
	wantResult(t, "unknown topic", alter(t, s, "nope", 0, []int32{2}), kerr.UnknownTopicOrPartition.Code, "nope/0")
	wantResult(t, "cancel of an unknown topic", alter(t, s, "nope", 0, nil), kerr.UnknownTopicOrPartition.Code, "")
	wantCalls(t, f)
}

// The decisions that need broker states metatest does not make (draining), on
// hand-built Views.
func TestPlanReassignDraining(t *testing.T) {
	topic := &metadata.Topic{Name: "t", Partitions: []metadata.Partition{
		{Index: 0, Leader: 1, MovingTo: -1},
		{Index: 1, Leader: 2, Moving: true, MovingTo: 1},
	}}
	view := metadata.NewView(1, "c", 1, []metadata.Broker{
		{ID: 1, State: metadata.BrokerActive}, {ID: 2, State: metadata.BrokerDraining}, {ID: 3},
	}, map[string]*metadata.Topic{"t": topic})
	for _, c := range []struct {
		what     string
		index    int32
		replicas []int32
		step     reassignStep
		code     int16
		msg      string
	}{
		{"to a draining broker", 0, []int32{2}, stepAnswer, kerr.InvalidReplicaAssignment.Code, "broker 2 is draining"},
		{"to a broker of state \"\" (active)", 0, []int32{3}, stepMove, 0, ""},
		{"cancel a drain's move", 1, nil, stepAnswer, kerr.InvalidReplicaAssignment.Code, "part of the drain"},
		{"keep it on the draining leader", 1, []int32{2}, stepAnswer, kerr.InvalidReplicaAssignment.Code, "broker 2 is draining"},
		{"the drain's own target", 1, []int32{1}, stepAnswer, 0, ""},
		{"another target during the drain", 1, []int32{3}, stepAnswer, kerr.ReassignmentInProgress.Code, "moving to broker 1"},
	} {
		pl := planReassign(view, "t", c.index, c.replicas, true)
		if pl.step != c.step || pl.code != c.code || !strings.Contains(pl.msg, c.msg) {
			t.Errorf("%s: plan %+v, want step %d code %d message with %q", c.what, pl, c.step, c.code, c.msg)
		}
	}
}

// A partition recovering from a failover cannot be moved yet (retriable); its new
// leader is already what an assignment to it asks for.
func TestAlterReassignmentRecovering(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	if err := f.Fence(1); err != nil {
		t.Fatal(err)
	}
	p := part(f, 0)
	if !p.Recovering || p.Leader != 4 {
		t.Fatalf("after the fence: %+v", p)
	}
	r := alter(t, s, "t", 0, []int32{2})
	wantResult(t, "recovering", r, kerr.LeaderNotAvailable.Code, "recovered after a failover")
	if !kerr.ErrorForCode(r.code).(*kerr.Error).Retriable {
		t.Fatalf("%v is not retriable", r)
	}
	wantResult(t, "to the taker", alter(t, s, "t", 0, []int32{4}), 0, "")
	wantCalls(t, f)
	if err := f.CompleteRecovery(context.Background(), f.View().Topics["t"].ID, 0, p.LeaderEpoch, 0); err != nil {
		t.Fatal(err)
	}
	wantResult(t, "recovered", alter(t, s, "t", 0, []int32{2}), 0, "")
	wantCalls(t, f, "move t/0 to 2")
}

// Another target while a move is pending is refused; the leader itself replaces the
// pending move (cancels it); a null list cancels it, and without one says so.
func TestAlterReassignmentPendingMove(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	wantResult(t, "cancel with none pending", alter(t, s, "t", 0, nil), kerr.NoReassignmentInProgress.Code, "no reassignment in progress")
	wantResult(t, "t/0 to 2", alter(t, s, "t", 0, []int32{2}), 0, "")
	wantResult(t, "t/0 to 3 meanwhile", alter(t, s, "t", 0, []int32{3}), kerr.ReassignmentInProgress.Code, "moving to broker 2")
	wantResult(t, "t/0 back to its leader", alter(t, s, "t", 0, []int32{1}), 0, "")
	if p := part(f, 0); p.Moving || p.Leader != 1 {
		t.Fatalf("after the assignment to the leader: %+v", p)
	}
	wantResult(t, "t/0 to 3", alter(t, s, "t", 0, []int32{3}), 0, "")
	wantResult(t, "cancel", alter(t, s, "t", 0, nil), 0, "")
	if p := part(f, 0); p.Moving || p.Leader != 1 {
		t.Fatalf("after the cancel: %+v", p)
	}
	wantResult(t, "cancel again", alter(t, s, "t", 0, nil), kerr.NoReassignmentInProgress.Code, "")
	wantCalls(t, f, "move t/0 to 2", "cancel t/0", "move t/0 to 3", "cancel t/0")
}

// A hand-off that completes before the cancel arrives: the cancel says there was no
// reassignment left to cancel, and an assignment back to the old leader moves it back.
func TestAlterReassignmentHandoffWinsOverCancel(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	id := f.View().Topics["t"].ID
	complete := func() {
		if err := f.CompleteMoveGen(context.Background(), id, 0, 10, part(f, 0).MoveGen); err != nil {
			t.Error(err)
		}
	}
	f.onCancel = complete
	wantResult(t, "t/0 to 2", alter(t, s, "t", 0, []int32{2}), 0, "")
	wantResult(t, "cancel after the hand-off", alter(t, s, "t", 0, nil), kerr.NoReassignmentInProgress.Code, "completed (broker 2 leads)")
	if p := part(f, 0); p.Leader != 2 || p.Moving {
		t.Fatalf("after the hand-off: %+v", p)
	}

	f.onCancel = nil
	wantResult(t, "t/0 to 3", alter(t, s, "t", 0, []int32{3}), 0, "")
	f.onCancel = func() {
		if err := f.CompleteMoveGen(context.Background(), id, 0, 20, part(f, 0).MoveGen); err != nil {
			t.Error(err)
		}
	}
	wantResult(t, "t/0 back to 2 after the hand-off to 3", alter(t, s, "t", 0, []int32{2}), 0, "")
	if p := part(f, 0); p.Leader != 3 || !p.Moving || p.MovingTo != 2 {
		t.Fatalf("after the assignment back: %+v", p)
	}
	wantCalls(t, f, "move t/0 to 2", "cancel t/0", "move t/0 to 3", "cancel t/0", "move t/0 to 2")
}

// The controller refuses a move: for a reason the View shows once it has caught up (a
// failover began), the answer is judged on it; for one the View never shows, it is
// INVALID_REPLICA_ASSIGNMENT with the controller's reason. Controllers out of reach
// answer NOT_CONTROLLER (retriable), as for the other admin APIs.
func TestAlterReassignmentControllerRefuses(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	f.onMove = func() {
		if err := f.Fence(1); err != nil {
			t.Error(err)
		}
	}
	wantResult(t, "a failover during the move", alter(t, s, "t", 0, []int32{2}), kerr.LeaderNotAvailable.Code, "recovered after a failover")
	wantCalls(t, f, "move t/0 to 2")

	f.onMove = nil
	f.moveErr = fmt.Errorf("%w: for a reason of its own", metadata.ErrMoveRefused)
	wantResult(t, "refused", alter(t, s, "t", 1, []int32{3}), kerr.InvalidReplicaAssignment.Code, "for a reason of its own")
	f.moveErr = fmt.Errorf("%w: no quorum", metadata.ErrNotController)
	wantResult(t, "no controller", alter(t, s, "t", 1, []int32{3}), kerr.NotController.Code, "no quorum")
}

// Many partitions in one request are moved concurrently and answered in request order.
func TestAlterReassignmentManyPartitions(t *testing.T) {
	const n = 50
	f := newFakeMover(t, n, 1, 2, 3)
	s, _ := startServerWith(t, f)
	parts := map[int32][]int32{}
	for p := int32(0); p < n; p++ {
		parts[p] = []int32{3 - p%3} // leader p%3+1: some stay, most move
	}
	parts[n] = []int32{1} // unknown
	resp := s.handleAlterPartitionReassignments(context.Background(), alterReq(0, "t", parts))
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != n+1 {
		t.Fatalf("response %+v", resp)
	}
	for i, sp := range resp.Topics[0].Partitions {
		want := int16(0)
		if i == n {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if sp.Partition != int32(i) || sp.ErrorCode != want {
			t.Fatalf("answer %d: partition %d code %d, want partition %d code %d", i, sp.Partition, sp.ErrorCode, i, want)
		}
	}
	moves := 0
	for p, mp := range f.View().Topics["t"].Partitions {
		target := 3 - int32(p)%3
		if mp.Leader == target && mp.Moving || mp.Leader != target && (!mp.Moving || mp.MovingTo != target) {
			t.Fatalf("partition %d: %+v", p, mp)
		}
		if mp.Moving {
			moves++
		}
	}
	if got := len(f.Calls()); got != moves {
		t.Fatalf("%d controller calls for %d moves", got, moves)
	}
}

// v1's allow_replication_factor_change is echoed; a list that would change the
// replication factor is refused either way (Weir's is always one).
func TestAlterReassignmentV1AllowRFChange(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3)
	s, _ := startServerWith(t, f)
	for _, allow := range []bool{false, true} {
		req := alterReq(1, "t", map[int32][]int32{0: {1, 2}})
		req.AllowReplicationFactorChange = allow
		resp := s.handleAlterPartitionReassignments(context.Background(), req)
		if resp.AllowReplicationFactorChange != allow || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
			t.Fatalf("allow %v: response %+v", allow, resp)
		}
	}
}

// A standalone broker (LocalStore: no controllers) cannot move partitions and says so;
// an assignment to itself is already true, and nothing is ever pending.
func TestReassignmentStandalone(t *testing.T) {
	s, _ := startServer(t) // LocalStore, broker 0, topic "t" of 2 partitions
	if _, ok := s.meta.(partitionMover); ok {
		t.Fatal("LocalStore moves partitions now: this test needs another standalone store")
	}
	wantResult(t, "to itself", alter(t, s, "t", 0, []int32{0}), 0, "")
	wantResult(t, "to another broker", alter(t, s, "t", 0, []int32{1}), kerr.InvalidReplicaAssignment.Code, "standalone")
	wantResult(t, "two replicas", alter(t, s, "t", 0, []int32{0, 1}), kerr.InvalidReplicaAssignment.Code, "no followers")
	wantResult(t, "cancel", alter(t, s, "t", 0, nil), kerr.NoReassignmentInProgress.Code, "")
	if l := s.handleListPartitionReassignments(context.Background(), kmsg.NewPtrListPartitionReassignmentsRequest()); len(l.Topics) != 0 || l.ErrorCode != 0 {
		t.Fatalf("list: %+v", l)
	}
	if got := elect(t, s, electPreferred, "t", 0, 1); !reflect.DeepEqual(got, []result{{code: kerr.ElectionNotNeeded.Code}, {code: kerr.ElectionNotNeeded.Code}}) {
		t.Fatalf("elect: %v", got)
	}
}

// listed flattens a ListPartitionReassignments response: "t/0 [2 1] +[2] -[1]".
func listed(resp *kmsg.ListPartitionReassignmentsResponse) []string {
	var out []string
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out = append(out, fmt.Sprintf("%s/%d %v +%v -%v", st.Topic, sp.Partition, sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas))
		}
	}
	return out
}

// Pending moves are listed as Kafka lists a reassignment from [leader] to [target];
// topics null lists them all, otherwise only the partitions asked, never an error.
func TestListPartitionReassignments(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3)
	if _, err := f.CreateTopic(context.Background(), metadata.TopicSpec{Name: "a", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	s, _ := startServerWith(t, f)
	all := kmsg.NewPtrListPartitionReassignmentsRequest()
	if got := listed(s.handleListPartitionReassignments(context.Background(), all)); len(got) != 0 {
		t.Fatalf("nothing moving, listed %q", got)
	}
	for _, m := range []struct {
		topic     string
		p, target int32
	}{{"t", 0, 2}, {"t", 2, 1}, {"a", 1, 3}} {
		wantResult(t, "move", alter(t, s, m.topic, m.p, []int32{m.target}), 0, "")
	}
	want := []string{"a/1 [3 2] +[3] -[2]", "t/0 [2 1] +[2] -[1]", "t/2 [1 3] +[1] -[3]"}
	if got := listed(s.handleListPartitionReassignments(context.Background(), all)); !reflect.DeepEqual(got, want) {
		t.Fatalf("all: listed %q, want %q", got, want)
	}
	some := kmsg.NewPtrListPartitionReassignmentsRequest()
	for _, rt := range []struct {
		topic string
		parts []int32
	}{{"t", []int32{1, 0, 9, -1}}, {"nope", []int32{0}}, {"a", nil}} {
		lt := kmsg.NewListPartitionReassignmentsRequestTopic()
		lt.Topic, lt.Partitions = rt.topic, rt.parts
		some.Topics = append(some.Topics, lt)
	}
	if got := listed(s.handleListPartitionReassignments(context.Background(), some)); !reflect.DeepEqual(got, []string{"t/0 [2 1] +[2] -[1]"}) {
		t.Fatalf("some: listed %q", got)
	}
}

// elect asks ElectLeaders (v2) for partitions of topic and returns their answers.
func elect(t *testing.T, s *Server, typ int8, topic string, parts ...int32) []result {
	t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(2)
	req.ElectionType = typ
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := s.handleElectLeaders(context.Background(), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(parts) {
		t.Fatalf("elect %s %v: response %+v", topic, parts, resp)
	}
	var out []result
	for i, sp := range resp.Topics[0].Partitions {
		if sp.Partition != parts[i] {
			t.Fatalf("answer %d is for partition %d, want %d", i, sp.Partition, parts[i])
		}
		r := result{code: sp.ErrorCode}
		if sp.ErrorMessage != nil {
			r.msg = *sp.ErrorMessage
		}
		out = append(out, r)
	}
	return out
}

// Every partition with a serving leader needs no election, of either type; a partition
// being recovered answers the retriable "cannot elect now" code of its type; unknown
// partitions UNKNOWN_TOPIC_OR_PARTITION. Topics null leaves out what needs no election.
func TestElectLeaders(t *testing.T) {
	f := newFakeMover(t, 3, 1, 2, 3, 4)
	s, _ := startServerWith(t, f)
	wantResult(t, "moving", alter(t, s, "t", 1, []int32{3}), 0, "")
	for _, typ := range []int8{electPreferred, electUnclean} {
		got := elect(t, s, typ, "t", 0, 1, 2, 3)
		for i, code := range []int16{kerr.ElectionNotNeeded.Code, kerr.ElectionNotNeeded.Code, kerr.ElectionNotNeeded.Code, kerr.UnknownTopicOrPartition.Code} {
			if got[i].code != code {
				t.Fatalf("type %d: partition %d: %v, want %v", typ, i, got[i], kerr.ErrorForCode(code))
			}
		}
		wantResult(t, "unknown topic", elect(t, s, typ, "nope", 0)[0], kerr.UnknownTopicOrPartition.Code, "nope/0")
	}
	all := kmsg.NewPtrElectLeadersRequest()
	all.SetVersion(1)
	if resp := s.handleElectLeaders(context.Background(), all); len(resp.Topics) != 0 || resp.ErrorCode != 0 {
		t.Fatalf("all, nothing to elect: %+v", resp)
	}

	if err := f.Fence(1); err != nil { // t/0 recovering on 4
		t.Fatal(err)
	}
	for typ, code := range map[int8]int16{electPreferred: kerr.PreferredLeaderNotAvailable.Code, electUnclean: kerr.EligibleLeadersNotAvailable.Code} {
		r := elect(t, s, typ, "t", 0)[0]
		wantResult(t, fmt.Sprintf("type %d, recovering", typ), r, code, "new leader 4")
		if !kerr.ErrorForCode(r.code).(*kerr.Error).Retriable {
			t.Fatalf("%v is not retriable", r)
		}
		all.ElectionType = typ
		resp := s.handleElectLeaders(context.Background(), all)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 0 || resp.Topics[0].Partitions[0].ErrorCode != code {
			t.Fatalf("type %d, all: %+v", typ, resp)
		}
	}
	// v0 has no election type: preferred.
	v0 := kmsg.NewPtrElectLeadersRequest()
	v0.SetVersion(0)
	v0.ElectionType = electUnclean
	if resp := s.handleElectLeaders(context.Background(), v0); len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("v0: %+v", resp)
	}

	p := part(f, 0)
	if err := f.CompleteRecovery(context.Background(), f.View().Topics["t"].ID, 0, p.LeaderEpoch, 0); err != nil {
		t.Fatal(err)
	}
	wantResult(t, "recovered", elect(t, s, electPreferred, "t", 0)[0], kerr.ElectionNotNeeded.Code, "")
}

// An unknown election type is INVALID_REQUEST, at the top and for every partition.
func TestElectLeadersUnknownType(t *testing.T) {
	f := newFakeMover(t, 2, 1, 2)
	s, _ := startServerWith(t, f)
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(1)
	req.ElectionType = 2
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	resp := s.handleElectLeaders(context.Background(), req)
	if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("response %+v", resp)
	}
	for _, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != kerr.InvalidRequest.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "election type 2") {
			t.Fatalf("partition %+v", sp)
		}
	}
}

// Partitions whose leader is gone: no broker left to take them over, or a leader that
// is not active (states the controller's plan never leaves, but a View may show).
func TestElectPartitionLeaderless(t *testing.T) {
	topic := &metadata.Topic{Name: "t", Partitions: []metadata.Partition{
		{Index: 0, Leader: -1, Recovering: true},
		{Index: 1, Leader: 2},
		{Index: 2, Leader: 1},
	}}
	active := map[int32]bool{1: true}
	for i, want := range []result{
		{kerr.PreferredLeaderNotAvailable.Code, "waiting for an active broker"},
		{kerr.PreferredLeaderNotAvailable.Code, "leader 2 is not active"},
		{kerr.ElectionNotNeeded.Code, ""},
	} {
		sp := electPartition("t", topic, int32(i), electPreferred, active)
		got := result{code: sp.ErrorCode}
		if sp.ErrorMessage != nil {
			got.msg = *sp.ErrorMessage
		}
		wantResult(t, fmt.Sprintf("partition %d", i), got, want.code, want.msg)
	}
}

// On the wire: a null replica list cancels and an empty one is invalid (they decode
// apart); topics null lists every reassignment and elects every partition.
func TestReassignmentAPIsOnTheWire(t *testing.T) {
	f := newFakeMover(t, 2, 1, 2, 3)
	s, _ := startServerWith(t, f)
	c := dialRaw(t, s)
	corr := int32(0)
	roundTrip := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		corr++
		c.send(corr, req)
		got, body, err := c.recv(10 * time.Second)
		if err != nil || got != corr {
			t.Fatalf("%s: answer %d, %v", kmsg.NameForKey(req.Key()), got, err)
		}
		resp, err := decode(req, body)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	alterCodes := func(replicas []int32) int16 {
		resp := roundTrip(alterReq(0, "t", map[int32][]int32{0: replicas})).(*kmsg.AlterPartitionAssignmentsResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := alterCodes([]int32{}); code != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("empty list: %v", kerr.ErrorForCode(code))
	}
	if code := alterCodes(nil); code != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("null list, nothing pending: %v", kerr.ErrorForCode(code))
	}
	if code := alterCodes([]int32{3}); code != 0 {
		t.Fatalf("move: %v", kerr.ErrorForCode(code))
	}
	list := roundTrip(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
	if got := listed(list); !reflect.DeepEqual(got, []string{"t/0 [3 1] +[3] -[1]"}) {
		t.Fatalf("listed %q", got)
	}
	if code := alterCodes(nil); code != 0 {
		t.Fatalf("null list, a move pending: %v", kerr.ErrorForCode(code))
	}
	if err := f.Fence(2); err != nil { // t/1 recovering on 3
		t.Fatal(err)
	}
	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	resp := roundTrip(el).(*kmsg.ElectLeadersResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("elect all: %+v", resp)
	}
	wantCalls(t, f, "move t/0 to 3", "cancel t/0")
}
