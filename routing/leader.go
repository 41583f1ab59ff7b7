package routing

import (
	"encoding/binary"
	"sort"

	"github.com/weir-io/weir/metadata"
)

// ZoneView is the per-zone view of one metadata.View: each live broker's zone and
// each zone's candidates (accepting brokers: active, neither draining nor fenced),
// from which it picks, per partition, the broker a client of a zone is sent to. It is
// immutable and safe for concurrent use; build one per View (NewZoneView is O(brokers))
// and keep it while the View is current.
type ZoneView struct {
	version uint64
	live    map[int32]string   // every active (live or draining) broker → its zone ("" when it has none)
	peers   map[string][]int32 // zone → its accepting brokers, ascending IDs
	zones   []string           // zones with at least one accepting broker, sorted
}

// NewZoneView indexes v's brokers by zone. A broker without a rack is in no zone.
func NewZoneView(v *metadata.View) *ZoneView {
	z := &ZoneView{live: map[int32]string{}, peers: map[string][]int32{}}
	if v == nil {
		return z
	}
	z.version = v.Version
	for _, b := range v.Brokers {
		if !b.Active() {
			continue
		}
		z.live[b.ID] = b.Rack
		if b.Accepting() && b.Rack != "" {
			z.peers[b.Rack] = append(z.peers[b.Rack], b.ID)
		}
	}
	for zone, ids := range z.peers {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		z.zones = append(z.zones, zone)
	}
	sort.Strings(z.zones)
	return z
}

// Version is the metadata version the view was built from.
func (z *ZoneView) Version() uint64 { return z.version }

// Zone is broker id's zone; "" when it has none, is fenced or unknown.
func (z *ZoneView) Zone(id int32) string { return z.live[id] }

// Zones lists the zones with at least one accepting broker, sorted. Do not modify.
func (z *ZoneView) Zones() []string { return z.zones }

// HasZone reports whether zone has an accepting broker: a client claiming another zone
// is routed as one whose zone is unknown, and should be counted as such.
func (z *ZoneView) HasZone(zone string) bool { return len(z.peers[zone]) > 0 }

// Peers lists zone's accepting brokers (the candidates of its choices), ascending
// IDs. Do not modify.
func (z *ZoneView) Peers(zone string) []int32 { return z.peers[zone] }

// Leader is the broker a client in zone is told leads a partition (Metadata) and sends
// its produce to: leader (the real one) when it is in zone; otherwise the partition's
// choice among zone's accepting brokers (Choose), which proxies the produce to the real
// leader. It is leader itself when zone is "" or has no accepting broker, and when the
// partition has no serving leader (leader < 0, or not a live broker: the caller reports
// LEADER_NOT_AVAILABLE, as for any client). The caller also reports a partition being
// recovered without a leader before asking.
func (z *ZoneView) Leader(zone string, topic metadata.TopicID, partition, leader int32) int32 {
	if zone == "" || leader < 0 {
		return leader
	}
	lz, live := z.live[leader]
	if !live || lz == zone {
		return leader
	}
	if c := Choose(topic, partition, z.peers[zone]); c >= 0 {
		return c
	}
	return leader
}

// ReadReplica is the broker a consumer in zone reads a partition from (KIP-392's
// preferred read replica): the same broker as Leader, so the zone's proxy for a
// partition is also its reader, and the real leader whenever that is in zone or
// nothing else can be chosen. A leader answers a Fetch from a consumer of zone with
// this ID as preferred_read_replica when it is not itself.
func (z *ZoneView) ReadReplica(zone string, topic metadata.TopicID, partition, leader int32) int32 {
	return z.Leader(zone, topic, partition, leader)
}

// IsProxy reports whether broker self stands in for a partition's leader in its own
// zone: self is not the leader, the leader is live in another zone, and self is the
// partition's choice among its zone's accepting brokers. A broker that is not
// accepting (draining) is nobody's choice.
func (z *ZoneView) IsProxy(self int32, topic metadata.TopicID, partition, leader int32) bool {
	if self == leader {
		return false
	}
	zone := z.live[self]
	return zone != "" && z.Leader(zone, topic, partition, leader) == self
}

// ZoneLeader is ZoneView.Leader without building a view: for one partition of v, the
// broker a client in zone is sent to. It scans v's brokers (O(brokers)); a caller
// answering for many partitions builds a ZoneView once instead.
func ZoneLeader(v *metadata.View, topic metadata.TopicID, partition, leader int32, zone string) int32 {
	if zone == "" || leader < 0 || v == nil {
		return leader
	}
	lb, ok := v.Broker(leader)
	if !ok || !lb.Active() || lb.Rack == zone {
		return leader
	}
	best, bestScore := int32(-1), uint64(0)
	h := partitionHash(topic, partition)
	for _, b := range v.Brokers {
		if b.Rack != zone || !b.Accepting() {
			continue
		}
		s := scoreFrom(h, b.ID)
		if best < 0 || s > bestScore || s == bestScore && b.ID < best {
			best, bestScore = b.ID, s
		}
	}
	if best < 0 {
		return leader
	}
	return best
}

// Choose picks the partition's broker among candidates by rendezvous hashing: the
// highest Score, the lowest ID on a tie; -1 when there is none. The choice depends on
// the partition and the set of candidates only (not their order), so removing a
// candidate moves only the partitions that had chosen it, and adding one moves only
// those it now wins.
func Choose(topic metadata.TopicID, partition int32, candidates []int32) int32 {
	best, bestScore := int32(-1), uint64(0)
	h := partitionHash(topic, partition)
	for _, id := range candidates {
		s := scoreFrom(h, id)
		if best < 0 || s > bestScore || s == bestScore && id < best {
			best, bestScore = id, s
		}
	}
	return best
}

// Score is broker's rendezvous weight for a partition: the splitmix64 finaliser of the
// FNV-1a 64 hash of topic ID [16] | partition int32 BE | broker int32 BE. Part of the
// cluster protocol: every broker must compute the same (TestRendezvousGolden).
func Score(topic metadata.TopicID, partition, broker int32) uint64 {
	return scoreFrom(partitionHash(topic, partition), broker)
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// partitionHash is the FNV-1a 64 state after topic ID and partition, shared by every
// candidate's score.
func partitionHash(topic metadata.TopicID, partition int32) uint64 {
	var buf [20]byte
	copy(buf[:16], topic[:])
	binary.BigEndian.PutUint32(buf[16:], uint32(partition))
	h := uint64(fnvOffset64)
	for _, c := range buf {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

func scoreFrom(h uint64, broker int32) uint64 {
	var buf [4]byte
	binary.BigEndian.PutUint32(buf[:], uint32(broker))
	for _, c := range buf {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return mix64(h)
}

// mix64 is splitmix64's finaliser: every input bit affects every output bit, which
// FNV's last multiplications alone do not give the high bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
