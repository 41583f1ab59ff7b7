package kafka

// ShareFetch (key 78, v1; v0 was Kafka 4.0's early access, v2's renew acknowledgements
// are not served): a share group member's fetch from the partitions' leader. The
// request's share session (broker/share session.go) names the partitions; piggybacked
// acknowledgements are applied and made durable first, then each partition's share
// partition (broker/share partition.go) acquires Available records for the member,
// locked for group.share.record.lock.duration.ms; the answer holds the batches read and
// the ranges acquired with their delivery counts. With nothing acquirable the request
// waits up to MaxWaitMillis for new records or released ones. Epoch -1 closes the
// session and releases what the member holds here. Read on the group and each topic.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.ShareFetch.Int16(), min: 1, max: 1, on: shareOn, blocking: true,
		handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
			s.shareWatch(c)
			sl.respond(s.shareFetch(s.withSession(c.ctx, c), c, req.(*kmsg.ShareFetchRequest)))
		}})
}

// shareDefaultMaxRecords bounds a fetch's acquisitions when the request does not.
const shareDefaultMaxRecords = 500

// sharePoll is how often a waiting fetch looks again for records released by locks
// running out or by other members.
const sharePoll = 100 * time.Millisecond

type shareOut struct {
	tp  share.TP
	out kmsg.ShareFetchResponseTopicPartition
}

