package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/routing"
)

// TestTrafficControllerAndGossip: every broker counts its traffic with the controllers
// (peer zone unknown: they have none) and its gossip with every other broker (peer zone
// the other broker's), both directions, in weir_traffic_bytes_total.
func TestTrafficControllerAndGossip(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) { cfg.Registerer = reg })
	gather := func() scrape {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		s := scrape{}
		for _, mf := range mfs {
			s[mf.GetName()] = mf
		}
		return s
	}
	zones := c.cfg.Zones
	testutil.Eventually(t, 30*time.Second, "controller and gossip bytes on every broker", func() bool {
		s := gather()
		for i := 1; i <= 3; i++ {
			node := fmt.Sprintf("broker-%d", i)
			for _, dir := range []string{"in", "out"} {
				if s.sum(routing.MetricName, map[string]string{"node": node, "kind": "controller", "peer_zone": routing.UnknownZone, "direction": dir}) <= 0 {
					return false
				}
				for j := 1; j <= 3; j++ {
					if j == i {
						continue
					}
					peer := zones[(j-1)%len(zones)]
					if s.sum(routing.MetricName, map[string]string{"node": node, "kind": "gossip", "peer_zone": peer, "direction": dir}) <= 0 {
						return false
					}
				}
			}
		}
		return true
	})
	s := gather()
	for i := 1; i <= 3; i++ {
		node := fmt.Sprintf("broker-%d", i)
		for _, kind := range []string{"controller", "gossip"} {
			if v := s.sum(routing.MetricName, map[string]string{"node": node, "kind": kind}); v <= 0 {
				t.Fatalf("%s: %s bytes %v", node, kind, v)
			}
		}
		if v := s.sum(routing.MetricName, map[string]string{"node": node, "kind": "controller", "local_zone": zones[(i-1)%len(zones)]}); v <= 0 {
			t.Fatalf("%s: no controller bytes under its own local_zone", node)
		}
	}
}
