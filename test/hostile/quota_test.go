package hostile

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// throttles records the throttles a franz-go client was told of.
type throttles struct {
	mu  sync.Mutex
	n   int
	max time.Duration
}

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d > 0 {
		h.n++
		h.max = max(h.max, d)
	}
}

func (h *throttles) seen() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.max
}

// Client quotas: a franz-go producer and consumer moving 1 MiB under a 256 KiB/s quota
// are told to wait (throttle_time_ms) and still get everything through; a light client
// with another client id is not throttled.
func TestQuotasThrottleHeavyClients(t *testing.T) {
	const rate = 256 << 10
	p := startBroker(t, "--producer-byte-rate", "262144", "--consumer-byte-rate", "262144")
	var heavyP, heavyC, light throttles
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ClientID("heavy-producer"), kgo.DefaultProduceTopic("q"),
		kgo.WithHooks(&heavyP), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for n := 0; n < 4*rate; n += 16 << 10 {
		v := make([]byte, 16<<10)
		rand.Read(v)
		recs = append(recs, &kgo.Record{Value: v})
	}
	if err := prod.ProduceSync(ctxT(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	lp, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ClientID("light"), kgo.DefaultProduceTopic("q"), kgo.WithHooks(&light))
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	if err := lp.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte("light")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ClientID("heavy-consumer"), kgo.ConsumeTopics("q"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&heavyC))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := len(recs) + 1
	got := 0
	ctx := ctxT(t, 60*time.Second)
	for got < want && ctx.Err() == nil {
		got += cons.PollFetches(ctx).NumRecords()
	}
	if got != want {
		t.Fatalf("read back %d of %d records", got, want)
	}

	pn, pmax := heavyP.seen()
	cn, cmax := heavyC.seen()
	ln, _ := light.seen()
	t.Logf("throttles: heavy producer %d (max %v), heavy consumer %d (max %v), light producer %d", pn, pmax, cn, cmax, ln)
	if pn == 0 || cn == 0 {
		t.Fatalf("clients moving 4 s of their quota at once were not throttled (producer %d, consumer %d)", pn, cn)
	}
	if ln != 0 {
		t.Fatalf("a client within its quota was throttled %d times", ln)
	}
	m, err := p.scrape()
	if err != nil {
		t.Fatal(err)
	}
	if m[`weir_broker_quota_throttled_requests_total{kind="produce"}`] == 0 || m[`weir_broker_quota_throttled_requests_total{kind="fetch"}`] == 0 {
		t.Fatalf("throttled requests not counted: %v %v", m[`weir_broker_quota_throttled_requests_total{kind="produce"}`], m[`weir_broker_quota_throttled_requests_total{kind="fetch"}`])
	}
}
