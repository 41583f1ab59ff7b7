package acl

import (
	"cmp"
	"slices"
	"sync"
)

// MaxBindings bounds the ACLs of a cluster: they travel in every metadata View.
const MaxBindings = 100000

// Set is an immutable set of bindings with an index by resource type and name, built
// once on first use: a request's check looks up its resource's literal name, the
// literal "*" and each prefix length present, never scanning the bindings.
type Set struct {
	bindings []Binding // sorted, no duplicates; never modified

	once sync.Once
	idx  map[ResourceType]*typeIndex
}

type typeIndex struct {
	literal  map[string][]*Binding // "*" included
	prefixed map[string][]*Binding
	lens     []int // distinct lengths of the prefixed names, ascending
}

// NewSet returns the set of bs (sorted and deduplicated; bs is not kept).
func NewSet(bs []Binding) *Set {
	return &Set{bindings: Normalize(bs)}
}

// Normalize returns bs sorted with duplicates removed, in a new slice.
func Normalize(bs []Binding) []Binding {
	out := slices.Clone(bs)
	slices.SortFunc(out, compare)
	return slices.Compact(out)
}

func compare(a, b Binding) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// Bindings returns the set's bindings, sorted; the caller must not modify them.
func (s *Set) Bindings() []Binding {
	if s == nil {
		return nil
	}
	return s.bindings
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.bindings)
}

// Select returns the bindings f matches.
func (s *Set) Select(f Filter) []Binding {
	var out []Binding
	for _, b := range s.Bindings() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

func (s *Set) index(rt ResourceType) *typeIndex {
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		s.idx = map[ResourceType]*typeIndex{}
		for i := range s.bindings {
			b := &s.bindings[i]
			ti := s.idx[b.ResourceType]
			if ti == nil {
				ti = &typeIndex{literal: map[string][]*Binding{}, prefixed: map[string][]*Binding{}}
				s.idx[b.ResourceType] = ti
			}
			if b.PatternType == PatternPrefixed {
				if _, seen := ti.prefixed[b.ResourceName]; !seen && !slices.Contains(ti.lens, len(b.ResourceName)) {
					ti.lens = append(ti.lens, len(b.ResourceName))
				}
				ti.prefixed[b.ResourceName] = append(ti.prefixed[b.ResourceName], b)
			} else {
				ti.literal[b.ResourceName] = append(ti.literal[b.ResourceName], b)
			}
		}
		for _, ti := range s.idx {
			slices.Sort(ti.lens)
		}
	})
	return s.idx[rt]
}

// each calls fn with every binding that applies to the resource rt/name (literal name,
// literal "*", prefixes) until fn returns false; it reports whether there was any.
func (s *Set) each(rt ResourceType, name string, fn func(*Binding) bool) bool {
	ti := s.index(rt)
	if ti == nil {
		return false
	}
	any := false
	visit := func(l []*Binding) bool {
		for _, b := range l {
			any = true
			if !fn(b) {
				return false
			}
		}
		return true
	}
	if !visit(ti.literal[name]) {
		return any
	}
	if name != Wildcard && !visit(ti.literal[Wildcard]) {
		return any
	}
	for _, l := range ti.lens {
		if l > len(name) {
			break
		}
		if !visit(ti.prefixed[name[:l]]) {
			return any
		}
	}
	return any
}

// Add returns existing plus the bindings of add it lacks (sorted), and how many were new.
func Add(existing, add []Binding) ([]Binding, int) {
	out := Normalize(append(slices.Clip(existing), add...))
	return out, len(out) - len(Normalize(existing))
}

// Remove returns the bindings of existing no filter matches, and for each filter the
// bindings it matched (a binding matched by several filters is listed under each).
func Remove(existing []Binding, filters []Filter) ([]Binding, [][]Binding) {
	matched := make([][]Binding, len(filters))
	var kept []Binding
	for _, b := range existing {
		hit := false
		for i, f := range filters {
			if f.Matches(b) {
				matched[i] = append(matched[i], b)
				hit = true
			}
		}
		if !hit {
			kept = append(kept, b)
		}
	}
	return kept, matched
}
