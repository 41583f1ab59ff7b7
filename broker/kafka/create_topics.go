package kafka

// CreateTopics (key 19), versions 0-7.
//
// Creates topics through the metadata store. num_partitions -1 takes the broker default;
// a replica assignment sets the partition count (its broker lists are ignored: storage is
// shared, there are no replicas to place). The replication factor is accepted and ignored
// for the same reason, but must be -1 or positive. Configs are validated against the
// catalogue (INVALID_CONFIG names the bad key). validate_only (v1+) checks without
// creating. v5+ answer with the topic's partitions and configs, v7 with its ID. A topic
// named twice in one request fails both times with INVALID_REQUEST, as in Kafka.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
)

func init() {
	register(api{key: 19, min: 0, max: 7, blocking: true, handle: answer((*Server).handleCreateTopics)})
}

func (s *Server) handleCreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		if seen[rt.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			msg := "topic named more than once in the request"
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !allowedCreate(ctx, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		spec := metadata.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Configs: map[string]string{}}
		if len(rt.ReplicaAssignment) > 0 {
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				st.ErrorCode = kerr.InvalidRequest.Code
				msg := "replica assignment requires num_partitions and replication_factor -1"
				st.ErrorMessage = &msg
				resp.Topics = append(resp.Topics, st)
				continue
			}
			spec.Partitions = int32(len(rt.ReplicaAssignment))
		}
		for _, c := range rt.Configs {
			if c.Value != nil {
				spec.Configs[c.Name] = *c.Value
			}
		}
		t, err := s.meta.CreateTopic(ctx, spec, req.ValidateOnly)
		if err != nil {
			st.ErrorCode = kafkaCode(err)
			st.ErrorMessage = errMessage(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = t.ID
		st.NumPartitions = int32(len(t.Partitions))
		st.ReplicationFactor = 1
		if rt.ReplicationFactor > 1 {
			st.ErrorMessage = rfNote(rt.ReplicationFactor)
		}
		for _, c := range describeTopicConfigs(t, nil, false) {
			rc := kmsg.NewCreateTopicsResponseTopicConfig()
			rc.Name, rc.Value, rc.ReadOnly, rc.Source, rc.IsSensitive = c.Name, c.Value, c.ReadOnly, int8(c.Source), c.IsSensitive
			st.Configs = append(st.Configs, rc)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !req.ValidateOnly {
		s.be.Refresh()
	}
	return resp
}

// rfNote is what a create asking for a replication factor above 1 is told beside its
// success. Weir keeps one copy of a partition's data, in storage that is itself
// replicated across zones (the shared WAL file system, then the object store), and
// one leader serves it: the replication factor is 1 in every answer (CreateTopics,
// Metadata's replicas and ISR), whatever was asked. Refusing
// would break tools that create topics with their default of 3 (Kafka Connect, Schema
// Registry); reporting 3 would name replicas that do not exist. Kafka clients read the
// message only on an error; `weir topic create` prints it. docs/OPERATIONS.md,
// "Replication factor".
func rfNote(asked int16) *string {
	msg := fmt.Sprintf("replication factor %d recorded as 1: Weir keeps one copy in storage replicated across zones (the shared WAL, then object storage); durability does not depend on broker replicas", asked)
	return &msg
}
