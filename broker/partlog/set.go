package partlog

import (
	"sync"

	"github.com/weir-io/weir/metadata"
)

// Set is the partitions a broker leads, by topic ID and index. Its lock may be held while
// taking a Partition's (never the reverse).
type Set struct {
	mu    sync.RWMutex
	parts map[metadata.TopicID]map[int32]*Partition
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{parts: map[metadata.TopicID]map[int32]*Partition{}} }

// Get returns the partition, or nil.
func (s *Set) Get(id metadata.TopicID, index int32) *Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.parts[id][index]
}

// All returns every partition, in no particular order.
func (s *Set) All() []*Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Partition
	for _, ps := range s.parts {
		for _, p := range ps {
			out = append(out, p)
		}
	}
	return out
}

// Len is the number of partitions.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, ps := range s.parts {
		n += len(ps)
	}
	return n
}

// Update runs fn with the set locked for writing; fn may read and change it through tx.
func (s *Set) Update(fn func(tx SetTx)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(SetTx{s})
}

// SetTx changes a locked Set (inside Update).
type SetTx struct{ s *Set }

// Get returns the partition, or nil.
func (tx SetTx) Get(id metadata.TopicID, index int32) *Partition { return tx.s.parts[id][index] }

// Put adds p.
func (tx SetTx) Put(p *Partition) {
	ps := tx.s.parts[p.id]
	if ps == nil {
		ps = map[int32]*Partition{}
		tx.s.parts[p.id] = ps
	}
	ps[p.index] = p
}

// Delete removes p.
func (tx SetTx) Delete(p *Partition) {
	delete(tx.s.parts[p.id], p.index)
	if len(tx.s.parts[p.id]) == 0 {
		delete(tx.s.parts, p.id)
	}
}

// Topics calls fn for every topic ID in the set and its partitions.
func (tx SetTx) Topics(fn func(id metadata.TopicID, ps map[int32]*Partition)) {
	for id, ps := range tx.s.parts {
		fn(id, ps)
	}
}
