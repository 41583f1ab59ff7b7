package kafka

// Metadata (key 3), versions 0-12.
//
// Lists brokers (with their rack; on a zone listener, each broker's listener of that zone
// when it has one) and the requested topics (all when the request's list
// is null, or empty before v1). Unknown topics are auto-created when the broker allows it
// and the request does (v4+; implied before), otherwise UNKNOWN_TOPIC_OR_PARTITION. v10+
// carry topic IDs, v12 lets clients ask by ID. Every partition's replica set is its leader
// alone: storage is shared, so there are no follower copies to report.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 3, min: 0, max: 12, blocking: true, handle: answer((*Server).handleMetadata)})
}

func (s *Server) handleMetadata(ctx context.Context, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	view := s.meta.View()
	allowAuto := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var topics []*metadata.Topic
	if all {
		// Topics the client may not describe are left out, as if they did not exist.
		for _, t := range view.Topics {
			if allowedTopic(ctx, acl.OpDescribe, t.Name) {
				topics = append(topics, t)
			}
		}
	}
	denied := func(mt kmsg.MetadataResponseTopic) {
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, mt)
	}
	for _, rt := range req.Topics {
		var t *metadata.Topic
		switch {
		case rt.Topic != nil:
			if !allowedTopic(ctx, acl.OpDescribe, *rt.Topic) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				denied(mt)
				continue
			}
			t = view.Topics[*rt.Topic]
			if t == nil && allowAuto && metadata.ValidTopicName(*rt.Topic) == nil && !allowedCreate(ctx, *rt.Topic) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				denied(mt)
				continue
			}
			if t == nil && allowAuto && metadata.ValidTopicName(*rt.Topic) == nil {
				_, err := s.meta.CreateTopic(ctx, metadata.TopicSpec{Name: *rt.Topic, Partitions: s.cfg.DefaultPartitions, ReplicationFactor: -1}, false)
				if err == nil || errors.Is(err, metadata.ErrTopicExists) {
					view = s.meta.View()
					t = view.Topics[*rt.Topic]
				}
			}
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if metadata.ValidTopicName(*rt.Topic) != nil {
					mt.ErrorCode = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		default:
			t = view.TopicByID(rt.TopicID)
			if t != nil && !allowedTopic(ctx, acl.OpDescribe, t.Name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				denied(mt)
				continue
			}
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		topics = append(topics, t)
	}

	active := map[int32]bool{}
	lname := listenerNameFrom(ctx) // a named (or zone) listener's clients stay on listeners of that name
	for _, br := range view.Brokers {
		if !br.Active() {
			continue // fenced: clients must not be sent there
		}
		active[br.ID] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = br.ID
		mb.Host, mb.Port = br.Endpoint(lname)
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := view.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = view.ControllerID
	var zv *routing.ZoneView
	if zone := zoneFrom(ctx); zone != "" {
		zv = s.zoneView(view)
	}
	for _, t := range topics {
		resp.Topics = append(resp.Topics, metadataTopic(t, active, zv, zoneFrom(ctx)))
	}
	return resp
}

// metadataTopic describes t; a partition whose leader is not an active broker, or that
// its new leader is still recovering, is reported without a leader
// (LEADER_NOT_AVAILABLE), so clients wait instead of connecting where nobody serves it.
//
// For a client of a known zone (zv set), a partition led in another zone is reported as
// led by the zone's broker chosen for it (it proxies produces and serves reads), with
// the real leader epoch. Internal topics keep their real leaders.
func metadataTopic(t *metadata.Topic, active map[int32]bool, zv *routing.ZoneView, zone string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = len(t.Name) > 2 && t.Name[:2] == "__"
	isActive := func(id int32) bool { return active[id] }
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Leader = servingLeader(t, p, isActive, zv, zone)
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Replicas, mp.ISR = []int32{}, []int32{}
		} else {
			mp.Replicas, mp.ISR = []int32{mp.Leader}, []int32{mp.Leader}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// servingLeader is the leader Metadata names for partition p of t to a client of zone
// (zv nil: no zone known), and the leader hints of Produce and Fetch (leader_hint.go)
// name the same: -1 when the leader is not an active broker, or the partition was taken
// over from a fenced broker and its new leader has not recovered it yet (clients wait for
// Metadata rather than retrying at a broker that cannot serve yet); for a client of a
// known zone, the zone's broker chosen for a partition led in another zone (it proxies
// produces and serves reads). Internal topics keep their real leaders.
func servingLeader(t *metadata.Topic, p metadata.Partition, active func(int32) bool, zv *routing.ZoneView, zone string) int32 {
	if p.Leader < 0 || !active(p.Leader) || p.Recovering {
		return -1
	}
	if zv != nil && !(len(t.Name) > 2 && t.Name[:2] == "__") {
		if l := zv.Leader(zone, t.ID, p.Index, p.Leader); l != p.Leader && active(l) {
			return l
		}
	}
	return p.Leader
}
