package kafka

// WriteTxnMarkers (key 27), versions 0-1, served when transactions are on (txn.go): a
// transaction coordinator asks this broker, the leader of each partition named, to
// append a commit or abort marker there. CLUSTER_ACTION on the cluster (brokers only:
// CLUSTER_AUTHORIZATION_FAILED for every partition otherwise, as Kafka). Each marker is
// appended through the backend's MarkerAppender like a produced batch (durable, lease and
// fence checked) and answered per partition: NOT_LEADER_OR_FOLLOWER when not led here
// (the coordinator looks the leader up again), UNKNOWN_TOPIC_OR_PARTITION, or the
// partition's refusal (a marker of an older producer epoch: PRODUCER_FENCED).

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 27, min: 0, max: 1, blocking: true, on: txnOn, handle: answer((*Server).handleWriteTxnMarkers)})
}

func (s *Server) handleWriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := allowedCluster(ctx, acl.OpClusterAction)
	ma, _ := s.be.(MarkerAppender)
	view := s.meta.View()
	var wg sync.WaitGroup
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		marker := recbatch.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			topic := view.Topics[t.Topic]
			for i, p := range t.Partitions {
				rp := &rt.Partitions[i]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				switch {
				case !allowed:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case topic == nil || p < 0 || int(p) >= len(topic.Partitions):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case ma == nil:
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
				default:
					wg.Add(1)
					ma.AppendMarker(topic, p, marker, func(err error) {
						rp.ErrorCode = kafkaCode(err)
						wg.Done()
					})
				}
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	wg.Wait()
	return resp
}
