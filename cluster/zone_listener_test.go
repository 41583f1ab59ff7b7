package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
)

// dialLog records the addresses a client dialed.
type dialLog struct {
	mu    sync.Mutex
	addrs map[string]int
}

func (d *dialLog) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	if d.addrs == nil {
		d.addrs = map[string]int{}
	}
	d.addrs[host]++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, host)
}

func (d *dialLog) dialed() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]int, len(d.addrs))
	for a, n := range d.addrs {
		m[a] = n
	}
	return m
}

// Every broker listens for each zone a, b, c on a listener of its own. An untagged
// client that bootstraps from broker 1's zone-b listener is a client of zone b: the
// Metadata it gets names every broker's zone-b listener and zone b's broker as the
// leader of every partition; it produces there (acked), and a consumer group on the
// zone-b listeners reads everything back (FindCoordinator names the coordinator's
// zone-b listener). Neither ever dials a main listener. An untagged client of the
// main listeners still sees the main addresses and the real leaders.
func TestZoneListenerClients(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			for _, z := range []string{"a", "b", "c"} {
				b.ZoneListeners = append(b.ZoneListeners, broker.ZoneListener{Zone: z, Listen: "127.0.0.1:0"})
			}
		}
	})
	const zone, parts, n = "b", 6, 300
	// zoneAddr[id] is broker id's zone-b listener, mainAddr[id] its main one.
	zoneAddr, mainAddr := map[int32]string{}, map[int32]string{}
	var zoneBroker int32 = -1
	for i := 0; i < 3; i++ {
		b := c.Broker(i).Broker
		adv := b.Advertised()
		if len(adv.Listeners) != 3 {
			t.Fatalf("broker %d advertises %+v", adv.ID, adv.Listeners)
		}
		za := b.ZoneAddrs()[zone]
		if h, p := adv.Endpoint(zone); net.JoinHostPort(h, fmt.Sprint(p)) != za.String() {
			t.Fatalf("broker %d advertises %s:%d for zone %s, bound %s", adv.ID, h, p, zone, za)
		}
		zoneAddr[adv.ID], mainAddr[adv.ID] = za.String(), c.Broker(i).Addr()
		if adv.Rack == zone {
			zoneBroker = adv.ID
		}
	}
	if zoneBroker < 0 {
		t.Fatal("no broker in zone b")
	}
	testutil.Eventually(t, 30*time.Second, "every broker's listeners registered", func() bool {
		for _, br := range c.Broker(0).Client.View().Brokers {
			if len(br.Listeners) != 3 {
				return false
			}
		}
		return true
	})

	mainCl := newClient(t, c)
	adm := kadm.NewClient(mainCl)
	if err := createTopic(t, adm, parts, "zl"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "zl")

	var dials dialLog
	zcl, err := kgo.NewClient(kgo.SeedBrokers(zoneAddr[1]), kgo.Dialer(dials.dial), kgo.RetryTimeout(60*time.Second),
		kgo.DefaultProduceTopic("zl"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zcl.Close)
	md, err := kadm.NewClient(zcl).Metadata(ctxFor(t, 30*time.Second), "zl")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Fatalf("zone-b listener: %d brokers", len(md.Brokers))
	}
	for _, b := range md.Brokers {
		if got := net.JoinHostPort(b.Host, fmt.Sprint(b.Port)); got != zoneAddr[b.NodeID] {
			t.Fatalf("zone-b listener: broker %d at %s, want its zone-b listener %s", b.NodeID, got, zoneAddr[b.NodeID])
		}
	}
	for _, p := range md.Topics["zl"].Partitions {
		if p.Leader != zoneBroker || p.LeaderEpoch != tp.Partitions[p.Partition].LeaderEpoch {
			t.Fatalf("zone-b listener: partition %d led by %d epoch %d, want zone b's broker %d epoch %d",
				p.Partition, p.Leader, p.LeaderEpoch, zoneBroker, tp.Partitions[p.Partition].LeaderEpoch)
		}
	}

	want := map[string]bool{}
	var perr sync.Map
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("zl-%04d", i)
		want[v] = true
		zcl.Produce(ctxFor(t, time.Minute), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
			if err != nil {
				perr.Store(v, err)
			}
		})
	}
	if err := zcl.Flush(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	perr.Range(func(k, v any) bool { t.Fatalf("produce %s: %v", k, v); return false })

	cons, err := kgo.NewClient(kgo.SeedBrokers(zoneAddr[2]), kgo.Dialer(dials.dial), kgo.RetryTimeout(60*time.Second),
		kgo.ConsumeTopics("zl"), kgo.ConsumerGroup("zl-g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	got := map[string]bool{}
	ctx := ctxFor(t, time.Minute)
	for len(got) < len(want) && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for v := range want {
		if !got[v] {
			t.Fatalf("record %s not read back (%d of %d)", v, len(got), len(want))
		}
	}
	fc := kadm.NewClient(cons).FindGroupCoordinators(ctxFor(t, 30*time.Second), "zl-g")["zl-g"]
	if fc.Err != nil || net.JoinHostPort(fc.Host, fmt.Sprint(fc.Port)) != zoneAddr[fc.NodeID] {
		t.Fatalf("zone-b listener: coordinator %d at %s:%d (%v), want its zone-b listener %s", fc.NodeID, fc.Host, fc.Port, fc.Err, zoneAddr[fc.NodeID])
	}
	zoneSet := map[string]bool{}
	for _, a := range zoneAddr {
		zoneSet[a] = true
	}
	for a := range dials.dialed() {
		if !zoneSet[a] {
			t.Fatalf("a zone-b listener client dialed %s, not a zone-b listener (dialed %v)", a, dials.dialed())
		}
	}

	// The main listeners: main addresses and the real leaders.
	md, err = adm.Metadata(ctxFor(t, 30*time.Second), "zl")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if got := net.JoinHostPort(b.Host, fmt.Sprint(b.Port)); got != mainAddr[b.NodeID] {
			t.Fatalf("main listener: broker %d at %s, want %s", b.NodeID, got, mainAddr[b.NodeID])
		}
	}
	for _, p := range md.Topics["zl"].Partitions {
		if p.Leader != tp.Partitions[p.Partition].Leader {
			t.Fatalf("main listener: partition %d led by %d, want the real leader %d", p.Partition, p.Leader, tp.Partitions[p.Partition].Leader)
		}
	}
	fc = adm.FindGroupCoordinators(ctxFor(t, 30*time.Second), "zl-g")["zl-g"]
	if fc.Err != nil || net.JoinHostPort(fc.Host, fmt.Sprint(fc.Port)) != mainAddr[fc.NodeID] {
		t.Fatalf("main listener: coordinator %d at %s:%d (%v), want %s", fc.NodeID, fc.Host, fc.Port, fc.Err, mainAddr[fc.NodeID])
	}
}
