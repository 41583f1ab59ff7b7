package cluster

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// moveGate sits between the brokers and the controllers (an HTTP proxy in front of each
// controller's API) and can hold the brokers' move completions, so a graceful move stays
// pending (the leader waits to hand off) for as long as a test needs.
type moveGate struct {
	t       *testing.T
	mu      sync.Mutex
	proxies map[string]string // controller API address → its proxy's
	open    chan struct{}     // closed while completions pass
	held    atomic.Int32      // completions that arrived while holding
}

func newMoveGate(t *testing.T) *moveGate {
	g := &moveGate{t: t, proxies: map[string]string{}, open: make(chan struct{})}
	close(g.open)
	return g
}

// wrap is a Config.ClientConfig: every broker reaches the controllers through the gate.
func (g *moveGate) wrap(cfg *ctlclient.ClientConfig) {
	addrs := make([]string, len(cfg.Controllers))
	for i, a := range cfg.Controllers {
		addrs[i] = g.proxyFor(a)
	}
	cfg.Controllers = addrs
}

func (g *moveGate) proxyFor(addr string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.proxies[addr]; ok {
		return p
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	rp.ErrorLog = log.New(io.Discard, "", 0) // requests cut off when the cluster closes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/partitions/complete-move" || r.URL.Path == "/v1/partitions/complete-moves" {
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			default:
				g.held.Add(1)
				select {
				case <-open:
				case <-r.Context().Done():
					return // the broker gave up on this attempt
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	g.t.Cleanup(func() {
		g.release()
		srv.CloseClientConnections()
		srv.Close()
	})
	p := srv.Listener.Addr().String()
	g.proxies[addr] = p
	return p
}

// hold makes completions wait; release lets them (and those waiting) through.
func (g *moveGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *moveGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// The Kafka admin APIs move leaders in a 3-controller/3-broker cluster, through kadm as
// kafka-reassign-partitions and kafka-leader-election use them: a reassignment to one
// broker is a graceful move, listed while pending (replicas [target, leader], adding
// [target], removing [leader]) and cancelled by a null list (the leader stays and
// serves again); a reassignment let through moves the partition to the target, and
// every record acked before, between and after reads back at its offset. A preferred
// election is never needed; a replica list of two brokers is refused (no followers).
//
// The controller's balancer is off: it would move a reassigned partition on to even out
// zones (reason=zone), racing the test's checks of where the partition is.
func TestReassignWithKadm(t *testing.T) {
	gate := newMoveGate(t)
	c := startCluster(t, func(cfg *Config) {
		cfg.ClientConfig = gate.wrap
		cfg.ControllerConfig = func(cc *controller.Config) { cc.Balance = false }
	})
	cl := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 3, "ra"); err != nil {
		t.Fatal(err)
	}
	acked := produceValues(t, cl, "ra", 3, 100, "before")
	var from int32
	testutil.Eventually(t, 30*time.Second, "every broker knows ra", func() bool {
		for i := 0; i < 3; i++ {
			if c.Broker(i).Client.View().Topics["ra"] == nil {
				return false
			}
		}
		from = c.Broker(0).Client.View().Topics["ra"].Partitions[0].Leader
		return true
	})
	to := from%3 + 1
	partition0 := func(i int) metadata.Partition { return c.Broker(i).Client.View().Topics["ra"].Partitions[0] }
	all3 := kadm.TopicsSet{"ra": {0: {}, 1: {}, 2: {}}}

	// Nothing to elect: each partition's one replica leads.
	el, err := adm.ElectLeaders(ctxFor(t, 30*time.Second), kadm.ElectPreferredReplica, all3)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if r, ok := el["ra"][p]; !ok || r.Err != kerr.ElectionNotNeeded {
			t.Fatalf("elect ra/%d: %+v", p, r)
		}
	}
	if el, err := adm.ElectLeaders(ctxFor(t, 30*time.Second), kadm.ElectPreferredReplica, nil); err != nil || len(el["ra"]) != 0 {
		t.Fatalf("elect all: %v, %v", el, err)
	}

	alter := func(p int32, brokers []int32) kadm.AlterPartitionAssignmentsResponse {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("ra", p, brokers)
		res, err := adm.AlterPartitionAssignments(ctxFor(t, 30*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		return res["ra"][p]
	}
	list := func() kadm.ListPartitionReassignmentsResponses {
		t.Helper()
		res, err := adm.ListPartitionReassignments(ctxFor(t, 30*time.Second), all3)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := alter(0, []int32{from, to}); r.Err != kerr.InvalidReplicaAssignment {
		t.Fatalf("two replicas: %+v", r)
	}

	// A pending move (its completion held at the gate), listed, then cancelled.
	gate.hold()
	if r := alter(0, []int32{to}); r.Err != nil {
		t.Fatalf("reassign ra/0 to %d: %+v", to, r)
	}
	pending := list()
	want := kadm.ListPartitionReassignmentsResponse{Topic: "ra", Partition: 0, Replicas: []int32{to, from}, AddingReplicas: []int32{to}, RemovingReplicas: []int32{from}}
	if len(pending["ra"]) != 1 || !reflect.DeepEqual(pending["ra"][0], want) {
		t.Fatalf("pending reassignments %+v, want ra/0 %+v", pending, want)
	}
	testutil.Eventually(t, 30*time.Second, "the leader tries to hand ra/0 off", func() bool { return gate.held.Load() > 0 })
	if r := alter(0, nil); r.Err != nil {
		t.Fatalf("cancel: %+v", r)
	}
	if res := list(); len(res["ra"]) != 0 {
		t.Fatalf("reassignments after the cancel: %+v", res)
	}
	if r := alter(0, nil); r.Err != kerr.NoReassignmentInProgress {
		t.Fatalf("cancel again: %+v", r)
	}
	testutil.Eventually(t, 30*time.Second, "the leader sees the cancel", func() bool {
		p := partition0(int(from - 1))
		return !p.Moving && p.Leader == from
	})
	gate.release() // the held completion is refused: its move was cancelled
	for v, off := range produceValues(t, cl, "ra", 3, 50, "between") {
		acked[v] = off
	}
	if p := partition0(int(from - 1)); p.Leader != from || p.Moving {
		t.Fatalf("ra/0 after the cancelled move: %+v", p)
	}

	// The reassignment let through: ra/0 moves to the target.
	if r := alter(0, []int32{to}); r.Err != nil {
		t.Fatalf("reassign ra/0 to %d: %+v", to, r)
	}
	testutil.Eventually(t, 30*time.Second, "Metadata shows ra/0 led by the target", func() bool {
		md, err := adm.Metadata(ctxFor(t, 30*time.Second), "ra")
		if err != nil {
			return false
		}
		p := md.Topics["ra"].Partitions[0]
		return p.Leader == to && reflect.DeepEqual(p.Replicas, []int32{to}) && len(list()["ra"]) == 0
	})
	if r := alter(0, []int32{to}); r.Err != nil {
		t.Fatalf("reassign ra/0 to its leader: %+v", r)
	}
	after := produceValues(t, cl, "ra", 3, 100, "after")
	for v, off := range after {
		acked[v] = off
	}
	if after["after-p0-00000"] != 150 {
		t.Fatalf("first record after the move at offset %d, want 150", after["after-p0-00000"])
	}
	got := consumeAll(t, c, "ra", len(acked))
	for v, off := range acked {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s acked at %d, read %v", v, off, r)
		}
	}
	// The move started the target's log at 150. (Other ranges are failovers' on a
	// loaded machine: a broker fenced because it stalled gives its partitions to another,
	// before the move at offset 0, or after the records above at 250, as CI saw.)
	if p := partition0(0); len(p.Logs) < 2 || !slices.Contains(p.Logs, metadata.LogRange{Broker: to, StartOffset: 150}) {
		t.Fatalf("ra/0 after the move: %+v", p)
	}
	el, err = adm.ElectLeaders(ctxFor(t, 30*time.Second), kadm.ElectPreferredReplica, kadm.TopicsSet{"ra": {0: {}}})
	if err != nil || el["ra"][0].Err != kerr.ElectionNotNeeded {
		t.Fatalf("elect ra/0 after the move: %+v, %v", el, err)
	}
}
