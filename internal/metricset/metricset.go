// Package metricset registers a component's Prometheus collectors on an injected
// Registerer and unregisters them all when the component closes, so no component touches
// the global registry and a component can be restarted on the same Registerer (two
// brokers in one test process each get their own registry).
package metricset

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Set is the collectors one component registered.
type Set struct {
	reg  prometheus.Registerer
	mu   sync.Mutex
	cols []prometheus.Collector
}

// New returns a set registering on reg; a nil reg registers nothing (metrics still work,
// unexported).
func New(reg prometheus.Registerer) *Set { return &Set{reg: reg} }

// MustRegister registers cs, panicking on a conflict: two components on one Registerer
// without distinguishing labels is a wiring bug.
func (s *Set) MustRegister(cs ...prometheus.Collector) {
	if s.reg == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.reg.MustRegister(c)
		s.cols = append(s.cols, c)
	}
}

// Close unregisters everything registered through the set.
func (s *Set) Close() {
	s.mu.Lock()
	cols := s.cols
	s.cols = nil
	s.mu.Unlock()
	for _, c := range cols {
		s.reg.Unregister(c)
	}
}
