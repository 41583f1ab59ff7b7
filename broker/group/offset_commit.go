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
	var parts []commitPart
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
			epoch := int32(-1)
			if v >= 6 {
				epoch = p.LeaderEpoch
			}
			parts = append(parts, commitPart{t.Topic, p.Partition, p.Offset, epoch, p.Metadata, &rp.ErrorCode})
		}
	}
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if v >= 1 {
		generation, memberID = r.Generation, r.MemberID
	}
	if v >= 7 {
		instanceID = r.InstanceID
	}
	missing := kerr.IllegalGeneration.Code
	if v >= 9 {
		missing = kerr.GroupIDNotFound.Code
	}
	c.commitOffsets(ctx, r.Group, generation, parts, commitSpec{
		missing: missing,
		check: func(g *group) int16 {
			if code := g.validateOffsetCommit(generation, memberID, instanceID, false); code != 0 {
				return code
			}
			if m := g.members[memberID]; m != nil && generation >= 0 {
				// A commit from the member proves it alive, as a heartbeat does (Kafka).
				g.scheduleHeartbeat(m, m.sessionTimeout)
			}
			return 0
		},
		stage: func(_ *group, w *write, offsets []Offset) { w.offsets = offsets },
		applied: func(g *group, offsets []Offset, err error) {
			if err != nil {
				return
			}
			for _, o := range offsets {
				g.setOffset(o)
			}
		},
	}, respond, resp)
}

// commitPart is one partition of an OffsetCommit or TxnOffsetCommit, with the error code
// of its answer.
type commitPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32 // leader epoch; -1 in versions without it
	metadata  *string
	code      *int16
}

func setCodes(parts []commitPart, code int16) {
	for _, p := range parts {
		*p.code = code
	}
}

// commitSpec is what OffsetCommit and TxnOffsetCommit do differently in commitOffsets.
type commitSpec struct {
	missing int16                                       // answer when the group does not exist (generation >= 0)
	check   func(g *group) int16                        // with g locked; an error code fails every part
	stage   func(g *group, w *write, offsets []Offset)  // with g locked, before the write is queued
	applied func(g *group, offsets []Offset, err error) // with g locked, once the write is done
}

// commitOffsets is the commit both APIs share (see the file comment): unknown partitions,
// the group (a missing one is created for generation < 0), spec.check, metadata sizes,
// then the durable write of the accepted offsets, answered with resp once it is done.
func (c *Coordinator) commitOffsets(ctx context.Context, name string, generation int32, parts []commitPart, spec commitSpec, respond func(kmsg.Response), resp kmsg.Response) {
	var candidates []commitPart
	for _, p := range parts {
		if !c.partitionExists(p.topic, p.partition) {
			*p.code = kerr.UnknownTopicOrPartition.Code
			continue
		}
		candidates = append(candidates, p)
	}
	if len(candidates) == 0 {
		respond(resp)
		return
	}
	g := c.lockedGroup(name, generation < 0)
	if g == nil {
		setCodes(candidates, spec.missing)
		respond(resp)
		return
	}
	defer g.unlock()
	if code := spec.check(g); code != 0 {
		setCodes(candidates, code)
		g.send(respond, resp)
		return
	}

	now := c.cfg.Clock.Now()
	var accepted []commitPart
	var offsets []Offset
	for _, p := range candidates {
		meta := ""
		if p.metadata != nil {
			meta = *p.metadata
		}
		if len(meta) > c.cfg.OffsetMetadataMaxBytes {
			*p.code = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		accepted = append(accepted, p)
		offsets = append(offsets, Offset{
			Topic:       p.topic,
			Partition:   p.partition,
			Offset:      p.offset,
			LeaderEpoch: p.epoch,
			Metadata:    meta,
			CommitTime:  now,
			TopicID:     c.topicID(p.topic),
		})
	}
	if len(offsets) == 0 {
		if g.unused() && g.generation == 0 {
			g.removeFromCoordinator()
		}
		g.send(respond, resp)
		return
	}
	w := &write{ctx: ctx}
	spec.stage(g, w, offsets)
	w.apply = func(err error) {
		if err != nil {
			setCodes(accepted, storeErrorCode(err, kerr.InvalidCommitOffsetSize.Code))
			// Do not keep a simple group created by a failed commit.
			g.afterBatch = append(g.afterBatch, func() {
				if g.idle() && g.generation == 0 && len(g.writeQ) == 0 && !g.removed {
					g.removeFromCoordinator()
				}
			})
		}
		spec.applied(g, offsets, err)
		g.send(respond, resp)
	}
	g.enqueueWrite(w)
}

// validateOffsetCommit is Kafka's ClassicGroup.validateOffsetCommit. A transactional
// commit (TxnOffsetCommit) without generation and member is accepted whatever the state
// (its v0-v2 carry neither), and is not refused during CompletingRebalance.
func (g *group) validateOffsetCommit(generation int32, memberID string, instanceID *string, txn bool) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0 // offsets-only ("simple") group
	}
	if g.cg != nil {
		return g.validateConsumerCommit(generation, memberID)
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if !txn && g.state != stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	if !txn && g.state == stateCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
