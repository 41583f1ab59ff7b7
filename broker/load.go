package broker

import (
	"math"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// The controller's balancer weighs partitions by their recent traffic, which each leader
// reports with its heartbeats: per partition led here, an exponentially weighted moving
// average of the bytes appended per second over about a minute (a balancer that chased
// instant rates would move partitions back and forth).

// loadHalfLife is how fast the reported rate forgets: after it, an old rate counts half.
const loadHalfLife = 30 * time.Second

type loadTracker struct {
	mu   sync.Mutex
	last map[partlog.Key]loadSample
}

type loadSample struct {
	bytes int64
	at    time.Time
	rate  float64
}

// LoadReport returns the recent traffic of the partitions this broker leads (those with
// any); ctlclient.ClientConfig.LoadReport calls it from the heartbeat goroutine.
func (b *Broker) LoadReport() []metadata.PartitionLoad {
	t := &b.loads
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[partlog.Key]loadSample{}
	}
	now := time.Now()
	seen := map[partlog.Key]bool{}
	var out []metadata.PartitionLoad
	for _, p := range b.parts.All() {
		n := p.AppendedBytes()
		if n == 0 {
			continue // never written here: no rate, and no entry (idle partitions cost nothing)
		}
		k := p.Key()
		seen[k] = true
		prev, ok := t.last[k]
		s := loadSample{bytes: n, at: now}
		if ok {
			dt := now.Sub(prev.at).Seconds()
			if dt <= 0 {
				s = prev
			} else {
				inst := float64(n-prev.bytes) / dt
				keep := math.Exp2(-dt / loadHalfLife.Seconds())
				s.rate = prev.rate*keep + inst*(1-keep)
			}
		}
		t.last[k] = s
		if s.rate >= 1 {
			out = append(out, metadata.PartitionLoad{Topic: p.Topic(), Partition: p.Index(), BytesPerSec: int64(s.rate)})
		}
	}
	for k := range t.last {
		if !seen[k] {
			delete(t.last, k)
		}
	}
	return out
}
