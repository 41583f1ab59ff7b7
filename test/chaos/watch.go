package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// watcher samples Kafka Metadata: which brokers are listed (a fenced broker is not) and
// who leads each partition (-1 while a partition has none, e.g. being recovered), so a
// report can tell when a fault was detected and when partitions had new leaders.
type watcher struct {
	topic string
	cl    *kgo.Client

	mu      sync.Mutex
	samples []metaSample
	stop    context.CancelFunc
	done    chan struct{}
}

type metaSample struct {
	at      time.Time
	brokers map[int32]bool
	leaders map[int32]int32 // partition → leader (-1: none)
	zones   map[int32]string
}

func startWatcher(ctx context.Context, boot []string, topic string, every time.Duration) (*watcher, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return nil, err
	}
	w := &watcher{topic: topic, cl: cl, done: make(chan struct{})}
	ctx, w.stop = context.WithCancel(ctx)
	adm := kadm.NewClient(cl)
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			md, err := adm.Metadata(mctx, topic)
			cancel()
			if err == nil {
				s := metaSample{at: time.Now(), brokers: map[int32]bool{}, leaders: map[int32]int32{}, zones: map[int32]string{}}
				for _, b := range md.Brokers {
					s.brokers[b.NodeID] = true
					if b.Rack != nil {
						s.zones[b.NodeID] = *b.Rack
					}
				}
				if td, ok := md.Topics[topic]; ok {
					for _, p := range td.Partitions {
						s.leaders[p.Partition] = p.Leader
					}
				}
				w.mu.Lock()
				w.samples = append(w.samples, s)
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w, nil
}

func (w *watcher) close() {
	w.stop()
	<-w.done
	w.cl.Close()
}

// latest returns the last sample taken at or before t (ok false: none).
func (w *watcher) latest(t time.Time) (metaSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out metaSample
	ok := false
	for _, s := range w.samples {
		if s.at.After(t) {
			break
		}
		out, ok = s, true
	}
	return out, ok
}

// brokerGone returns when broker id was first not listed after t (fenced).
func (w *watcher) brokerGone(id int32, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.samples {
		if s.at.After(t) && !s.brokers[id] {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// newLeader returns when partition p was first led by a listed broker other than from,
// after t.
func (w *watcher) newLeader(p, from int32, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.samples {
		if !s.at.After(t) {
			continue
		}
		if l, ok := s.leaders[p]; ok && l >= 0 && l != from && s.brokers[l] {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// brokerBack returns when broker id was first listed again after t (registered anew
// after it was fenced).
func (w *watcher) brokerBack(id int32, t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.samples {
		if s.at.After(t) && s.brokers[id] {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// spreadAt returns the first sample in [from, until] whose leaders are spread (see
// spread) and whose listed brokers include every one of want.
func (w *watcher) spreadAt(from, until time.Time, want []int32) (metaSample, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, s := range w.samples {
		if s.at.Before(from) || s.at.After(until) {
			continue
		}
		for _, id := range want {
			if !s.brokers[id] {
				continue next
			}
		}
		if spread(s) {
			return s, true
		}
	}
	return metaSample{}, false
}

// spread reports whether the leaders of a sample are spread: every listed broker leads
// at least its share of the led partitions (their number over the listed brokers') less
// the balancer's hysteresis, max(1, 10 %) of the share, the threshold below which the
// balancer (controller.planBalance) moves nothing to a broker. The balancer weighs
// traffic too; the load writes every partition at the same rate, so counts are costs.
func spread(s metaSample) bool {
	if len(s.brokers) == 0 {
		return false
	}
	led := map[int32]int{}
	total := 0
	for _, l := range s.leaders {
		if s.brokers[l] {
			led[l]++
			total++
		}
	}
	share := float64(total) / float64(len(s.brokers))
	floor := share - max(1, 0.1*share)
	for id := range s.brokers {
		if float64(led[id]) < floor {
			return false
		}
	}
	return true
}
