package bench

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Where a record's ack latency goes. The client's ack latency of a record is its
// wait in the client (linger, a full batch, the in-flight limit), the time its
// Produce request waits for the connection, and the request's round trip. Only
// the last part involves the broker; the broker's own request-duration
// histogram is a part of it (the rest is the network and the scheduling of two
// processes sharing the machine's cores). franz-go's HookBrokerE2E gives the
// request-level parts, so the bench can say which side a p99 comes from.

// RequestBreakdown is the distribution of the Produce requests' parts (after
// warmup), in milliseconds.
type RequestBreakdown struct {
	Requests int64 `json:"requests"`
	// WriteWait: from the request being built in the client to its first byte
	// being written (queued behind earlier requests of the connection).
	WriteWait LatencySummary `json:"write_wait_ms"`
	// RoundTrip: from writing the request to having read its whole answer.
	RoundTrip LatencySummary `json:"round_trip_ms"`
}

// breakdown is a kgo.HookBrokerE2E collecting RequestBreakdown.
type breakdown struct {
	begin time.Time
	mu    sync.Mutex
	wait  *latencyStats
	rtt   *latencyStats
}

func newBreakdown(begin time.Time) *breakdown {
	return &breakdown{begin: begin, wait: newLatencyStats(), rtt: newLatencyStats()}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (b *breakdown) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != 0 || e.Err() != nil || time.Now().Before(b.begin) {
		return
	}
	b.mu.Lock()
	b.wait.add(e.WriteWait)
	b.rtt.add(e.DurationE2E())
	b.mu.Unlock()
}

func (b *breakdown) result() *RequestBreakdown {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rtt.count() == 0 {
		return nil
	}
	return &RequestBreakdown{Requests: b.rtt.count(), WriteWait: b.wait.summary(), RoundTrip: b.rtt.summary()}
}
