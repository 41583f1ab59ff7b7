package controller

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/metadata"
)

// countConn counts a connection's bytes.
type countConn struct {
	net.Conn
	in, out *atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// TestClientWrapConn: every connection a client dials goes through WrapConn, under the
// controller address it dialed, and carries the client's requests and their answers.
func TestClientWrapConn(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.waitLeader()
	var (
		mu      sync.Mutex
		dialed  []string
		in, out atomic.Int64
	)
	c := tc.client(1, func(cfg *ctlclient.ClientConfig) {
		cfg.WrapConn = func(addr string, nc net.Conn) net.Conn {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			return &countConn{Conn: nc, in: &in, out: &out}
		}
	})
	// NewClient read a first View through it.
	if in.Load() == 0 || out.Load() == 0 {
		t.Fatalf("after ctlclient.NewClient: %d bytes in, %d out", in.Load(), out.Load())
	}
	ctx := ctxT(t)
	if err := c.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	in0, out0 := in.Load(), out.Load()
	if _, err := c.CreateTopic(ctx, metadata.TopicSpec{Name: "counted", Partitions: 3, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if in.Load() <= in0 || out.Load() <= out0 {
		t.Fatalf("CreateTopic moved no counted bytes: in %d→%d, out %d→%d", in0, in.Load(), out0, out.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) == 0 {
		t.Fatal("WrapConn never called")
	}
	for _, a := range dialed {
		if !slices.Contains(tc.apiAddrs(), a) {
			t.Fatalf("WrapConn got address %q, not a controller's (%v)", a, tc.apiAddrs())
		}
	}
}
