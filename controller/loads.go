package controller

import (
	"sync"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// loadTTL is how long a partition's reported rate counts without a newer report.
// Brokers report every ctlclient.ClientConfig.LoadReportInterval (2 s by default); a
// rate its reporter stopped mentioning (no traffic any more) is dropped at once, one
// reported by a broker that no longer leads the partition (it moved or failed over)
// counts until its new leader reports it or this runs out.
const loadTTL = 30 * time.Second

// partKey names a partition by topic name and index.
type partKey struct {
	topic     string
	partition int32
}

// loadTable holds the partitions' recent traffic as their leaders report it with their
// heartbeats (ctlwire.HeartbeatRequest.Load). Like the leases it lives in the leader's memory
// only: it is an input of the balancer's decisions, never part of the replicated state.
// A new leader starts empty and knows the load again within a report interval.
type loadTable struct {
	mu sync.Mutex
	m  map[partKey]loadEntry
}

type loadEntry struct {
	bytes  int64
	broker int32
	at     time.Time
}

func newLoadTable() *loadTable { return &loadTable{m: map[partKey]loadEntry{}} }

// reset forgets everything (leadership gained or lost).
func (l *loadTable) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = map[partKey]loadEntry{}
}

// report records broker's report: the rates of the partitions it has traffic for. A
// partition broker leads in v that the report leaves out has no traffic now: its
// entry from broker is dropped (one from another broker, its leader before, stays
// until it expires or broker reports traffic). Malformed entries are ignored.
func (l *loadTable) report(v *metadata.View, broker int32, loads []metadata.PartitionLoad, now time.Time) {
	seen := make(map[partKey]bool, len(loads))
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, pl := range loads {
		if i >= ctlwire.MaxLoadReport {
			break
		}
		if pl.Topic == "" || len(pl.Topic) > 255 || pl.Partition < 0 || pl.BytesPerSec < 0 {
			continue
		}
		k := partKey{pl.Topic, pl.Partition}
		seen[k] = true
		if pl.BytesPerSec == 0 {
			if e, ok := l.m[k]; ok && e.broker == broker {
				delete(l.m, k)
			}
			continue
		}
		l.m[k] = loadEntry{bytes: pl.BytesPerSec, broker: broker, at: now}
	}
	for k, e := range l.m {
		if e.broker != broker || seen[k] {
			continue
		}
		if t := v.Topics[k.topic]; t == nil || int(k.partition) >= len(t.Partitions) || t.Partitions[k.partition].Leader == broker {
			delete(l.m, k)
		}
	}
}

// snapshot returns the current rates by partition, dropping expired entries.
func (l *loadTable) snapshot(now time.Time) map[partKey]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[partKey]int64, len(l.m))
	for k, e := range l.m {
		if now.Sub(e.at) > loadTTL {
			delete(l.m, k)
			continue
		}
		out[k] = e.bytes
	}
	return out
}
