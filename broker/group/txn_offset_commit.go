package group

// TxnOffsetCommit (API key 28), versions 0-4: offsets a transactional producer commits
// in its transaction (a consume-transform-produce loop's input position).
//
// Behaviour (Kafka's OffsetMetadataManager.commitTransactionalOffset and
// ClassicGroup.validateOffsetCommit with isTransactional):
//   - While Config.Transactions is off: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
//     partition (coordinator.go), as transactional requests are answered today.
//   - Partitions that do not exist: UNKNOWN_TOPIC_OR_PARTITION.
//   - Group missing: generation < 0 (v0-v2 have none) creates a simple Empty group;
//     otherwise ILLEGAL_GENERATION. Dead: COORDINATOR_NOT_AVAILABLE. With a generation
//     >= 0, a member ID or an instance ID (v3+): the member must be current
//     (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID) and the generation the group's
//     (ILLEGAL_GENERATION). Without them the commit is accepted in any state, and a
//     transactional commit is never refused with REBALANCE_IN_PROGRESS.
//   - A producer epoch older than that of the producer's pending offsets in the group:
//     INVALID_PRODUCER_EPOCH (Kafka's log refuses an older epoch of the producer; the
//     client treats it as fenced).
//   - Metadata longer than OffsetMetadataMaxBytes: OFFSET_METADATA_TOO_LARGE.
//   - The accepted offsets are written as pending (Record.Txn) through the group's write
//     queue and answered once durable; store errors are mapped as OffsetCommit's. Pending
//     offsets are not served by OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT) until
//     CompleteTxn commits them (txn_complete.go).
//   - Unlike OffsetCommit, a commit does not refresh the member's session (Kafka).
//
// Not done here: checking with the transaction coordinator that the group's offsets
// partition is in the producer's ongoing transaction (KIP-890 verification; Kafka's log
// append checks it). The Kafka handler that routes key 28 here must do it first.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleTxnOffsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest, respond func(kmsg.Response)) {
	v := r.Version
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var parts []commitPart
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(r.Topics))
	for ti, t := range r.Topics {
		rt := &resp.Topics[ti]
		rt.Default()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			rp.Default()
			rp.Partition = p.Partition
			epoch := int32(-1)
			if v >= 2 {
				epoch = p.LeaderEpoch
			}
			parts = append(parts, commitPart{t.Topic, p.Partition, p.Offset, epoch, p.Metadata, &rp.ErrorCode})
		}
	}
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if v >= 3 {
		generation, memberID, instanceID = r.Generation, r.MemberID, r.InstanceID
	}
	pid, pepoch := r.ProducerID, r.ProducerEpoch
	c.commitOffsets(ctx, r.Group, generation, parts, commitSpec{
		missing: kerr.IllegalGeneration.Code,
		check: func(g *group) int16 {
			if code := g.validateOffsetCommit(generation, memberID, instanceID, true); code != 0 {
				return code
			}
			if e, ok := g.txn.epoch(pid); ok && pepoch < e {
				return kerr.InvalidProducerEpoch.Code
			}
			return 0
		},
		stage: func(g *group, w *write, offsets []Offset) {
			w.txn = make([]TxnOffset, len(offsets))
			for i, o := range offsets {
				w.txn[i] = TxnOffset{ProducerID: pid, ProducerEpoch: pepoch, Offset: o}
			}
			if g.txnQueued == nil {
				g.txnQueued = map[int64]int{}
			}
			g.txnQueued[pid]++
			c.trackTxn(pid, g.name)
		},
		applied: func(g *group, offsets []Offset, err error) {
			g.txnQueued[pid]--
			if g.txnQueued[pid] <= 0 {
				delete(g.txnQueued, pid)
			}
			if err != nil {
				return
			}
			for _, o := range offsets {
				g.txn.add(TxnOffset{ProducerID: pid, ProducerEpoch: pepoch, Offset: o})
			}
		},
	}, respond, resp)
}

// txnCommitTopicError is t answered with code for every partition.
func txnCommitTopicError(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
	rt := kmsg.NewTxnOffsetCommitResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
