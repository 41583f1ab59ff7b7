package kafka

// What a fetch reads (fetchPart: a request's partitions, or its session's), and the
// session's side of the answer (fetchSessions.finish): fetch_session.go has the rules.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchPart is one partition a fetch reads, from its request or from its session.
type fetchPart struct {
	topic string   // the topic's name as the fetch knows it (before v13)
	id    [16]byte // its ID (v13+)
	group int      // consecutive parts of one group share a topic of the answer
	req   kmsg.FetchRequestTopicPartition
	// sp is the session's entry (incremental fetches): valid while the session's epoch
	// is the one the fetch moved it to, which finish checks first.
	sp *sessionPart
}

// requestParts is the partitions a full fetch names, in request order, grouped by the
// request's topics.
func requestParts(req *kmsg.FetchRequest) []fetchPart {
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	parts := make([]fetchPart, 0, n)
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			parts = append(parts, fetchPart{topic: rt.Topic, id: rt.TopicID, group: i, req: rt.Partitions[j]})
		}
	}
	return parts
}

// snapshot is the session's partitions for one fetch (s.mu held), consecutive
// partitions of one topic grouped.
func (s *fetchSession) snapshot() []fetchPart {
	parts := make([]fetchPart, len(s.parts))
	g := -1
	for i, p := range s.parts {
		if i == 0 || p.key.id != s.parts[i-1].key.id || p.key.topic != s.parts[i-1].key.topic {
			g++
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = p.key.partition, p.leaderEpoch, p.fetchOffset
		rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = p.lastEpoch, p.logStartReq, p.maxBytes
		parts[i] = fetchPart{topic: p.key.topic, id: p.key.id, group: g, req: rp, sp: p}
	}
	return parts
}

// finish gives a fetch's answer resp (one partition per part, in parts' order) its
// session id. A full fetch that asked for a session creates it from what was answered;
// an incremental one records what each partition was answered and keeps in resp only
// the partitions with something new (a fresh slice: the read's own are left as they
// were). An error (another fetch of the session came in between) is the answer.
func (c *fetchSessions) finish(fc *fetchSessionCtx, parts []fetchPart, resp *kmsg.FetchResponse) error {
	switch fc.kind {
	case fetchFull:
		s := &fetchSession{ids: fc.ids, epoch: nextEpoch(0), byKey: make(map[sessionKey]*sessionPart, len(parts))}
		eachOut(resp, func(i int, out *kmsg.FetchResponseTopicPartition) {
			fp := &parts[i]
			k := s.key(fp.id, fp.topic, fp.req.Partition)
			if s.byKey[k] != nil {
				return // named twice: one entry
			}
			p := &sessionPart{key: k}
			p.set(&fp.req)
			p.answered(out)
			s.byKey[k] = p
			s.parts = append(s.parts, p)
		})
		if c.insert(s, len(s.parts)) {
			resp.SessionID = s.id
		}
	case fetchIncremental:
		s := fc.sess
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.epoch != fc.epoch {
			return fmt.Errorf("%w: session %d moved to epoch %d while a fetch of epoch %d was read", errFetchSessionEpoch, s.id, s.epoch, fc.epoch)
		}
		resp.SessionID = s.id
		s.keepChanged(parts, resp)
	}
	return nil
}

// keepChanged is finish for an incremental fetch (s.mu held): resp keeps the partitions
// an incremental answer must carry, and those that returned records move to the end of
// the session's order.
func (s *fetchSession) keepChanged(parts []fetchPart, resp *kmsg.FetchResponse) {
	var topics []kmsg.FetchResponseTopic
	var sent map[*sessionPart]bool
	i := 0
	for ti := range resp.Topics {
		var kept []kmsg.FetchResponseTopicPartition
		for j := range resp.Topics[ti].Partitions {
			out, p := &resp.Topics[ti].Partitions[j], parts[i].sp
			i++
			if !p.answered(out) {
				continue
			}
			if len(out.RecordBatches) > 0 {
				if sent == nil {
					sent = map[*sessionPart]bool{}
				}
				sent[p] = true
			}
			kept = append(kept, *out)
		}
		if kept != nil {
			st := resp.Topics[ti]
			st.Partitions = kept
			topics = append(topics, st)
		}
	}
	resp.Topics = topics
	if len(sent) == 0 {
		return
	}
	order := make([]*sessionPart, 0, len(s.parts))
	for _, p := range s.parts {
		if !sent[p] {
			order = append(order, p)
		}
	}
	for _, p := range s.parts {
		if sent[p] {
			order = append(order, p)
		}
	}
	s.parts = order
}

// eachOut calls f with every partition of resp and its index, in order.
func eachOut(resp *kmsg.FetchResponse, f func(i int, out *kmsg.FetchResponseTopicPartition)) {
	i := 0
	for ti := range resp.Topics {
		for j := range resp.Topics[ti].Partitions {
			f(i, &resp.Topics[ti].Partitions[j])
			i++
		}
	}
}
