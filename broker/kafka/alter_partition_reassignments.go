package kafka

// AlterPartitionReassignments (key 45), versions 0-1.
//
// Weir has no followers: storage is shared, so a partition's replica set is its leader
// alone (Metadata reports replicas = ISR = [leader]), and a reassignment is a graceful
// move of the leadership (metadata.Mover.MovePartition: the leader stops appending and
// reports its end offset, the target leads from there and reads the older offsets from
// the shared WALs and objects; nothing is copied). Each partition is answered:
//
//   - unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//   - replicas null (Kafka's cancel): the pending move is abandoned, the leader stays;
//     NO_REASSIGNMENT_IN_PROGRESS when none is pending, or when the hand-off completed
//     before the cancel arrived; INVALID_REPLICA_ASSIGNMENT when the leader is
//     draining (the move is the drain's).
//   - an empty list: INVALID_REPLICA_ASSIGNMENT (as Kafka); more than one broker:
//     INVALID_REPLICA_ASSIGNMENT, the message saying that a partition has one replica,
//     its leader.
//   - the current leader: nothing to move, success; a pending move elsewhere is
//     cancelled, since a new assignment replaces the ongoing one in Kafka (unless the
//     leader is draining: below).
//   - a standalone broker (its metadata store cannot move partitions: no controllers):
//     INVALID_REPLICA_ASSIGNMENT with a message saying so; it is the cluster's only
//     broker, so any other broker is one Kafka would call unregistered. Not
//     UNSUPPORTED_VERSION or INVALID_REQUEST (the request is supported and well formed)
//     nor NOT_CONTROLLER (retriable: clients would retry forever at the same broker).
//   - a broker that is not registered: INVALID_REPLICA_ASSIGNMENT (as Kafka); a fenced
//     one: BROKER_NOT_AVAILABLE, retriable (Kafka would record a reassignment waiting
//     for it; Weir moves a partition only to a live broker, and a fenced one comes back
//     under a new registration); a draining one (live, being emptied, given no
//     partitions): INVALID_REPLICA_ASSIGNMENT.
//   - a partition recovering from a failover: LEADER_NOT_AVAILABLE, retriable (what
//     Metadata says of it too): its new leader must finish reading the dead broker's
//     WAL before it can hand the partition on.
//   - the target of the pending move: success (already under way). Another target while
//     a move is pending: REASSIGNMENT_IN_PROGRESS (cancel it first, or wait the
//     milliseconds a hand-off takes). Kafka would replace the ongoing reassignment; Weir
//     does not cancel and begin again in one request, so every move the leader sees
//     begins from a partition that is not moving.
//
// The answer comes once the controller recorded the move, not after the hand-off (as
// Kafka answers before new replicas catch up): ListPartitionReassignments shows the move
// until the target leads. A refusal by the controller for a reason the View did not show
// yet (a failover, a move that completed) is judged again on the newer View;
// otherwise it is INVALID_REPLICA_ASSIGNMENT with the controller's reason. v1 (KIP-860)
// adds allow_replication_factor_change: the replication factor never changes in Weir,
// so false is honoured and echoed. The moves of one request reach the controller up
// to 16 at a time.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 45, min: 0, max: 1, blocking: true, handle: answer((*Server).handleAlterPartitionReassignments)})
}

// reassignParallel bounds the partitions of one request being reassigned at once.
const reassignParallel = 16

func (s *Server) handleAlterPartitionReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if !allowedCluster(ctx, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.ClusterAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	mv, _ := s.meta.(partitionMover)
	sem := make(chan struct{}, reassignParallel)
	var wg sync.WaitGroup
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				code, msg := s.reassign(ctx, mv, rt.Topic, rp.Partition, rp.Replicas)
				sp.ErrorCode = code
				if msg != "" {
					sp.ErrorMessage = &msg
				}
			}()
		}
		resp.Topics = append(resp.Topics, st)
	}
	wg.Wait()
	return resp
}

// reassignStep is what a partition's reassignment needs next.
type reassignStep int

const (
	stepAnswer reassignStep = iota // nothing to change: answer code and msg
	stepMove                       // begin a move to target
	stepCancel                     // cancel the pending move
)

type reassignPlan struct {
	step   reassignStep
	code   int16
	msg    string
	id     metadata.TopicID
	leader int32 // the leader when planned
	target int32
}

func reassignAnswer(code int16, format string, args ...any) reassignPlan {
	return reassignPlan{step: stepAnswer, code: code, msg: fmt.Sprintf(format, args...)}
}

