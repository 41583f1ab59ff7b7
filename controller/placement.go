package controller

import (
	"sort"

	"github.com/weir-io/weir/metadata"
)

// placer chooses leaders for new partitions of one topic, as Kafka spreads a topic's
// partitions round robin over brokers and racks: only accepting brokers (active, not
// draining); first the broker leading the fewest partitions of this topic, then the
// zone (rack) leading the fewest of this topic, then the broker leading the fewest
// partitions in all, then the zone leading the fewest in all, then a zone other than the
// previous pick's, then the lowest broker ID. A topic's partitions spread over every
// broker and zone whatever the cluster's load (a just-joined, empty broker does not take
// a whole new topic: issue 24); load only breaks ties, and the balancer evens the rest.
// Deterministic given the View, and it counts its own picks, so a batch spreads evenly.
type placer struct {
	brokers   []metadata.Broker
	count     map[int32]int  // partitions led, all topics
	zone      map[string]int // likewise per zone
	topic     map[int32]int  // partitions of the topic being placed
	topicZone map[string]int // likewise per zone
	lastZone  string
	picked    bool
}

// newPlacer counts v's leaders; topic (nil for a new one) is the topic that gets the
// new partitions, whose existing partitions count first.
func newPlacer(v *metadata.View, topic *metadata.Topic) *placer {
	p := &placer{count: map[int32]int{}, zone: map[string]int{}, topic: map[int32]int{}, topicZone: map[string]int{}}
	for _, b := range v.Brokers {
		if b.Accepting() {
			p.brokers = append(p.brokers, b)
			p.count[b.ID] = 0
		}
	}
	sort.Slice(p.brokers, func(i, j int) bool { return p.brokers[i].ID < p.brokers[j].ID })
	rack := make(map[int32]string, len(p.brokers))
	for _, b := range p.brokers {
		rack[b.ID] = b.Rack
	}
	for _, t := range v.Topics {
		for _, part := range t.Partitions {
			if r, ok := rack[part.Leader]; ok {
				p.count[part.Leader]++
				p.zone[r]++
			}
		}
	}
	if topic != nil {
		for _, part := range topic.Partitions {
			if r, ok := rack[part.Leader]; ok {
				p.topic[part.Leader]++
				p.topicZone[r]++
			}
		}
	}
	return p
}

// next returns the leader for one more partition; false when no broker is active.
func (p *placer) next() (int32, bool) {
	if len(p.brokers) == 0 {
		return -1, false
	}
	best := -1
	for i, b := range p.brokers {
		if best < 0 || p.better(b, p.brokers[best]) {
			best = i
		}
	}
	b := p.brokers[best]
	p.count[b.ID]++
	p.zone[b.Rack]++
	p.topic[b.ID]++
	p.topicZone[b.Rack]++
	p.lastZone, p.picked = b.Rack, true
	return b.ID, true
}

// better reports whether a should be picked over b (b has the lower ID).
func (p *placer) better(a, b metadata.Broker) bool {
	for _, c := range [][2]int{
		{p.topic[a.ID], p.topic[b.ID]},
		{p.topicZone[a.Rack], p.topicZone[b.Rack]},
		{p.count[a.ID], p.count[b.ID]},
		{p.zone[a.Rack], p.zone[b.Rack]},
	} {
		if c[0] != c[1] {
			return c[0] < c[1]
		}
	}
	if p.picked {
		if sa, sb := a.Rack == p.lastZone, b.Rack == p.lastZone; sa != sb {
			return !sa
		}
	}
	return false
}

// place chooses leaders for n new partitions of topic (nil: a new topic), starting at
// index first.
func place(v *metadata.View, topic *metadata.Topic, first, n int32) ([]metadata.Partition, bool) {
	p := newPlacer(v, topic)
	out := make([]metadata.Partition, n)
	for i := range out {
		leader, ok := p.next()
		if !ok {
			return nil, false
		}
		out[i] = newPartition(first+int32(i), leader)
	}
	return out, true
}
