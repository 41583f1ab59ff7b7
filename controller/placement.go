package controller

import (
	"sort"

	"github.com/weir-io/weir/metadata"
)

// placer chooses leaders for new partitions: only accepting brokers (active, not
// draining), the one leading the fewest partitions first; ties go to the zone (rack)
// leading the fewest, then to a zone other than the previous pick's, then to the lowest
// broker ID. Deterministic given the View, and it counts its own picks, so a batch
// spreads evenly too.
type placer struct {
	brokers  []metadata.Broker
	count    map[int32]int
	zone     map[string]int
	lastZone string
	picked   bool
}

func newPlacer(v *metadata.View) *placer {
	p := &placer{count: map[int32]int{}, zone: map[string]int{}}
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
	p.lastZone, p.picked = b.Rack, true
	return b.ID, true
}

// better reports whether a should be picked over b (b has the lower ID).
func (p *placer) better(a, b metadata.Broker) bool {
	if ca, cb := p.count[a.ID], p.count[b.ID]; ca != cb {
		return ca < cb
	}
	if za, zb := p.zone[a.Rack], p.zone[b.Rack]; za != zb {
		return za < zb
	}
	if p.picked {
		if sa, sb := a.Rack == p.lastZone, b.Rack == p.lastZone; sa != sb {
			return !sa
		}
	}
	return false
}

// place chooses leaders for n new partitions starting at index first.
func place(v *metadata.View, first, n int32) ([]metadata.Partition, bool) {
	p := newPlacer(v)
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
