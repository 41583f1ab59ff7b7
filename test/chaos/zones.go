package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weir-io/weir/test/proccluster"
)

// zoneTarget is a target that knows its zones: an own cluster, whose broker i and
// controller i are in zone (i-1) mod 3 of a, b, c.
type zoneTarget interface {
	cluster() *proccluster.Cluster
}

func (t procTarget) cluster() *proccluster.Cluster { return t.c }

// runZoneFault runs zone-outage or zone-partition on zone f.Arg (default: the zone of
// the broker leading the most partitions).
//
// zone-outage SIGKILLs every broker and the controller of the zone (the other two
// controllers keep a Raft majority) and starts them again after cfg.RestartAfter.
//
// zone-partition cuts the zone's brokers off every controller for cfg.CutFor (each
// broker reaches the controllers only through proxies of its own), while the file
// system stays reachable: the case the storage fence exists for. What it does not cut,
// for want of network namespaces in a cluster of plain processes: the zone's brokers
// still reach the other zones' brokers (gossip, proxied produce) and every client
// still reaches them, and the zone's controller stays in the Raft group. The lab with
// namespaces (test/zonelab, Lab.Partition) cuts all of it.
func runZoneFault(cfg Config, t target, w *watcher, f Fault, r *rand.Rand, ev *Event, wait func(time.Duration) bool, log *slog.Logger) error {
	zt, ok := t.(zoneTarget)
	if !ok {
		return errors.New("chaos: zone faults need an own cluster (not --bootstrap)")
	}
	c := zt.cluster()
	zone := f.Arg
	if zone == "" {
		zone = c.Broker(busiest(w, t.Brokers(), r)).Zone
	}
	if !slices.Contains(c.Zones(), zone) {
		return fmt.Errorf("chaos: no zone %q (zones %v)", zone, c.Zones())
	}
	brokers, controllers := c.Zone(zone)
	for _, b := range brokers {
		ev.Brokers = append(ev.Brokers, b.ID)
	}
	log.Info("zone fault", "zone", zone, "brokers", ev.Brokers)
	switch f.Kind {
	case ZoneOutage:
		for _, p := range controllers {
			ev.Steps = append(ev.Steps, EventStep{-p.ID, time.Now()})
			p.Kill()
		}
		for _, b := range brokers {
			ev.Steps = append(ev.Steps, EventStep{b.ID, time.Now()})
			b.Kill()
		}
		wait(cfg.RestartAfter)
		for _, p := range controllers {
			if err := t.StartController(p.ID); err != nil {
				return err
			}
		}
		for _, b := range brokers {
			if err := t.Start(b.ID); err != nil {
				return err
			}
		}
	case ZonePartition:
		for _, b := range brokers {
			ev.Steps = append(ev.Steps, EventStep{b.ID, time.Now()})
			c.Cut(b.ID)
		}
		wait(cfg.CutFor)
		for _, b := range brokers {
			c.Heal(b.ID)
		}
	}
	return nil
}
