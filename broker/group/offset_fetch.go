package group

// OffsetFetch (API key 9), versions 0-9 (v10 switches to topic IDs and is
// not implemented).
//
// Behaviour:
//   - v0-v7 fetch one group (Group/Topics); v8+ fetch several (Groups), each
//     with its own topics and error code.
//   - Null topics (v2+) return every committed offset of the group, sorted by
//     topic and partition. Otherwise every requested partition is returned;
//     partitions without a committed offset (and unknown groups) get offset
//     -1, leader epoch -1, empty metadata and no error, as in Kafka.
//   - Offsets are those applied in memory, i.e. acknowledged as durable by
//     the Store (a commit still being written is not visible).
//   - An offset committed to a topic that has since been deleted (or deleted
//     and created again under its name: another topic ID) is not returned;
//     the next expiry round deletes it (expire.go).
//   - Offsets pending in a transaction (TxnOffsetCommit) are not returned.
//     With RequireStable (v7+), a partition with a pending offset gets
//     UNSTABLE_OFFSET_COMMIT (offset -1), also in a fetch of all topics
//     (Kafka's fetchOffsets / fetchAllOffsets); the client retries until the
//     transaction ends.
//   - v9+ may name a member (ID and epoch). For a KIP-848 consumer group the
//     member must exist (else UNKNOWN_MEMBER_ID) and the epoch must be its
//     current member epoch (else STALE_MEMBER_EPOCH), as a group-level error
//     (Kafka's ConsumerGroup.validateOffsetFetch): a member fenced or behind a
//     rebalance does not start consuming from offsets it has no right to. No
//     ID and a negative epoch (admin clients) is always accepted; classic
//     groups ignore both, as Kafka does.
// (Kafka v0 read offsets from ZooKeeper; here all versions read the same
// store.)

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fetchedPartition struct {
	partition int32
	offset    int64
	epoch     int32
	metadata  string
	code      int16
}

// unstablePartition is the answer for a partition with a pending transactional offset
// when the client requires stable offsets.
func unstablePartition(p int32) fetchedPartition {
	return fetchedPartition{partition: p, offset: -1, epoch: -1, code: kerr.UnstableOffsetCommit.Code}
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

type fetchTopic struct {
	topic      string
	partitions []int32
}

// fetchMember is the member an OffsetFetch v9+ names (id nil: none).
type fetchMember struct {
	id    *string
	epoch int32
}

// fetchOffsets reads a group's offsets; topics == nil means all. A non-zero code is a
// group-level error (the member check) and comes without offsets.
func (c *Coordinator) fetchOffsets(name string, topics []fetchTopic, requireStable bool, member fetchMember) ([]fetchedTopic, int16) {
	var out []fetchedTopic
	g := c.lockedGroup(name, false)
	if g != nil {
		defer g.unlock()
		if g.cg != nil {
			if code := g.validateConsumerFetch(member); code != 0 {
				return nil, code
			}
		}
	}
	if topics == nil {
		if g == nil {
			return nil, 0
		}
		names := make([]string, 0, len(g.offsets))
		for t := range g.offsets {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			ft := fetchedTopic{topic: t}
			for _, o := range g.offsets[t] {
				switch {
				case !c.current(o):
				case requireStable && g.txn.unstable(t, o.Partition):
					ft.partitions = append(ft.partitions, unstablePartition(o.Partition))
				default:
					ft.partitions = append(ft.partitions, fetchedPartition{o.Partition, o.Offset, o.LeaderEpoch, o.Metadata, 0})
				}
			}
			if len(ft.partitions) == 0 {
				continue
			}
			sort.Slice(ft.partitions, func(i, j int) bool { return ft.partitions[i].partition < ft.partitions[j].partition })
			out = append(out, ft)
		}
		return out, 0
	}
	for _, t := range topics {
		ft := fetchedTopic{topic: t.topic}
		for _, p := range t.partitions {
			fp := fetchedPartition{partition: p, offset: -1, epoch: -1}
			if g != nil {
				if requireStable && g.txn.unstable(t.topic, p) {
					fp = unstablePartition(p)
				} else if o, ok := g.offset(t.topic, p); ok && c.current(o) {
					fp = fetchedPartition{p, o.Offset, o.LeaderEpoch, o.Metadata, 0}
				}
			}
			ft.partitions = append(ft.partitions, fp)
		}
		out = append(out, ft)
	}
	return out, 0
}

func (c *Coordinator) handleOffsetFetch(r *kmsg.OffsetFetchRequest, respond func(kmsg.Response)) {
	v := r.Version
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if v >= 8 {
		for _, rg := range r.Groups {
			var topics []fetchTopic
			if rg.Topics != nil {
				topics = make([]fetchTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, fetchTopic{t.Topic, t.Partitions})
				}
			}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			member := fetchMember{epoch: -1}
			if v >= 9 {
				member = fetchMember{rg.MemberID, rg.MemberEpoch}
			}
			fetched, code := c.fetchOffsets(rg.Group, topics, r.RequireStable, member)
			g.ErrorCode = code
			for _, ft := range fetched {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = ft.topic
				for _, fp := range ft.partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = fp.partition, fp.offset, fp.epoch, strp(fp.metadata), fp.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		respond(resp)
		return
	}

	var topics []fetchTopic
	if r.Topics != nil || v < 2 {
		topics = make([]fetchTopic, 0, len(r.Topics))
		for _, t := range r.Topics {
			topics = append(topics, fetchTopic{t.Topic, t.Partitions})
		}
	}
	requireStable := v >= 7 && r.RequireStable
	fetched, _ := c.fetchOffsets(r.Group, topics, requireStable, fetchMember{epoch: -1})
	for _, ft := range fetched {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.topic
		for _, fp := range ft.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = fp.partition, fp.offset, fp.epoch, strp(fp.metadata), fp.code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	respond(resp)
}

// current reports whether o was committed to the topic that now has its name: offsets
// committed before topic IDs were recorded always are.
func (c *Coordinator) current(o Offset) bool {
	if o.TopicID == "" {
		return true
	}
	ids, ok := c.topics.(TopicIDs)
	if !ok {
		return true
	}
	id, exists := ids.TopicID(o.Topic)
	return exists && id == o.TopicID
}

// topicID is the current ID of topic, or "" when unknown.
func (c *Coordinator) topicID(topic string) string {
	if ids, ok := c.topics.(TopicIDs); ok {
		if id, exists := ids.TopicID(topic); exists {
			return id
		}
	}
	return ""
}
