package kafka

// Leader hints (KIP-951). A partition of a Produce (v10+) or Fetch (v16+) answer that
// says NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries CurrentLeader: the leader
// and leader epoch this broker's current metadata view names for that client, and the
// answer lists that leader's endpoint (Produce's Brokers, Fetch's NodeEndpoints), so a
// client that implements KIP-951 (Java 3.7+, franz-go, librdkafka 2.5+) sends its retry
// to the new leader at once instead of after a Metadata round trip. Kafka fills the same
// fields (KafkaApis.handleProduceRequest for NOT_LEADER_OR_FOLLOWER, handleFetchRequest
// for both errors); Weir's Produce has no leader epoch to fence, so it only ever answers
// NOT_LEADER_OR_FOLLOWER.
//
// The leader named is the one Metadata would give the same client on the same listener
// (servingLeader): for a client of a known zone the zone's broker that stands in for a
// leader in another zone, never the cross-zone leader Metadata hides from it; -1 (no
// endpoint) while the partition has no serving leader (its leader is fenced or still
// recovering it), which leaves the client to its Metadata refresh. The epoch is always
// the partition's real leader epoch, as in Metadata: a client moves only on an epoch
// newer than the one it knows, so a hint naming the broker that just refused (this
// broker's lease lapsed, the partition is still loading here) changes nothing.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
)

// Versions from which the answers have the KIP-951 fields.
const (
	produceHintVersion = 10
	fetchHintVersion   = 16
)

// leaderHints computes the hints of one answer, against the view current when the first
// hint is asked for, and gathers the endpoints of the leaders it named, each once, in the
// order first named.
type leaderHints struct {
	s     *Server
	c     *conn
	zone  string            // the client's ("" unknown)
	view  *metadata.View    // nil until the first hint
	zv    *routing.ZoneView // nil: no client zone
	named map[int32]bool
	nodes []metadata.Broker
}

// fill sets a partition's hint (leaderID, leaderEpoch) when its code asks for one:
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH. topic looks the partition's topic up in
// the view (nil: not in it).
func (h *leaderHints) fill(code int16, topic func(*metadata.View) *metadata.Topic, index int32, leaderID, leaderEpoch *int32) {
	if code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code {
		return
	}
	if h.view == nil {
		h.view = h.s.meta.View()
		if h.zone != "" {
			h.zv = h.s.zoneView(h.view)
		}
	}
	*leaderID, *leaderEpoch = h.leader(topic(h.view), index)
}

// leader is the hint for partition index of t (nil: not in the view): the leader Metadata
// would name (-1: none) and the partition's leader epoch (-1: unknown partition). A named
// leader's endpoint is added to the answer's list.
func (h *leaderHints) leader(t *metadata.Topic, index int32) (leader, epoch int32) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return -1, -1
	}
	p := t.Partitions[index]
	leader = servingLeader(t, p, h.active, h.zv, h.zone)
	if leader >= 0 && !h.named[leader] {
		if h.named == nil {
			h.named = map[int32]bool{}
		}
		h.named[leader] = true
		br, _ := h.view.Broker(leader) // active: it is in the view
		h.nodes = append(h.nodes, br)
	}
	return leader, p.LeaderEpoch
}

func (h *leaderHints) active(id int32) bool {
	br, ok := h.view.Broker(id)
	return ok && br.Active()
}

// endpoints lists the named leaders as the answer's broker type, each given by mk with
// its address on the request's listener (as Metadata lists it) and its rack.
func endpoints[B any](h *leaderHints, mk func(id int32, host string, port int32, rack *string) B) []B {
	var out []B
	for _, br := range h.nodes {
		host, port := br.Endpoint(h.c.lis.Name)
		var rack *string
		if br.Rack != "" {
			r := br.Rack
			rack = &r
		}
		out = append(out, mk(br.ID, host, port, rack))
	}
	return out
}

// hintProduce fills the hints of a Produce answer (v10+) to a client of zone on c.
func (s *Server) hintProduce(c *conn, zone string, resp *kmsg.ProduceResponse) {
	if resp.Version < produceHintVersion {
		return
	}
	h := &leaderHints{s: s, c: c, zone: zone}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		byName := func(v *metadata.View) *metadata.Topic { return v.Topics[rt.Topic] }
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			h.fill(rp.ErrorCode, byName, rp.Partition, &rp.CurrentLeader.LeaderID, &rp.CurrentLeader.LeaderEpoch)
		}
	}
	resp.Brokers = append(resp.Brokers, endpoints(h, func(id int32, host string, port int32, rack *string) kmsg.ProduceResponseBroker {
		return kmsg.ProduceResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
	})...)
}

// hintFetch fills the hints of a Fetch answer (v16+, whose topics are named by ID) to a
// client of zone on c.
func (s *Server) hintFetch(c *conn, zone string, resp *kmsg.FetchResponse) {
	if resp.Version < fetchHintVersion {
		return
	}
	h := &leaderHints{s: s, c: c, zone: zone}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		byID := func(v *metadata.View) *metadata.Topic { return v.TopicByID(rt.TopicID) }
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			h.fill(rp.ErrorCode, byID, rp.Partition, &rp.CurrentLeader.LeaderID, &rp.CurrentLeader.LeaderEpoch)
		}
	}
	resp.Brokers = append(resp.Brokers, endpoints(h, func(id int32, host string, port int32, rack *string) kmsg.FetchResponseBroker {
		return kmsg.FetchResponseBroker{NodeID: id, Host: host, Port: port, Rack: rack}
	})...)
}