// shareFetch answers a ShareFetch of connection owner (nil in tests without one).
func (s *Server) shareFetch(ctx context.Context, owner any, req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = int32(s.share.Configs.Defaults().LockDuration.Milliseconds())
	group, member, code := shareMember(ctx, req.GroupID, req.MemberID)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	set, err := s.share.Configs.Get(ctx, group, s.now())
	if err != nil {
		resp.ErrorCode = shareCode(err)
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = int32(set.LockDuration.Milliseconds())
	var adds, forget []share.TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			adds = append(adds, share.TP{Topic: t.TopicID, Partition: p.Partition})
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, share.TP{Topic: t.TopicID, Partition: p})
		}
	}
	parts, err := s.share.Sessions.Fetch(group, member, req.ShareSessionEpoch, adds, forget, owner)
	if err != nil {
		resp.ErrorCode = shareCode(err)
		return resp
	}
	if req.ShareSessionEpoch == 0 { // a new session: see any admin reset (share_admin.go)
		for _, tp := range adds {
			s.share.Parts.Check(ctx, share.Key{Group: group, Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	view := s.meta.View()
	outs := map[share.TP]*shareOut{}
	var order []share.TP
	get := func(tp share.TP) *kmsg.ShareFetchResponseTopicPartition {
		o := outs[tp]
		if o == nil {
			o = &shareOut{tp: tp, out: kmsg.NewShareFetchResponseTopicPartition()}
			o.out.Partition = tp.Partition
			o.out.CurrentLeader.LeaderID, o.out.CurrentLeader.LeaderEpoch = -1, -1
			o.out.Records = []byte{}
			outs[tp] = o
			order = append(order, tp)
		}
		return &o.out
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			tp := share.TP{Topic: t.TopicID, Partition: p.Partition}
			out := get(tp)
			if req.ShareSessionEpoch == 0 {
				out.AcknowledgeErrorCode = kerr.InvalidShareSessionEpoch.Code // no session held them
				continue
			}
			batches := make([]shareAckBatch, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = shareAckBatch{first: b.FirstOffset, last: b.LastOffset, types: b.AcknowledgeTypes}
			}
			out.AcknowledgeErrorCode = s.shareAck(ctx, view, set, group, member, tp, batches, &out.CurrentLeader)
		}
	}
	if req.ShareSessionEpoch == share.FinalEpoch {
		s.shareRelease(ctx, group, member, parts)
		return shareFetchAnswer(resp, outs, order)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shareDefaultMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	deadline := s.now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	wake := make(chan struct{}, 1)
	var waiting []Reader
	defer func() {
		for _, r := range waiting {
			r.Unwait(wake)
		}
	}()
	for first := true; ; first = false {
		got, left := 0, maxBytes
		for _, tp := range parts {
			if got >= maxRecords || left <= 0 {
				break
			}
			n, used, r := s.shareAcquire(ctx, view, set, group, member, tp, maxRecords-got, left, get)
			got, left = got+n, left-used
			if first && r != nil {
				r.Wait(wake)
				waiting = append(waiting, r)
			}
		}
		now := s.now()
		if got > 0 || !now.Before(deadline) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(min(sharePoll, deadline.Sub(now)))
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if ctx.Err() != nil && s.ctx.Err() == nil {
		// The connection closed while this fetch acquired: its answer is lost, so what
		// it acquired is released now (shareWatch released what came before).
		if o, ok := s.share.Sessions.Owner(group, member); !ok || o == owner {
			rctx, cancel := context.WithTimeout(s.ctx, shareReleaseTimeout)
			s.shareRelease(rctx, group, member, parts)
			cancel()
		}
	}
	return shareFetchAnswer(resp, outs, order)
}

// shareAcquire reads one partition from its share partition's next fetch offset and
// acquires what it can for member: the records acquired, the bytes answered, and the
// partition's reader (nil: an error was answered).
func (s *Server) shareAcquire(ctx context.Context, view *metadata.View, set share.Settings, group, member string, tp share.TP, maxRecords, maxBytes int,
	get func(share.TP) *kmsg.ShareFetchResponseTopicPartition) (int, int, Reader) {
	t := view.TopicByID(tp.Topic)
	if t == nil {
		get(tp).ErrorCode = kerr.UnknownTopicID.Code
		return 0, 0, nil
	}
	if !allowedTopic(ctx, acl.OpRead, t.Name) {
		get(tp).ErrorCode = kerr.TopicAuthorizationFailed.Code
		return 0, 0, nil
	}
	r, e, k, err := s.shareEntry(ctx, view, set, group, tp)
	if err != nil {
		out := get(tp)
		out.ErrorCode = shareCode(err)
		s.shareLeader(view, tp, &out.CurrentLeader)
		return 0, 0, nil
	}
	logStart, end, _ := r.LogInfo()
	if set.Isolation == share.ReadCommitted {
		end = r.LastStable() // nothing of an open transaction is acquired
	}
	now := s.now()
	var from int64
	e.With(now, func(p *share.Partition) {
		if p.Start() < logStart {
			p.AdvanceTo(logStart)
		}
		from = p.NextFetch()
	})
	if from >= end {
		return 0, 0, r
	}
	var data []byte
	var aborted []metadata.AbortedTxn
	if set.Isolation == share.ReadCommitted {
		var cr CommittedRead
		cr, err = r.ReadCommitted(ctx, from, maxBytes, true, -1)
		data, aborted = cr.Data, cr.Aborted
	} else {
		data, _, _, err = r.Read(ctx, from, maxBytes, true, -1)
	}
	if err != nil {
		get(tp).ErrorCode = kafkaCode(err)
		return 0, 0, nil
	}
	var spans []share.Span
	var skip []bool // control batches and aborted transactions' batches: archived
	var ends []int
	for off := 0; off < len(data); {
		h, err := recbatch.Parse(data[off:])
		if err != nil || h.Size() > len(data)-off {
			break
		}
		spans = append(spans, share.Span{First: h.BaseOffset, Last: h.LastOffset()})
		skip = append(skip, h.Control() || abortedBatch(&h, aborted))
		off += h.Size()
		ends = append(ends, off)
	}
	var grants []share.Grant
	e.With(s.now(), func(p *share.Partition) {
		p.SetLockDuration(set.LockDuration) // share.record.lock.duration.ms
		grants = p.Acquire(member, now, spans, skip, maxRecords)
	})
	if err := s.share.Parts.Flush(ctx, k, e); err != nil { // control batches archived
		get(tp).ErrorCode = shareCode(err)
		return 0, 0, nil
	}
	if len(grants) == 0 {
		return 0, 0, r
	}
	out := get(tp)
	last := grants[len(grants)-1].Last
	n := 0
	for i, sp := range spans { // the batches up to the last one acquired
		n = ends[i]
		if sp.Last >= last {
			break
		}
	}
	out.Records = data[:n]
	count := 0
	for _, g := range grants {
		out.AcquiredRecords = append(out.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
			FirstOffset: g.First, LastOffset: g.Last, DeliveryCount: g.Deliveries})
		count += int(g.Last - g.First + 1)
	}
	return count, n, r
}

// abortedBatch says whether a batch was written by an aborted transaction: transactional,
// of a producer with an aborted transaction that began at or before it and whose abort
// marker comes after it (Kafka's read_committed rule, with the marker's offset known).
func abortedBatch(h *recbatch.Header, aborted []metadata.AbortedTxn) bool {
	if !h.Transactional() || h.Control() {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && a.First <= h.BaseOffset && h.LastOffset() < a.Last {
			return true
		}
	}
	return false
}

// shareEntry returns the partition's reader and its share partition for group, loaded
// for the partition's current leader epoch; a new share partition starts where the
// group's share.auto.offset.reset says.
func (s *Server) shareEntry(ctx context.Context, view *metadata.View, set share.Settings, group string, tp share.TP) (Reader, *share.Entry, share.Key, error) {
	k := share.Key{Group: group, Topic: tp.Topic, Partition: tp.Partition}
	t := view.TopicByID(tp.Topic)
	if t == nil {
		return nil, nil, k, kerr.UnknownTopicID
	}
	r, err := s.be.Reader(t, tp.Partition, -1, "")
	if err != nil {
		return nil, nil, k, err
	}
	logStart, hw, epoch := r.LogInfo()
	e, err := s.share.Parts.Get(ctx, k, epoch, func() (int64, error) {
		switch set.AutoOffsetReset.Kind {
		case share.ResetEarliest:
			return logStart, nil
		case share.ResetByDuration:
			// The first record written at or after now - duration; none: the end.
			if off, _, ok := r.OffsetForTime(ctx, s.now().Add(-set.AutoOffsetReset.Duration).UnixMilli()); ok {
				return max(off, logStart), nil
			}
		}
		return hw, nil
	})
	return r, e, k, err
}

// shareLeader fills the partition's current leader as the view has it.
func (s *Server) shareLeader(view *metadata.View, tp share.TP, l *kmsg.ShareFetchResponseTopicPartitionCurrentLeader) {
	if t := view.TopicByID(tp.Topic); t != nil && int(tp.Partition) < len(t.Partitions) && tp.Partition >= 0 {
		l.LeaderID, l.LeaderEpoch = t.Partitions[tp.Partition].Leader, t.Partitions[tp.Partition].LeaderEpoch
	}
}

// shareRelease releases what member holds in parts (its session closed).
func (s *Server) shareRelease(ctx context.Context, group, member string, parts []share.TP) {
	keys := make([]share.Key, len(parts))
	for i, tp := range parts {
		keys[i] = share.Key{Group: group, Topic: tp.Topic, Partition: tp.Partition}
	}
	s.share.Parts.ReleaseMember(ctx, member, keys)
}

func shareFetchAnswer(resp *kmsg.ShareFetchResponse, outs map[share.TP]*shareOut, order []share.TP) *kmsg.ShareFetchResponse {
	idx := map[[16]byte]int{}
	for _, tp := range order {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[tp.Topic] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.Topic
			resp.Topics = append(resp.Topics, t)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, outs[tp].out)
	}
	return resp
}
