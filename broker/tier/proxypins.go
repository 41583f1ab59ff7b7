package tier

import (
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// Proxy pins. A batch this broker wrote as a zone-routing proxy (partlog.RecProxyBatch)
// is read from this WAL by the partition's leader (and its later leaders and read
// replicas) until the leader has uploaded it, so the WAL keeps it until the partition's
// manifest reaches the batch's end. The pin is taken when the batch is synced, before its
// link is sent (from then on the leader may read it), and is let go only on proof that
// the WAL's copy is no longer needed:
//   - resolved with the batch's end when the leader answers with its offsets, acked or
//     written but not acked (peer.LinkMaybeLogged: it may be in the log);
//   - released when the leader refused the link before giving it offsets (it is not in
//     the log and never will be), or when it was never sent;
//   - left unresolved when the answer was lost: the broker fences the link sessions the
//     link may have gone on and resolves the pin with the log end the leader gave once
//     no link of them could be applied any more (LostPins, ResolveLost).
// Pins of one partition are queued in WAL order; the trim point is the position of the
// first one still held.

// ProxyPin is one proxied batch's hold on the WAL.
type ProxyPin struct {
	pos      wal.Pos
	end      int64 // -1 while the answer is awaited, -2 when it was lost
	fencing  bool  // lost, and LostPins handed it to a fence
	released bool
}

const (
	pinPending int64 = -1
	pinLost    int64 = -2
)

// PinProxied holds the WAL from pos on for a proxied batch of partition k.
func (t *Tier) PinProxied(k partlog.Key, pos wal.Pos) *ProxyPin {
	pn := &ProxyPin{pos: pos, end: pinPending}
	t.pinMu.Lock()
	t.proxyPins[k] = append(t.proxyPins[k], pn)
	t.pinMu.Unlock()
	return pn
}

// ResolvePin keeps the pin until the partition's objects reach end.
func (t *Tier) ResolvePin(pn *ProxyPin, end int64) {
	t.pinMu.Lock()
	pn.end = end
	t.pinMu.Unlock()
}

// ReleasePin lets the WAL go: the batch is not part of the partition's log and never
// will be (the leader said so, or the link was never sent).
func (t *Tier) ReleasePin(pn *ProxyPin) {
	t.pinMu.Lock()
	pn.released = true
	t.pinMu.Unlock()
}

// LostPin marks a pin whose link's outcome is unknown.
func (t *Tier) LostPin(pn *ProxyPin) {
	t.pinMu.Lock()
	pn.end = pinLost
	t.pinMu.Unlock()
}

// LostPins returns the partitions with a lost pin and marks those pins: the caller then
// fences every link session opened so far (so every marked pin's link went on a fenced
// session) and calls ResolveLost with the log ends the leaders gave after the fence.
// fresh reports whether a pin was marked now for the first time: if not, the sessions
// fenced before still cover every marked pin and need not be ended again.
func (t *Tier) LostPins() (keys []partlog.Key, fresh bool) {
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	for k, q := range t.proxyPins {
		found := false
		for _, pn := range q {
			if !pn.released && pn.end == pinLost {
				fresh = fresh || !pn.fencing
				pn.fencing, found = true, true
			}
		}
		if found {
			keys = append(keys, k)
		}
	}
	return keys, fresh
}

// ResolveLost resolves the lost pins of k that LostPins marked with the partition's log
// end as its leader reported it after fencing their sessions: whatever those links
// became, it is below, and none can be applied later.
func (t *Tier) ResolveLost(k partlog.Key, logEnd int64) {
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	for _, pn := range t.proxyPins[k] {
		if !pn.released && pn.end == pinLost && pn.fencing {
			pn.end = logEnd
		}
	}
}

// proxyTrimPointLocked drops pins that the view shows safe and returns the lowest
// position still held (ok false: none).
func (t *Tier) proxyTrimPointLocked(v *metadata.View) (at wal.Pos, ok bool) {
	for k, q := range t.proxyPins {
		i := 0
		for ; i < len(q); i++ {
			pn := q[i]
			if !pn.released && (pn.end < 0 || !released(v, k, walPin{pos: pn.pos, end: pn.end})) {
				break
			}
		}
		if i == len(q) {
			delete(t.proxyPins, k)
			continue
		}
		if i > 0 {
			t.proxyPins[k] = append([]*ProxyPin(nil), q[i:]...)
		}
		if !ok || q[i].pos < at {
			at, ok = q[i].pos, true
		}
	}
	return at, ok
}

// ProxyPinsHeld is the number of proxied batches the WAL is kept for (metrics, tests).
func (t *Tier) ProxyPinsHeld() int {
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	n := 0
	for _, q := range t.proxyPins {
		for _, pn := range q {
			if !pn.released {
				n++
			}
		}
	}
	return n
}

// PinEnd is what the pin waits for: the partition's objects reaching it (>= 0), or -1 while
// the link's answer is awaited, -2 while a lost answer awaits its session fence (tests).
func (t *Tier) PinEnd(pn *ProxyPin) (end int64, released bool) {
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	return pn.end, pn.released
}
