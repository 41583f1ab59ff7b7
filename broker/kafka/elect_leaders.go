package kafka

// ElectLeaders (key 43), versions 0-2.
//
// Kafka elects a partition's leader among its replicas: PREFERRED (0) makes the first
// replica of the assignment the leader, UNCLEAN (1) elects any live replica when no
// in-sync one is left. In Weir a partition has one replica, its leader (storage is
// shared), so there is never another replica to elect: the controller picks a new leader
// itself when the leader dies (Failover), and a leader is moved on purpose with
// AlterPartitionReassignments. Each partition is answered:
//
//   - unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//   - led by an active broker and not recovering: ELECTION_NOT_NEEDED (Kafka's answer
//     when the preferred replica already leads, or for UNCLEAN when there is a leader),
//     for either type; a pending graceful move does not change that.
//   - being recovered after a failover (its new leader reads the fenced broker's WAL
//     before it serves; Metadata says LEADER_NOT_AVAILABLE meanwhile), or a leader that
//     is not active: the retriable code Kafka answers when the election cannot happen
//     (now): PREFERRED_LEADER_NOT_AVAILABLE for PREFERRED, ELIGIBLE_LEADERS_NOT_AVAILABLE
//     for UNCLEAN, with a message saying why. Nothing is changed: recovery already
//     elected the leader, and it is never unclean (every acked record is in the dead
//     broker's WAL, which the new leader reads).
//
// Topics null means every partition; as in Kafka, the partitions that need no election
// are then left out (and topics left with none). v0 has no election type (PREFERRED);
// another type than 0 or 1 is INVALID_REQUEST, at the top level from v1 and for every
// partition listed. v2 is v1 in the flexible encoding.

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 43, min: 0, max: 2, blocking: true, handle: answer((*Server).handleElectLeaders)})
}

const (
	electPreferred = 0
	electUnclean   = 1
)

func (s *Server) handleElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	view := s.meta.View()
	typ := req.ElectionType
	if req.Version == 0 {
		typ = electPreferred
	}
	code, msg := int16(0), ""
	switch {
	case !allowedCluster(ctx, acl.OpAlter):
		code, msg = kerr.ClusterAuthorizationFailed.Code, "ElectLeaders needs Alter on the cluster"
	case typ != electPreferred && typ != electUnclean:
		code, msg = kerr.InvalidRequest.Code, fmt.Sprintf("unknown election type %d", typ)
	}
	if code != 0 {
		resp.ErrorCode = code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, i := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = i, code, &msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	active := map[int32]bool{}
	for _, b := range view.Brokers {
		if b.Active() {
			active[b.ID] = true
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
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = name
			for i := range t.Partitions {
				if sp := electPartition(name, t, int32(i), typ, active); sp.ErrorCode != kerr.ElectionNotNeeded.Code {
					st.Partitions = append(st.Partitions, sp)
				}
			}
			if len(st.Partitions) > 0 {
				resp.Topics = append(resp.Topics, st)
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		t := view.Topics[rt.Topic]
		for _, i := range rt.Partitions {
			st.Partitions = append(st.Partitions, electPartition(rt.Topic, t, i, typ, active))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// electPartition answers partition index of topic name (t: its metadata, nil if
// unknown); active holds the active brokers.
func electPartition(name string, t *metadata.Topic, index int32, typ int8, active map[int32]bool) kmsg.ElectLeadersResponseTopicPartition {
	sp := kmsg.NewElectLeadersResponseTopicPartition()
	sp.Partition = index
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		msg := fmt.Sprintf("no partition %s/%d", name, index)
		sp.ErrorCode, sp.ErrorMessage = kerr.UnknownTopicOrPartition.Code, &msg
		return sp
	}
	p := t.Partitions[index]
	var why string
	switch {
	case p.Recovering && p.Leader < 0:
		why = fmt.Sprintf("%s/%d is waiting for an active broker to take it over after a failover", t.Name, index)
	case p.Recovering:
		why = fmt.Sprintf("%s/%d is being recovered after a failover: its new leader %d reads the fenced broker's WAL before it serves; retry shortly", t.Name, index, p.Leader)
	case !active[p.Leader]:
		why = fmt.Sprintf("%s/%d: its leader %d is not active; the controller gives it a new leader", t.Name, index, p.Leader)
	default:
		sp.ErrorCode = kerr.ElectionNotNeeded.Code
		return sp
	}
	sp.ErrorCode = kerr.PreferredLeaderNotAvailable.Code
	if typ == electUnclean {
		sp.ErrorCode = kerr.EligibleLeadersNotAvailable.Code
	}
	sp.ErrorMessage = &why
	return sp
}
