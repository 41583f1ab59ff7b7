package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
)

// holeConn is a connection whose incoming bytes can be dropped: once the hole is open,
// what arrives is discarded and a closed connection is never noticed (the reader waits
// until the connection is closed from this side), as when the network drops the packets.
type holeConn struct {
	net.Conn
	hole   *atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (c *holeConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if !c.hole.Load() {
			return n, err
		}
		if err != nil {
			<-c.closed
			return 0, err
		}
	}
}

func (c *holeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// holePeerConns makes px's connections to other brokers open again with the given
// answer timeout through holeConns, the hole of each given by holeOf(its address).
func holePeerConns(px *broker.Broker, timeout time.Duration, holeOf func(addr string) *atomic.Bool) {
	px.SetPeerConfig(func(cfg *peer.Config) {
		cfg.Timeout = timeout
		dial := cfg.Dial
		if dial == nil {
			dial = (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext
		}
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &holeConn{Conn: nc, hole: holeOf(addr), closed: make(chan struct{})}, nil
		}
	})
}

// The leader of a proxied partition applies a link but its answer never reaches the
// proxy (the link's packets are dropped, the connection's answer timeout is 10 minutes),
// and then the leader dies and is fenced; its partition moves. The proxy answers the
// waiting produce NOT_LEADER_OR_FOLLOWER as soon as its view shows the move, not when
// the link times out; it keeps the batch's pin (the link was applied), and the client's
// idempotent retry, now linked to the new leader, is answered with the original offset:
// the record is in the log once.
func TestLinkToMovedLeaderAnsweredAtOnce(t *testing.T) {
	c := startCluster(t, nil)
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 1, "cut"); err != nil {
		t.Fatal(err)
	}
	mp := waitTopic(t, c, "cut").Partitions[0]
	leader := mp.Leader
	proxy := leader%3 + 1
	px := c.Broker(int(proxy) - 1).Broker
	var hole atomic.Bool
	holePeerConns(px, 10*time.Minute, func(string) *atomic.Bool { return &hole })
	// A first record through the proxy: the connection is up.
	r := proxyProduce(t, c, proxy, "cut", 0, kafkatest.Batch(4242, 0, 0, []byte("r0")))
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first produce through broker %d: code %d base %d", proxy, r.ErrorCode, r.BaseOffset)
	}
	hole.Store(true)
	type result struct {
		p   kmsg.ProduceResponseTopicPartition
		err error
	}
	answer := make(chan result, 1)
	zcl := zoneClient(t, c, proxy)
	go func() {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "cut"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kafkatest.Batch(4242, 0, 1, []byte("r1"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxFor(t, 2*time.Minute), zcl.SeedBrokers()[0])
		if err != nil {
			answer <- result{err: err}
			return
		}
		answer <- result{p: resp.Topics[0].Partitions[0]}
	}()
	testutil.Eventually(t, 30*time.Second, "the leader applied the link whose answer is dropped", func() bool {
		ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "cut")
		if err != nil {
			return false
		}
		e, ok := ends.Lookup("cut", 0)
		return ok && e.Err == nil && e.Offset == 2
	})
	c.KillBroker(int(leader) - 1)
	var got kmsg.ProduceResponseTopicPartition
	select {
	case res := <-answer:
		if res.err != nil {
			t.Fatalf("produce waiting on the dead leader: %v", res.err)
		}
		got = res.p
	case <-time.After(60 * time.Second):
		t.Fatal("the produce still waits on the link to the dead leader")
	}
	if got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("answer to the produce waiting on the dead leader: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(got.ErrorCode))
	}
	if px.ProxyPinsHeld() < 1 {
		t.Fatal("the abandoned link's batch was let go: the new leader may still read it from the proxy's WAL")
	}
	testutil.Eventually(t, time.Minute, "the partition served elsewhere", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "cut", leader)
	})
	testutil.Eventually(t, time.Minute, "the proxy routes to the new leader", func() bool {
		v := c.Broker(int(proxy) - 1).Client.View()
		p := v.Topics["cut"].Partitions[0]
		return p.Leader != leader && !p.Recovering
	})
	// The client's retry of the abandoned batch: the new leader recovered the old one's
	// WAL, so its producer state answers with the original offset.
	// A NOT_LEADER answer is retried, as a client does: the proxy may reach the new
	// leader a moment before it serves.
	testutil.EventuallyNoError(t, 30*time.Second, "the retry of the abandoned batch answered", func() error {
		r = proxyProduce(t, c, proxy, "cut", 0, kafkatest.Batch(4242, 0, 1, []byte("r1")))
		if r.ErrorCode == kerr.NotLeaderForPartition.Code {
			return kerr.ErrorForCode(r.ErrorCode)
		}
		return nil
	})
	if r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("retry of the abandoned batch: code %v base %d, want the original offset 1", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	r = proxyProduce(t, c, proxy, "cut", 0, kafkatest.Batch(4242, 0, 2, []byte("r2")))
	if r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("next batch: code %v base %d, want 2", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	recs := consumeAll(t, c, "cut", 3)
	for i, v := range []string{"r0", "r1", "r2"} {
		if rec := recs[v]; rec == nil || rec.Offset != int64(i) {
			t.Fatalf("%s: read %v, want offset %d", v, rec, i)
		}
	}
	if len(recs) != 3 {
		t.Fatalf("read %d records, want 3 (a duplicate got in)", len(recs))
	}
}

// A proxy's lost link is fenced at the partition's current leader; when a failover or a
// move gave the partition to a broker the proxy's last session rotation did not cover,
// the proxy's sessions are ended again before that broker is asked to fence. Asking it
// with the old fence point used to fence the proxy's running sender to it: every link
// on it refused as NOT_LEADER_OR_FOLLOWER, the client retrying on the same sender, the
// partitions that broker led unavailable through that proxy for good.
func TestLostLinkFenceAtNewLeaderKeepsLinksToIt(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		inner := cfg.BrokerConfig
		cfg.BrokerConfig = func(b *broker.Config) {
			inner(b)
			b.LinkGrace = 600 * time.Millisecond // lost pins resolved every 100 ms
		}
	})
	adm := kadm.NewClient(newClient(t, c))
	if err := createTopic(t, adm, 3, "rot"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "rot")
	// The proxy, and two partitions led by the two other brokers.
	const proxy = int32(1)
	var pa, pb int32 = -1, -1 // led by la, lb
	var la, lb int32
	for _, mp := range tp.Partitions {
		switch {
		case mp.Leader == proxy:
		case pa < 0:
			pa, la = mp.Index, mp.Leader
		case mp.Leader != la && pb < 0:
			pb, lb = mp.Index, mp.Leader
		}
	}
	if pa < 0 || pb < 0 {
		t.Skipf("leaders %v: not one partition on each of brokers 2 and 3", tp.Partitions)
	}
	px := c.Broker(int(proxy) - 1).Broker
	var holeB atomic.Bool
	var none atomic.Bool
	lbAddr := c.KafkaAddrs()[lb-1]
	holePeerConns(px, time.Second, func(addr string) *atomic.Bool {
		if addr == lbAddr {
			return &holeB
		}
		return &none
	})
	// Connections up to both leaders: the proxy's sender to la runs from here on.
	for _, p := range []int32{pa, pb} {
		if r := proxyProduce(t, c, proxy, "rot", p, kafkatest.Batch(-1, 0, 0, []byte("warm"))); r.ErrorCode != 0 {
			t.Fatalf("partition %d through broker %d: %v", p, proxy, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// A link to lb whose answer is lost (1 s timeout): a lost pin of pb, while lb leads it.
	holeB.Store(true)
	if r := proxyProduce(t, c, proxy, "rot", pb, kafkatest.Batch(-1, 0, 0, []byte("lost"))); r.ErrorCode == 0 {
		t.Fatal("acked through a link whose answers are dropped")
	}
	// on purpose: resolution rounds run meanwhile, rotating the sessions to lb and asking
	// lb (which does not answer)
	time.Sleep(500 * time.Millisecond)
	// pb moves to la: its lost pin is now fenced at la.
	if err := c.Broker(0).Client.MovePartition(ctxFor(t, 30*time.Second), tp.ID, pb, la); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "pb led by la in the proxy's view", func() bool {
		p := c.Broker(int(proxy) - 1).Client.View().Topics["rot"].Partitions[pb]
		return p.Leader == la && !p.Recovering && !p.Moving
	})
	holeB.Store(false)
	// on purpose: resolution rounds fence the lost pin's sessions at la
	time.Sleep(time.Second)
	// A client's retries: the bug left pa unavailable through the proxy for good.
	i := 0
	testutil.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("partition %d (leader %d) available through broker %d after its lost link to %d was fenced at %d", pa, la, proxy, lb, la), func() error {
		i++
		r := proxyProduce(t, c, proxy, "rot", pa, kafkatest.Batch(-1, 0, 0, []byte(fmt.Sprint("after-", i))))
		return kerr.ErrorForCode(r.ErrorCode)
	})
}