// planReassign decides, from the View v, what the replica list asked for partition
// index of topic needs (replicas nil: cancel). canMove: the store can move partitions.
func planReassign(v *metadata.View, topic string, index int32, replicas []int32, canMove bool) reassignPlan {
	t := v.Topics[topic]
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return reassignAnswer(kerr.UnknownTopicOrPartition.Code, "no partition %s/%d", topic, index)
	}
	p := t.Partitions[index]
	name := fmt.Sprintf("%s/%d", topic, index)
	pl := reassignPlan{id: t.ID, leader: p.Leader}
	if replicas == nil {
		if !p.Moving || !canMove {
			return reassignAnswer(kerr.NoReassignmentInProgress.Code, "%s has no reassignment in progress", name)
		}
		if b, _ := v.Broker(p.Leader); b.State == metadata.BrokerDraining {
			return reassignAnswer(kerr.InvalidReplicaAssignment.Code,
				"%s: its leader %d is draining, and the move to broker %d is part of the drain", name, p.Leader, p.MovingTo)
		}
		pl.step = stepCancel
		return pl
	}
	switch {
	case len(replicas) == 0:
		return reassignAnswer(kerr.InvalidReplicaAssignment.Code, "the replica list for %s is empty (a null list cancels a reassignment)", name)
	case len(replicas) > 1:
		return reassignAnswer(kerr.InvalidReplicaAssignment.Code,
			"%s: %d replicas %v asked, but a partition in Weir has exactly one replica, its leader: storage is shared and there are no followers; give the one broker that should lead it",
			name, len(replicas), replicas)
	}
	target := replicas[0]
	if target == p.Leader && !p.Moving {
		return reassignPlan{step: stepAnswer} // already led by it
	}
	if !canMove {
		return reassignAnswer(kerr.InvalidReplicaAssignment.Code,
			"this broker runs standalone (no controllers) and cannot move partitions: the only valid replica list for %s is [%d]", name, p.Leader)
	}
	// The state is compared, not Active(): a target must be given partitions, which a
	// draining broker (live, being emptied) is not.
	b, ok := v.Broker(target)
	switch {
	case !ok:
		return reassignAnswer(kerr.InvalidReplicaAssignment.Code, "broker %d is not registered", target)
	case b.State == metadata.BrokerFenced:
		return reassignAnswer(kerr.BrokerNotAvailable.Code, "broker %d is fenced: a partition moves only to an active broker", target)
	case b.State != "" && b.State != metadata.BrokerActive:
		return reassignAnswer(kerr.InvalidReplicaAssignment.Code, "broker %d is %s: it is given no partitions", target, b.State)
	case target == p.Leader:
		pl.step, pl.target = stepCancel, target // the new assignment replaces the pending move
		return pl
	case p.Recovering:
		return reassignAnswer(kerr.LeaderNotAvailable.Code,
			"%s is being recovered after a failover: its new leader %d reads the fenced broker's WAL before it serves; reassign it once that is done", name, p.Leader)
	case p.Moving && p.MovingTo == target:
		return reassignPlan{step: stepAnswer} // under way
	case p.Moving:
		return reassignAnswer(kerr.ReassignmentInProgress.Code,
			"%s is moving to broker %d: cancel that reassignment first (a null replica list) or let it finish", name, p.MovingTo)
	}
	pl.step, pl.target = stepMove, target
	return pl
}

// reassign carries out the replica list asked for one partition and returns the
// partition's error code and message. Whatever it changes, or the controller refuses,
// is judged again on the View that follows, for a few rounds: a hand-off may complete
// before a cancel, a failover may begin before a move.
func (s *Server) reassign(ctx context.Context, mv partitionMover, topic string, index int32, replicas []int32) (int16, string) {
	var refused error
	for round := 0; round < 3; round++ {
		v := s.meta.View()
		pl := planReassign(v, topic, index, replicas, mv != nil)
		switch pl.step {
		case stepAnswer:
			return pl.code, pl.msg
		case stepCancel:
			if err := mv.CancelMove(ctx, pl.id, index); err != nil {
				return kafkaCode(err), err.Error()
			}
			if replicas != nil {
				refused = nil
				continue // [leader]: success if it stayed, else a move back to it
			}
			// CancelMove returned with this broker's View showing the cancel.
			if t := s.meta.View().TopicByID(pl.id); t != nil && int(index) < len(t.Partitions) && t.Partitions[index].Leader != pl.leader {
				return kerr.NoReassignmentInProgress.Code,
					fmt.Sprintf("%s/%d: the move completed (broker %d leads) before the cancel arrived", topic, index, t.Partitions[index].Leader)
			}
			return 0, ""
		case stepMove:
			err := mv.MovePartition(ctx, pl.id, index, pl.target)
			if err == nil {
				return 0, ""
			}
			if !errors.Is(err, metadata.ErrMoveRefused) || s.meta.View().Version == v.Version {
				return kafkaCode(err), err.Error()
			}
			refused = err // the View changed meanwhile: judge again
		}
	}
	if refused != nil {
		return kafkaCode(refused), refused.Error()
	}
	return kerr.ReassignmentInProgress.Code, fmt.Sprintf("%s/%d kept changing leadership while being reassigned; ask again", topic, index)
}
