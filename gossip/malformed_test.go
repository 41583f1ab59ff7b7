package gossip

import (
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/weir-io/weir/internal/testutil"
)

// badDelegate announces fixed, possibly malformed, metadata.
type badDelegate struct{ meta []byte }

func (d *badDelegate) NodeMeta(limit int) []byte                  { return d.meta }
func (d *badDelegate) NotifyMsg([]byte)                           {}
func (d *badDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *badDelegate) LocalState(join bool) []byte                { return nil }
func (d *badDelegate) MergeRemoteState(buf []byte, join bool)     {}

// startRawNode starts a plain memberlist node (not this package) on mn that joins seed.
func startRawNode(t *testing.T, mn *memNetwork, name string, d *badDelegate, seed string) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	tr, err := mn.transport("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	mc.Transport = tr
	mc.BindPort, mc.AdvertisePort = 0, 0 // advertise the port tr picked, not 7946
	mc.Label = DefaultCluster
	mc.Delegate = d
	mc.Logger = log.New(io.Discard, "", 0)
	if os.Getenv("WEIR_GOSSIP_TEST_LOG") != "" {
		mc.Logger = log.New(os.Stderr, "raw "+name+" ", 0)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatalf("raw memberlist: %v", err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{seed}); err != nil {
		t.Fatalf("raw join: %v", err)
	}
	return ml
}

func TestMalformedPeerIgnored(t *testing.T) {
	simulate(t, testMalformedPeerIgnored)
}

func testMalformedPeerIgnored(t *testing.T, mn *memNetwork) {
	nodes := startCluster(t, mn.config, 3)
	seed := nodes[0].g.Addr()

	valid8, err := encodeMeta(Member{BrokerID: 8, KafkaAddr: "127.0.0.1:9092", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		meta []byte
	}{
		{"garbage", []byte("definitely not weir metadata \x00\xff")},
		{"broker-4", nil},                               // no metadata at all
		{"broker-5", []byte("{\"id\":5}")},              // JSON, not our format
		{"broker-6", valid8[:len(valid8)-3]},            // truncated
		{"broker-7", valid8},                            // claims another broker id
		{"kafka-8", valid8},                             // name not broker-<id>
		{"broker-9", []byte{'W', 1, 9, 1, 200, 1, 'x'}}, // length beyond the buffer
	}
	var raws []*memberlist.Memberlist
	for _, b := range bad {
		raws = append(raws, startRawNode(t, mn, b.name, &badDelegate{meta: b.meta}, seed))
	}
	// The raw nodes have no Alive filter: once they list all our members, every
	// exchange with the seed has happened.
	for _, r := range raws {
		testutil.Eventually(t, convergeTimeout, "raw node learns the cluster", func() bool { return r.NumMembers() >= 4 })
	}
	testutil.Eventually(t, convergeTimeout, "malformed metadata counted on the seed", func() bool {
		return metricValue(t, nodes[0].reg, "weir_gossip_malformed_meta_total") >= float64(len(bad))
	})
	// Not synchronisation: the waits above proved every exchange with the bad nodes
	// happened. What must not happen is a bad node showing up later, so gossip runs
	// with them for 10 s of fake time (a hundred gossip and probe rounds, two
	// push/pull syncs) before the members and events are checked.
	time.Sleep(10 * time.Second)
	for _, n := range nodes {
		got := n.g.Members()
		if len(got) != 3 || got[0].BrokerID != 1 || got[1].BrokerID != 2 || got[2].BrokerID != 3 {
			t.Fatalf("broker %d Members() = %v, want brokers 1-3 only", n.cfg.BrokerID, got)
		}
		for _, e := range n.rec.all() {
			if e.m.BrokerID > 3 || e.kind != "join" {
				t.Fatalf("broker %d got unexpected event %s %v", n.cfg.BrokerID, e.kind, e.m)
			}
		}
	}
}

// A peer that starts valid and then announces malformed metadata keeps its last valid
// view; it is neither dropped nor reported.
func TestPeerTurningMalformedKeepsLastValidView(t *testing.T) {
	simulate(t, testPeerTurningMalformedKeepsLastValidView)
}

func testPeerTurningMalformedKeepsLastValidView(t *testing.T, mn *memNetwork) {
	nodes := startCluster(t, mn.config, 2)
	good, err := encodeMeta(Member{BrokerID: 9, Zone: "zone-x", KafkaAddr: "127.0.0.1:9099", Epoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	d := &badDelegate{meta: good}
	raw := startRawNode(t, mn, "broker-9", d, nodes[0].g.Addr())
	waitConverged(t, nodes, 3)
	for _, n := range nodes {
		if m, _ := n.g.Lookup(9); m.Zone != "zone-x" || m.Epoch != 4 {
			t.Fatalf("Lookup(9) = %v", m)
		}
	}
	d.meta = []byte("broken")
	if err := raw.UpdateNode(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The raw node's broadcast of the update may miss a member (random targets, few
	// retransmits), and a member that rejects it does not pass it on: that member
	// then gets it from a push/pull sync with the raw node, which it picks among its
	// peers at random every 5 s. Two minutes of fake time make that certain.
	testutil.Eventually(t, 2*time.Minute, "malformed update counted", func() bool {
		return metricValue(t, nodes[0].reg, "weir_gossip_malformed_meta_total") >= 1 &&
			metricValue(t, nodes[1].reg, "weir_gossip_malformed_meta_total") >= 1
	})
	for _, n := range nodes {
		if m, ok := n.g.Lookup(9); !ok || m.Epoch != 4 {
			t.Fatalf("broker %d Lookup(9) = %v %v, want the last valid metadata", n.cfg.BrokerID, m, ok)
		}
		if _, ok := n.rec.find(byID(9), "leave", "update"); ok {
			t.Fatalf("broker %d reported the malformed update", n.cfg.BrokerID)
		}
	}
}
