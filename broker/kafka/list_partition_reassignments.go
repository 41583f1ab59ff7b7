package kafka

// ListPartitionReassignments (key 46), version 0.
//
// Lists the partitions with a pending graceful move (metadata.Partition.Moving): the
// controller recorded the move and the leader has not handed the partition off yet.
// Weir's one replica is the leader, so a move from leader L to target T is reported
// as Kafka reports a reassignment from [L] to [T]: replicas = [T, L] (the target list
// followed by the replicas being removed, Kafka's order), adding = [T], removing =
// [L]; tools take replicas minus removing as the target. Topics null lists every
// moving partition; otherwise the partitions listed of the topics named, as Kafka does:
// unknown topics and partitions, and partitions not moving, are left out, never errors.
// A standalone broker never moves partitions, so it lists none.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 46, min: 0, max: 0, blocking: true, handle: answer((*Server).handleListPartitionReassignments)})
}

func (s *Server) handleListPartitionReassignments(ctx context.Context, req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !allowedCluster(ctx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	view := s.meta.View()
	add := func(t *metadata.Topic, indexes []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, i := range indexes {
			if i < 0 || int(i) >= len(t.Partitions) || !t.Partitions[i].Moving {
				continue
			}
			p := t.Partitions[i]
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = i
			sp.Replicas = []int32{p.MovingTo, p.Leader}
			sp.AddingReplicas = []int32{p.MovingTo}
			sp.RemovingReplicas = []int32{p.Leader}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		names := make([]string, 0, len(view.Topics))
		for name := range view.Topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			t := view.Topics[name]
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
		return resp
	}
	for _, rt := range req.Topics {
		if t := view.Topics[rt.Topic]; t != nil {
			add(t, rt.Partitions)
		}
	}
	return resp
}
