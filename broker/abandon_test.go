package broker

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/internal/testutil"
)

// blackHole is a listener that takes connections and reads what they send, never
// answering: a leader whose answers are lost on the way.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go io.Copy(io.Discard, c)
		}
	}()
	return ln.Addr().String()
}

// stuckLink sends a proxied batch's link over a sender whose connection never answers
// (its answer timeout 10 minutes) to the partition's leader as the view names it, and
// returns the channel the client's answer comes on once the link is in flight.
func stuckLink(t *testing.T, pb *proofBroker, epoch int32) (*linkSender, <-chan kafka.AppendResult, func() (int64, bool)) {
	t.Helper()
	cfg := peer.DefaultConfig()
	cfg.Timeout = 10 * time.Minute
	c := peer.NewClient(blackHole(t), cfg)
	t.Cleanup(c.Close)
	pb.proxy.mu.Lock()
	s := pb.proxy.newSenderLocked(c, pb.cfg.NodeID)
	pb.proxy.mu.Unlock()
	l, pin := pb.proxied(t, makeBatch(7, 0, 0, []byte("a")))
	ch := make(chan kafka.AppendResult, 1)
	s.enqueue(&pendingLink{link: l, leaderEpoch: epoch, done: func(res peer.LinkResult, err error) {
		ch <- pb.answer(l, pin, res, err)
	}})
	testutil.Eventually(t, 30*time.Second, "link in flight", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue) == 0 && len(s.inflight) == 1
	})
	return s, ch, func() (int64, bool) { return pb.tier.PinEnd(pin) }
}

// wantAbandoned waits for the client's answer: NOT_LEADER_OR_FOLLOWER, long before the
// link's 10-minute timeout, with the batch's pin kept (the link may be at the leader):
// lost, or resolved by the session fence's proof, never released.
func wantAbandoned(t *testing.T, ch <-chan kafka.AppendResult, pinEnd func() (int64, bool)) {
	t.Helper()
	select {
	case r := <-ch:
		if !errors.Is(r.Err, partlog.ErrNotLeader) {
			t.Fatalf("client answer %+v, want NOT_LEADER_OR_FOLLOWER", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the produce still waits on a link that cannot be answered")
	}
	if end, released := pinEnd(); released || end == -1 { // -1: awaiting the answer (tier.PinEnd)
		t.Fatalf("pin end %d released %v: want kept as lost until the session fence's proof", end, released)
	}
}

// A proxy whose own lease lapses answers the produces waiting on links at once
// (NOT_LEADER_OR_FOLLOWER) instead of holding them until the link's timeout; the pins
// stay (lost) until the session fence resolves them.
func TestLinksAbandonedWhenLeaseLapses(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	_, ch, pinEnd := stuckLink(t, pb, pb.topic.Partitions[0].LeaderEpoch)
	// on purpose: the watcher looks at the view and the lease meanwhile; nothing moved
	time.Sleep(3 * watchTick)
	select {
	case r := <-ch:
		t.Fatalf("answered %+v while the leader and the lease are unchanged", r)
	default:
	}
	pb.store.valid.Store(false)
	wantAbandoned(t, ch, pinEnd)
}

// A link routed at a leader epoch the view no longer has is answered at once.
func TestLinksAbandonedWhenLeaderEpochMoves(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	_, ch, pinEnd := stuckLink(t, pb, pb.topic.Partitions[0].LeaderEpoch-1)
	pb.proxy.viewChanged()
	wantAbandoned(t, ch, pinEnd)
}
