package bench

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A probe writes one small record to each of its partitions, waits for the ack (acks=all,
// retried until acked), sleeps the probe interval and writes again; it keeps, per
// partition, when each write was sent and acked and at which offset. A probe's cost is one
// tiny record per partition per interval: the machine's cores stay with the cluster.
//
// What the figures are made of:
//   - first ack after t: the first write acked after t (SIGKILL, SIGSTOP: the partition
//     is writable again, wherever);
//   - a move's pause: the longest time between two consecutive acks of the partition, from
//     the last ack before the move was requested to the first ack at the new leader (the
//     first offset at or past the start of the new leader's log range). With writes every
//     50 ms the pause cannot be shorter than 50 ms plus one ack's latency;
//   - latency: from a write's send to its ack (the retries of a write included).

type ack struct {
	sent, at time.Time
	off      int64
}

type probe struct {
	mu   sync.Mutex
	acks map[int32][]ack
	size int64 // bytes acked
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// startProbe writes to parts every interval until Stop.
func startProbe(ctx context.Context, cl *kgo.Client, topic string, parts []int32, every time.Duration) *probe {
	ctx, cancel := context.WithCancel(ctx)
	pr := &probe{acks: map[int32][]ack{}, stop: cancel}
	val := []byte("probe")
	for _, p := range parts {
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			for ctx.Err() == nil {
				sent := time.Now()
				r := &kgo.Record{Topic: topic, Partition: p, Value: val}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err == nil {
					at := time.Now()
					pr.mu.Lock()
					pr.acks[p] = append(pr.acks[p], ack{sent: sent, at: at, off: r.Offset})
					pr.size += int64(len(r.Value))
					pr.mu.Unlock()
				}
				select {
				case <-time.After(every):
				case <-ctx.Done():
				}
			}
		}()
	}
	return pr
}

// Stop stops the probe's writers and waits a little for them: a write in flight to a
// partition nobody serves is retried by the client until it is closed (franz-go fails an
// idempotent record in flight only with its request, whatever its context).
func (pr *probe) Stop() {
	pr.stop()
	done := make(chan struct{})
	go func() { pr.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

func (pr *probe) bytes() int64 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.size
}

// firstAfter returns, per partition, the first ack after t (missing: none yet).
func (pr *probe) firstAfter(t time.Time) map[int32]time.Time {
	return pr.first(func(a ack) bool { return a.at.After(t) })
}

// firstSentAfter returns, per partition, the ack of the first write sent after t: a
// paused broker's answers already on their way (or sent before the signal took effect)
// acked writes sent before it.
func (pr *probe) firstSentAfter(t time.Time) map[int32]time.Time {
	return pr.first(func(a ack) bool { return a.sent.After(t) })
}

func (pr *probe) first(match func(ack) bool) map[int32]time.Time {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := map[int32]time.Time{}
	for p, as := range pr.acks {
		for _, a := range as {
			if match(a) {
				out[p] = a.at
				break
			}
		}
	}
	return out
}

// latencies returns the latency of every write sent in [from, to] and acked.
func (pr *probe) latencies(from, to time.Time) []time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []time.Duration
	for _, as := range pr.acks {
		for _, a := range as {
			if !a.sent.Before(from) && !a.sent.After(to) {
				out = append(out, a.at.Sub(a.sent))
			}
		}
	}
	return out
}

// longestStall returns the longest ack latency of a write acked in (from, to], or of a
// write still unacked at to (counted to to): how long the probed partitions went without
// an ack beyond the probe's own interval. A partition never acked counts from from.
func (pr *probe) longestStall(from, to time.Time, every time.Duration) time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var worst time.Duration
	for _, as := range pr.acks {
		last := from
		for _, a := range as {
			if a.at.After(to) {
				last = to
				break
			}
			if a.at.After(from) {
				worst = max(worst, a.at.Sub(a.sent))
			}
			if a.at.After(last) {
				last = a.at
			}
		}
		worst = max(worst, to.Sub(last)-every) // the write after the last ack, unacked at to
	}
	return worst
}

// movePause is the longest time between consecutive acks of partition p from the last
// ack before req to the first ack at offset newStart or later (the new leader's first),
// and that first ack's time; ok is false while the new leader has acked nothing. With no
// ack before req the pause counts from req.
func (pr *probe) movePause(p int32, req time.Time, newStart int64) (pause time.Duration, first time.Time, ok bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	prev := req
	for _, a := range pr.acks[p] {
		if !a.at.After(req) {
			prev = a.at
			continue
		}
		pause = max(pause, a.at.Sub(prev))
		prev = a.at
		if a.off >= newStart {
			return pause, a.at, true
		}
	}
	return pause, time.Time{}, false
}

// sample returns up to n of parts spread evenly (all of them when n <= 0 or n >= len).
func sample(parts []int32, n int) []int32 {
	s := append([]int32(nil), parts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if n <= 0 || n >= len(s) {
		return s
	}
	out := make([]int32, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, s[i*len(s)/n])
	}
	return out
}

// ackGap returns the longest time in [from, to] during which no probed partition got an
// ack: a pause of every partition at once (brokers' leases lapsing, say) shows here
// even when each partition's own writes are few.
func (pr *probe) ackGap(from, to time.Time) time.Duration {
	pr.mu.Lock()
	var ats []time.Time
	for _, as := range pr.acks {
		for _, a := range as {
			if a.at.After(from) && !a.at.After(to) {
				ats = append(ats, a.at)
			}
		}
	}
	pr.mu.Unlock()
	slices.SortFunc(ats, func(a, b time.Time) int { return a.Compare(b) })
	prev, worst := from, time.Duration(0)
	for _, at := range ats {
		worst = max(worst, at.Sub(prev))
		prev = at
	}
	return max(worst, to.Sub(prev))
}
