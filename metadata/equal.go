package metadata

import (
	"reflect"
	"slices"
)

// Equal reports whether p and q hold the same metadata. Manifests and producer
// snapshots are shared between Views and never modified in place, so the same backing
// array (or pointer) settles most comparisons without reading them; different ones are
// compared by content. Cost: O(1) for partitions a change did not touch.
func (p *Partition) Equal(q *Partition) bool {
	if p.Index != q.Index || p.Leader != q.Leader || p.LeaderEpoch != q.LeaderEpoch ||
		p.LogStartOffset != q.LogStartOffset ||
		p.MovingTo != q.MovingTo || p.Moving != q.Moving ||
		p.MoveGen != q.MoveGen || p.Recovering != q.Recovering || p.RecoverEpoch != q.RecoverEpoch {
		return false
	}
	if !slices.Equal(p.Logs, q.Logs) {
		return false
	}
	if len(p.Objects) != len(q.Objects) {
		return false
	}
	if len(p.Objects) > 0 && &p.Objects[0] != &q.Objects[0] && !slices.EqualFunc(p.Objects, q.Objects, ObjectRange.Equal) {
		return false
	}
	if p.Producers != q.Producers {
		if p.Producers == nil || q.Producers == nil || !reflect.DeepEqual(p.Producers, q.Producers) {
			return false
		}
	}
	return true
}

// SameShape reports whether t and u are the same topic (name and ID) with the same
// partition count, so that they differ at most in some partitions and their configs.
func (t *Topic) SameShape(u *Topic) bool {
	return t.ID == u.ID && t.Name == u.Name && len(t.Partitions) == len(u.Partitions)
}
