package group

// OffsetDelete (API key 47), version 0.
//
// Behaviour (Kafka, KIP-496):
//   - INVALID_GROUP_ID for an empty group name; GROUP_ID_NOT_FOUND if the
//     group does not exist or is being deleted; NON_EMPTY_GROUP if the group
//     has members and its protocol type is not "consumer".
//   - Per partition: UNKNOWN_TOPIC_OR_PARTITION if it does not exist;
//     GROUP_SUBSCRIBED_TO_TOPIC if a member of a "consumer" group subscribes
//     to the topic (parsed from its kmsg.ConsumerMemberMetadata for the
//     group's protocol); otherwise no error, and a committed offset, if any,
//     is deleted.
//   - Deletions are written as tombstones through the Store and applied
//     in memory once durable. On a store failure nothing changes and the
//     response carries only a top-level error (Kafka's mapping, see
//     storeErrorCode). An Empty group left without offsets is removed, as
//     Kafka's cleanup does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleOffsetDelete(ctx context.Context, r *kmsg.OffsetDeleteRequest, respond func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if r.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		respond(resp)
		return
	}
	g := c.lockedGroup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		respond(resp)
		return
	}
	defer g.unlock()
	switch {
	case g.state == stateDead:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		g.send(respond, resp)
		return
	case g.state != stateEmpty && g.protocolType != "consumer":
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		g.send(respond, resp)
		return
	}

	var subscribed map[string]bool
	if g.state != stateEmpty {
		subscribed = g.subscribedTopics()
	}
	now := c.cfg.Clock.Now()
	var tombstones []Offset
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !c.partitionExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				if _, ok := g.offset(t.Topic, p.Partition); ok {
					tombstones = append(tombstones, Offset{Topic: t.Topic, Partition: p.Partition, CommitTime: now, Delete: true})
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(tombstones) == 0 {
		g.send(respond, resp)
		return
	}
	g.enqueueWrite(&write{
		ctx:     ctx,
		offsets: tombstones,
		apply: func(err error) {
			if err != nil {
				fail := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
				fail.ErrorCode = storeErrorCode(err, kerr.UnknownServerError.Code)
				g.send(respond, fail)
				return
			}
			for _, o := range tombstones {
				g.deleteOffset(o.Topic, o.Partition)
			}
			g.afterBatch = append(g.afterBatch, func() {
				if g.idle() && len(g.writeQ) == 0 && !g.removed {
					g.removeFromCoordinator()
				}
			})
			g.send(respond, resp)
		},
	})
}
