package group

// OffsetCommit (API key 8), versions 0-9 (v10 switches to topic IDs and is
// not implemented).
//
// Behaviour (Kafka's classic protocol):
//   - Partitions that do not exist (Topics.PartitionExists) get
//     UNKNOWN_TOPIC_OR_PARTITION and are not sent further. If none is left,
//     nothing else happens (no group is created).
//   - Group check (applies to every remaining partition):
//     group missing: generation < 0 creates a "simple" Empty group (a
//     consumer not using group management); otherwise ILLEGAL_GENERATION
//     (GROUP_ID_NOT_FOUND for v9+). Dead (being deleted):
//     COORDINATOR_NOT_AVAILABLE. Generation < 0 on an Empty group: accepted.
//     With a generation >= 0, a member ID or an instance ID (v7+): the member
//     must be current (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID) and the
//     generation must match (ILLEGAL_GENERATION); a generation-less commit
//     to a non-empty group gets UNKNOWN_MEMBER_ID. Finally
//     CompletingRebalance gets REBALANCE_IN_PROGRESS (commits during
//     PreparingRebalance with the previous generation are allowed).
//   - Metadata longer than OffsetMetadataMaxBytes: OFFSET_METADATA_TOO_LARGE.
//   - Accepted offsets are written through Store.Write (off the
//     caller's goroutine, batched per group) and only applied in memory, and
//     answered, once the store returns. A store failure leaves memory
//     untouched and is reported with Kafka's mapping (see storeErrorCode):
//     by default NOT_COORDINATOR, as Kafka does for KAFKA_STORAGE_ERROR.
//   - A commit by a member (generation >= 0) restarts its session timer, as a
//     heartbeat does.
//   - v0 has no generation/member (treated as generation -1); v1's per
//     partition timestamp and v2-v4's retention time are ignored (offsets
//     expire by Config.OffsetsRetention, expire.go); leader epochs are stored
//     from v6 (else -1). Each offset records its topic's ID (TopicIDs).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) partitionExists(topic string, partition int32) bool {
	return c.topics == nil || c.topics.PartitionExists(topic, partition)
}

func (c *Coordinator) handleOffsetCommit(ctx context.Context, r *kmsg.OffsetCommitRequest, respond func(kmsg.Response)) {
	v := r.Version
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	type slot struct{ t, p int }
	var candidates []slot
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(r.Topics))
	for ti, t := range r.Topics {
		rt := &resp.Topics[ti]
		rt.Default()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			rp.Default()
			rp.Partition = p.Partition
			if !c.partitionExists(t.Topic, p.Partition) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			candidates = append(candidates, slot{ti, pi})
		}
	}
	if len(candidates) == 0 {
		respond(resp)
		return
	}
	setAll := func(slots []slot, code int16) {
		for _, s := range slots {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = code
		}
	}

	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if v >= 1 {
		generation, memberID = r.Generation, r.MemberID
	}
	if v >= 7 {
		instanceID = r.InstanceID
	}
	g := c.lockedGroup(r.Group, generation < 0)
	if g == nil {
		code := kerr.IllegalGeneration.Code
		if v >= 9 {
			code = kerr.GroupIDNotFound.Code
		}
		setAll(candidates, code)
		respond(resp)
		return
	}
	defer g.unlock()
	if code := g.validateOffsetCommit(generation, memberID, instanceID); code != 0 {
		setAll(candidates, code)
		g.send(respond, resp)
		return
	}
	if m := g.members[memberID]; m != nil && generation >= 0 {
		// A commit from the member proves it alive, as a heartbeat does (Kafka).
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}

	now := c.cfg.Clock.Now()
	var accepted []slot
	var offsets []Offset
	for _, s := range candidates {
		t := &r.Topics[s.t]
		p := &t.Partitions[s.p]
		meta := ""
		if p.Metadata != nil {
			meta = *p.Metadata
		}
		if len(meta) > c.cfg.OffsetMetadataMaxBytes {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		epoch := int32(-1)
		if v >= 6 {
			epoch = p.LeaderEpoch
		}
		accepted = append(accepted, s)
		offsets = append(offsets, Offset{
			Topic:       t.Topic,
			Partition:   p.Partition,
			Offset:      p.Offset,
			LeaderEpoch: epoch,
			Metadata:    meta,
			CommitTime:  now,
			TopicID:     c.topicID(t.Topic),
		})
	}
	if len(offsets) == 0 {
		if g.unused() && g.generation == 0 {
			g.removeFromCoordinator()
		}
		g.send(respond, resp)
		return
	}
	g.enqueueWrite(&write{
		ctx:     ctx,
		offsets: offsets,
		apply: func(err error) {
			if err != nil {
				setAll(accepted, storeErrorCode(err, kerr.InvalidCommitOffsetSize.Code))
				// Do not keep a simple group created by a failed commit.
				g.afterBatch = append(g.afterBatch, func() {
					if g.idle() && g.generation == 0 && len(g.writeQ) == 0 && !g.removed {
						g.removeFromCoordinator()
					}
				})
			} else {
				for _, o := range offsets {
					g.setOffset(o)
				}
			}
			g.send(respond, resp)
		},
	})
}

// validateOffsetCommit is Kafka's ClassicGroup.validateOffsetCommit for
// non-transactional commits.
func (g *group) validateOffsetCommit(generation int32, memberID string, instanceID *string) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0 // offsets-only ("simple") group
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	if g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
