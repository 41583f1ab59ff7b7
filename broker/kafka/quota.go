package kafka

// Client quotas (Kafka's producer_byte_rate and consumer_byte_rate, as a default for every
// client id): the bytes a client id produces (request frames of Produce) and fetches
// (record bytes of Fetch answers) are charged to a token bucket of that client id, which
// refills at the quota and holds one second of it. A client over its quota gets its answer
// with throttle_time_ms set to the time its bucket needs to come back to zero (clients
// then wait that long before sending to the broker again, KIP-219), and the broker holds
// the connection's next request for as long (so a client that ignores the throttle is
// slowed all the same). Quotas are per client id: with SASL, per authenticated user would
// be the natural next key.

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// maxThrottle caps one throttle, as Kafka caps it to its quota window.
	maxThrottle = 10 * time.Second
	// maxQuotaClients bounds the buckets kept; idle ones (full again) are dropped first,
	// and past the bound new client ids share one bucket, so random client ids cannot
	// grow the map without limit.
	maxQuotaClients = 50000
	overflowClient  = "\x00overflow"
)

// quota is one byte rate per client id.
type quota struct {
	rate    float64 // bytes per second
	now     func() time.Time
	mu      sync.Mutex
	clients map[string]*bucket
}

type bucket struct {
	tokens float64 // bytes the client may still send now; negative: it owes
	last   time.Time
}

func newQuota(rate int64, now func() time.Time) *quota {
	if rate <= 0 {
		return nil
	}
	return &quota{rate: float64(rate), now: now, clients: map[string]*bucket{}}
}

// record charges n bytes to client and returns how long it must now wait (0: within its
// quota).
func (q *quota) record(client string, n int) time.Duration {
	if q == nil || n <= 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	b := q.clients[client]
	if b == nil {
		if len(q.clients) >= maxQuotaClients {
			q.sweepLocked(now)
		}
		if len(q.clients) >= maxQuotaClients {
			client = overflowClient
			b = q.clients[client]
		}
		if b == nil {
			b = &bucket{tokens: q.rate, last: now}
			q.clients[client] = b
		}
	}
	b.tokens = min(q.rate, b.tokens+now.Sub(b.last).Seconds()*q.rate)
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return min(maxThrottle, time.Duration(-b.tokens/q.rate*float64(time.Second)))
}

// sweepLocked drops the buckets that are full again (their clients are within quota).
func (q *quota) sweepLocked(now time.Time) {
	for k, b := range q.clients {
		if b.tokens+now.Sub(b.last).Seconds()*q.rate >= q.rate {
			delete(q.clients, k)
		}
	}
}

// quotas are the server's produce and fetch quotas and their metrics.
type quotas struct {
	produce, fetch *quota
	throttled      *prometheus.CounterVec // requests throttled, by kind
	throttleTime   *prometheus.CounterVec // seconds of throttle imposed, by kind
}

func newQuotas(cfg Limits, now func() time.Time) *quotas {
	return &quotas{
		produce: newQuota(cfg.ProducerByteRate, now),
		fetch:   newQuota(cfg.ConsumerByteRate, now),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_quota_throttled_requests_total",
			Help: "Requests answered with a throttle because their client id was over its byte rate quota, by kind (produce, fetch)."}, []string{"kind"}),
		throttleTime: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_quota_throttle_seconds_total",
			Help: "Throttle time imposed on clients over their byte rate quota, by kind (produce, fetch)."}, []string{"kind"}),
	}
}

// throttle charges an answered request to its client's quota and returns the throttle
// to impose (set in resp when it has a throttle field). size is the request frame's size.
func (qs *quotas) throttle(s *slot, size int, resp kmsg.Response) time.Duration {
	var d time.Duration
	var kind string
	switch {
	case s.key == 0 && qs.produce != nil:
		kind, d = "produce", qs.produce.record(s.clientID, size)
	case s.key == 1 && qs.fetch != nil:
		if fr, ok := resp.(*kmsg.FetchResponse); ok {
			n := 0
			for i := range fr.Topics {
				for j := range fr.Topics[i].Partitions {
					n += len(fr.Topics[i].Partitions[j].RecordBatches)
				}
			}
			kind, d = "fetch", qs.fetch.record(s.clientID, n)
		}
	}
	if d <= 0 {
		return 0
	}
	qs.throttled.WithLabelValues(kind).Inc()
	qs.throttleTime.WithLabelValues(kind).Add(d.Seconds())
	if tr, ok := resp.(interface {
		Throttle() (int32, bool)
		SetThrottle(int32)
	}); ok {
		if cur, _ := tr.Throttle(); int32(d/time.Millisecond) > cur {
			tr.SetThrottle(int32(d / time.Millisecond))
		}
	}
	return d
}
