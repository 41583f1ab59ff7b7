package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

// DescribeProducers (key 61, KIP-664), what kafka-transactions.sh describe-producers
// and `weir partition describe` ask: the idempotent producers with state in a partition
// led here (ID, epoch, last sequence, the first offset of its open transaction here or
// -1). Weir keeps no per-producer timestamp (LastTimestamp -1) nor the coordinator
// epoch of the last marker (CoordinatorEpoch -1). Per partition: TOPIC_AUTHORIZATION_FAILED without READ on
// the topic (as Kafka), UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER when not led
// here.
func init() {
	register(api{key: 61, min: 0, max: 0, handle: answer((*Server).handleDescribeProducers)})
}

func (s *Server) handleDescribeProducers(ctx context.Context, req *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	view := s.meta.View()
	sd, _ := s.be.(StorageDescriber)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := view.Topics[rt.Topic]
		allowed := allowedTopic(ctx, acl.OpRead, rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || idx < 0 || int(idx) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case sd == nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				ps, err := sd.Producers(t, idx)
				if err != nil {
					sp.ErrorCode, sp.ErrorMessage = kafkaCode(err), errMessage(err)
					break
				}
				for _, p := range ps {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = p.ID, int32(p.Epoch), p.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, p.TxnStart
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
