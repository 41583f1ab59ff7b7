package kafka

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// rawHeader is the start of a request frame announcing a body of size bytes (the
// header counted), up to and including the empty client id.
func rawHeader(size int, key, version int16) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
}

// TestPreAuthFramesRefusedUnread (issue 20, items 2 and 3): on a SASL listener, before
// login: a 100 MiB Produce whose topic array claims 52 M entries is refused at its size
// (over 64 KiB) and a 32 KiB Produce at its API key, both before their bodies arrive
// and with nothing taken from the budget; ApiVersions is still answered and, after
// login, a 600 KiB request is served.
func TestPreAuthFramesRefusedUnread(t *testing.T) {
	h := startSASLServerWith(t, sasl.DefaultConfig(), nil, nil, func(c *Config) {
		c.MaxRequestBytes = 100 << 20
		c.Limits = Limits{QueuedMaxRequestBytes: 128 << 20}
	})
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)

	big := dialAddr(t, h.addr)
	head := rawHeader(100<<20, 0, 3)
	head = binary.BigEndian.AppendUint16(head, 0xffff)   // null transactional id
	head = binary.BigEndian.AppendUint16(head, 1)        // acks
	head = binary.BigEndian.AppendUint32(head, 30000)    // timeout
	head = binary.BigEndian.AppendUint32(head, 52000000) // topics: 52 M claimed
	if _, err := big.nc.Write(head); err != nil {
		t.Fatal(err)
	}
	if !isClosed(big.nc) {
		t.Fatal("an unauthenticated 100 MiB Produce frame was not refused before its body")
	}

	mid := dialAddr(t, h.addr)
	if _, err := mid.nc.Write(rawHeader(32<<10, 0, 3)); err != nil {
		t.Fatal(err)
	}
	if !isClosed(mid.nc) {
		t.Fatal("an unauthenticated 32 KiB Produce frame was not refused before its body")
	}
	if n := h.s.lim.inUse(); n != 0 {
		t.Fatalf("refused frames hold %d budget bytes", n)
	}
	if got := h.s.sasl.refused.WithLabelValues("unauthenticated"); metricValue(got) != 1 {
		t.Fatalf("refusals before login: %v, want 1 (the 32 KiB Produce)", metricValue(got))
	}

	r := dialAddr(t, h.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	r.send(1, av)
	if resp := r.expect(t, av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before login: %d", resp.ErrorCode)
	}
	saslLogin(t, r, "alice", "pw")
	// A Metadata request padded to 600 KiB (kmsg ignores trailing bytes): over the
	// pre-login cap, served after login.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	frame := rawHeader(0, 3, 1)
	frame = md.AppendTo(frame)
	frame = append(frame, make([]byte, 600<<10)...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := r.nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	if resp := r.expect(t, md).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Fatalf("Metadata after login: %d topics", len(resp.Topics))
	}
}

// TestPreAuthBudgetOfItsOwn (issue 20, item 2): 60 unauthenticated connections each send
// 16 KiB of a 64 KiB frame and stall; a logged-in client's Metadata is still answered,
// because their bytes come from a pool of their own, not the small requests' pool; and
// a new client still logs in, because a stalled unauthenticated frame holds only what
// arrived of it (plus 4 KiB), not the whole frame.
func TestPreAuthBudgetOfItsOwn(t *testing.T) {
	h := startSASLServerWith(t, sasl.DefaultConfig(), nil, nil, func(c *Config) {
		// Small requests' pool: 1 MiB; the stalled frames would want 2.5 MiB of it. The
		// frame deadline is long, so only the pools are tested.
		c.Limits = Limits{QueuedMaxRequestBytes: 8 << 20, FrameReadTimeout: 5 * time.Minute}
	})
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)
	r := dialAddr(t, h.addr)
	saslLogin(t, r, "alice", "pw")
	const conns = 60
	for i := 0; i < conns; i++ {
		a := dialAddr(t, h.addr)
		b := append(rawHeader(64<<10, 18, 0), make([]byte, 16<<10)...)
		if _, err := a.nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 30*time.Second, "the stalled frames to hold as much as the small pool", func() bool { return h.s.lim.inUse() >= 1<<20 })
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	r.send(9, md)
	if resp := r.expect(t, md).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Fatalf("Metadata: %d topics", len(resp.Topics))
	}
	// The Metadata's own bytes come back just after its answer is written.
	testutil.Eventually(t, 30*time.Second, "the small requests' pool to hold nothing (the stalled frames are not in it)", func() bool { return h.s.lim.small.inUse() == 0 })
	if n := h.s.lim.preAuth.inUse(); n > conns*(16<<10+minBodyChunk) {
		t.Fatalf("unauthenticated frames hold %d bytes, more than what arrived of them and a chunk each", n)
	}
	saslLogin(t, dialAddr(t, h.addr), "alice", "pw")
}

// TestFrameReadDeadline (issue 20, item 2): a connection that stalls in the middle of a
// frame is closed after the frame's read deadline (seconds, not the idle timeout), before
// login and after, and the budget its partial frame held comes back.
func TestFrameReadDeadline(t *testing.T) {
	h := startSASLServerWith(t, sasl.DefaultConfig(), nil, nil, func(c *Config) {
		c.IdleTimeout = 0 // never: only the frame deadline can close them
		c.Limits = Limits{QueuedMaxRequestBytes: 8 << 20, FrameReadTimeout: 500 * time.Millisecond}
	})
	h.addUser(t, "alice", "pw", metadata.ScramSHA256)
	pre := dialAddr(t, h.addr)
	if _, err := pre.nc.Write(append(rawHeader(8<<10, 18, 0), make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	in := dialAddr(t, h.addr)
	saslLogin(t, in, "alice", "pw")
	if _, err := in.nc.Write(append(rawHeader(8<<10, 3, 1), make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	if !isClosed(pre.nc) {
		t.Fatal("an unauthenticated connection stalled in a frame was left open")
	}
	if !isClosed(in.nc) {
		t.Fatal("a logged-in connection stalled in a frame was left open")
	}
	testutil.Eventually(t, 30*time.Second, "the budget to come back", func() bool { return h.s.lim.inUse() == 0 })
}
