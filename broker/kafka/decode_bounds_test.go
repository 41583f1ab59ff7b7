package kafka

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// TestProduceDecodeBound (issue 20, item 3, on a listener without SASL, where every
// client may send Produce): a 16 MiB Produce whose topic array claims 2.8 M empty topics
// (what fits at 6 bytes each, so kmsg's own count check passes) is refused before kmsg
// allocates the array (~300 MB), and the connection closed; a real Produce still works
// (the package's produce tests).
func TestProduceDecodeBound(t *testing.T) {
	s := startLimited(t, Config{MaxRequestBytes: 32 << 20, Limits: Limits{QueuedMaxRequestBytes: 64 << 20}}, nil)
	const size = 16 << 20
	b := rawHeader(size, 0, 3)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // transactional id
	b = binary.BigEndian.AppendUint16(b, 1)      // acks
	b = binary.BigEndian.AppendUint32(b, 30000)  // timeout
	b = binary.BigEndian.AppendUint32(b, uint32((size-30)/6))
	b = append(b, make([]byte, size+4-len(b))...) // empty names, empty partition arrays
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	nc := dialFrom(t, s, "")
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	if !isClosed(nc) {
		t.Fatal("a Produce claiming millions of empty topics was served or left open")
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
		t.Fatalf("the broker allocated %d MiB for a %d MiB frame", alloc>>20, size>>20)
	}
	if n := metricValue(s.metrics.badFrames); n != 1 {
		t.Fatalf("bad frames counted: %v, want 1", n)
	}
}
