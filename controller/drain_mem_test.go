package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// memBroker heartbeats one broker registration to every controller of a memCluster
// over its in-memory network (POST /v1/brokers/heartbeat, the handler a broker's
// client reaches), every interval, and records when every controller last
// acknowledged it and the first refusal.
type memBroker struct {
	id      int32
	epoch   int64
	hc      *http.Client
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	last    time.Time // the last round every controller acknowledged
	refused error
}

func startMemBroker(mc *memCluster, id int32, epoch int64, interval time.Duration) *memBroker {
	b := &memBroker{id: id, epoch: epoch, stop: make(chan struct{}), done: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{DialContext: mc.net.dial}}}
	go func() {
		defer close(b.done)
		for {
			b.beat(mc.peers)
			select {
			case <-b.stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	mc.t.Cleanup(b.close)
	return b
}

// beat heartbeats every controller once.
func (b *memBroker) beat(peers Peers) {
	body, _ := json.Marshal(ctlwire.HeartbeatRequest{ID: b.id, Epoch: b.epoch})
	acked := 0
	for _, p := range peers {
		resp, err := b.hc.Post("http://"+p.APIAddr+ctlwire.PathHeartbeat, "application/json", bytes.NewReader(body))
		if err == nil {
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("controller %d: HTTP %d: %s", p.ID, resp.StatusCode, msg)
			}
		}
		b.mu.Lock()
		if err == nil {
			acked++
		} else if b.refused == nil {
			b.refused = err
		}
		b.mu.Unlock()
	}
	if acked == len(peers) {
		b.mu.Lock()
		b.last = time.Now()
		b.mu.Unlock()
	}
}

// close stops the heartbeats and closes the connections (idempotent).
func (b *memBroker) close() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
	b.hc.CloseIdleConnections()
}

func (b *memBroker) state() (last time.Time, refused error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last, b.refused
}

// TestMemQuorumDrainKeepsLease: a draining broker is still live. Brokers 1 and 2 (zone
// a) and 3 (zone b) heartbeat every controller; broker 1 is drained, its partitions
// start moving to broker 2, and broker 3 stops heartbeating at that moment. On the
// fake clock of a synctest bubble, with the default lease settings: broker 3 is fenced
// once it has been silent for longer than LeaseTimeout+LeaseGrace, at the next lease
// check (the leader's lease loop and the controllers' fence votes at work), never
// before; broker 1, silent for no more than a heartbeat interval, is never fenced,
// however long it drains (twice that silence here), and every controller keeps
// acknowledging its heartbeats.
func TestMemQuorumDrainKeepsLease(t *testing.T) { synctest.Test(t, testMemQuorumDrainKeepsLease) }

func testMemQuorumDrainKeepsLease(t *testing.T) {
	def := DefaultConfig()
	mc := newMemCluster(t, 3, func(c *Config) { c.LeaseTimeout = def.LeaseTimeout })
	c := mc.ctrls[mc.waitLeader()]
	var brokers []*memBroker
	for i, rack := range []string{"a", "a", "b"} {
		mustPropose(t, c, &registerBrokerCmd{ID: int32(i + 1), Host: "h", Port: int32(i + 1), Rack: rack})
		brokers = append(brokers, startMemBroker(mc, int32(i+1), 1, ctlwire.MinHeartbeatInterval))
	}
	parts, ok := place(c.View(), nil, 0, 9)
	if !ok {
		t.Fatal("no placement")
	}
	mustPropose(t, c, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: parts}})
	if n := c.View().PartitionsLedBy(1); n != 3 {
		t.Fatalf("broker 1 leads %d partitions, want 3", n)
	}
	mustPropose(t, c, &drainBrokerCmd{ID: 1, Epoch: 1})
	brokers[2].close()
	for _, p := range c.View().Topics["t"].Partitions {
		if p.Leader == 1 && (!p.Moving || p.MovingTo != 2) {
			t.Fatalf("t/%d of the draining broker: %+v, want moving to 2 (same zone)", p.Index, p)
		}
	}

	silent := c.cfg.LeaseTimeout + c.cfg.LeaseGrace
	last3, _ := brokers[2].state()
	untilFake(t, 3*silent, time.Millisecond, "broker 3 fenced", func() bool {
		b, _ := c.View().Broker(3)
		return b.State == metadata.BrokerFenced
	})
	if after := time.Since(last3); after <= silent || after > silent+c.cfg.LeaseCheckInterval {
		t.Fatalf("broker 3 fenced %v after its last heartbeat, want in (%v, %v]: the next lease check past LeaseTimeout+LeaseGrace",
			after, silent, silent+c.cfg.LeaseCheckInterval)
	}
	settle(silent) // broker 1 drains on, twice as long as a silence that fences
	for _, ctl := range mc.ctrls {
		if b, _ := ctl.View().Broker(1); !b.Draining() || b.Epoch != 1 {
			t.Fatalf("controller %d: broker 1 after %v draining: %+v", ctl.cfg.NodeID, 2*silent, b)
		}
	}
	last1, refused := brokers[0].state()
	if refused != nil || time.Since(last1) > ctlwire.MinHeartbeatInterval {
		t.Fatalf("the draining broker's heartbeats: last acknowledged by all %v ago, refused: %v", time.Since(last1), refused)
	}
	if _, refused := brokers[1].state(); refused != nil {
		t.Fatalf("broker 2's heartbeats refused: %v", refused)
	}
}
