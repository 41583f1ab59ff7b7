package tier

import (
	"testing"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// A lost pin is resolved only by the fence round that marked it (or a later one): a pin
// lost after the caller ended its sessions is not covered by that fence and keeps
// waiting; LostPins says when a pin was marked for the first time (new sessions must be
// ended before fencing), and never lets a pin go by itself.
func TestLostPinsResolvedOnlyByTheirFence(t *testing.T) {
	tr := &Tier{proxyPins: map[partlog.Key][]*ProxyPin{}}
	k := partlog.Key{ID: metadata.TopicID{1}, Index: 0}
	a, b := tr.PinProxied(k, 100), tr.PinProxied(k, 200)
	tr.LostPin(a)
	keys, fresh := tr.LostPins()
	if len(keys) != 1 || keys[0] != k || !fresh {
		t.Fatalf("LostPins %v %v", keys, fresh)
	}
	if _, fresh := tr.LostPins(); fresh {
		t.Fatal("a pin marked before reported fresh again")
	}
	tr.LostPin(b) // lost after the fence round began: not covered by it
	tr.ResolveLost(k, 50)
	if end, rel := tr.PinEnd(a); end != 50 || rel {
		t.Fatalf("marked pin: end %d released %v, want 50", end, rel)
	}
	if end, rel := tr.PinEnd(b); end != pinLost || rel {
		t.Fatalf("pin lost after the round: end %d released %v, want still lost", end, rel)
	}
	if _, fresh := tr.LostPins(); !fresh {
		t.Fatal("a newly lost pin not reported fresh")
	}
	if tr.ProxyPinsHeld() != 2 {
		t.Fatalf("%d pins held, want 2", tr.ProxyPinsHeld())
	}
}
