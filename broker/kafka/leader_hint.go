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

// leaderHints computes the hints of one answer against one metadata view and gathers the
// endpoints of the leaders it named, each once, in the order first named.
type leaderHints struct {
	view  *metadata.View
	zv    *routing.ZoneView // nil: no client zone
	zone  string
	lname string // the request's listener name: endpoints are given on listeners of that name
	named map[int32]bool
	nodes []metadata.Broker
}

// newLeaderHints starts the hints of an answer to a client of zone ("" unknown) on c.
func (s *Server) newLeaderHints(c *conn, zone string) *leaderHints {
	h := &leaderHints{view: s.meta.View(), zone: zone, lname: c.lis.Name}
	if zone != "" {
		h.zv = s.zoneView(h.view)
	}
	return h
}

// wantsHint reports whether a partition answered with code gets a leader hint.
func wantsHint(code int16) bool {
	return code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code
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

// endpoint is a named leader's address and rack, as Metadata lists it on the listener.
func (h *leaderHints) endpoint(br metadata.Broker) (host string, port int32, rack *string) {
	host, port = br.Endpoint(h.lname)
	if br.Rack != "" {
		r := br.Rack
		rack = &r
	}
	return host, port, rack
}

// hintProduce fills the hints of a Produce answer (v10+) from the current view.
func (s *Server) hintProduce(c *conn, zone string, resp *kmsg.ProduceResponse) {
	if resp.Version < produceHintVersion {
		return
	}
	var h *leaderHints
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if !wantsHint(rp.ErrorCode) {
				continue
			}
			if h == nil {
				h = s.newLeaderHints(c, zone)
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = h.leader(h.view.Topics[rt.Topic], rp.Partition)
		}
	}
	if h == nil {
		return
	}
	for _, br := range h.nodes {
		b := kmsg.NewProduceResponseBroker()
		b.NodeID = br.ID
		b.Host, b.Port, b.Rack = h.endpoint(br)
		resp.Brokers = append(resp.Brokers, b)
	}
}

// hintFetch fills the hints of a Fetch answer (v16+, so topics are named by ID) from the
// current view.
func (s *Server) hintFetch(c *conn, zone string, resp *kmsg.FetchResponse) {
	if resp.Version < fetchHintVersion {
		return
	}
	var h *leaderHints
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if !wantsHint(rp.ErrorCode) {
				continue
			}
			if h == nil {
				h = s.newLeaderHints(c, zone)
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = h.leader(h.view.TopicByID(rt.TopicID), rp.Partition)
		}
	}
	if h == nil {
		return
	}
	for _, br := range h.nodes {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID = br.ID
		b.Host, b.Port, b.Rack = h.endpoint(br)
		resp.Brokers = append(resp.Brokers, b)
	}
}
