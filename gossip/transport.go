package gossip

import (
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// newTransport makes the transport Start gives memberlist: Config.Transport's, or, when
// bytes are counted, memberlist's NetTransport bound here (memberlist cannot count its
// own), wrapped to count. nil, nil: memberlist binds its own NetTransport.
func newTransport(cfg Config, bindIP string, port int, logger *log.Logger) (memberlist.NodeAwareTransport, error) {
	var t memberlist.NodeAwareTransport
	var err error
	switch {
	case cfg.Transport != nil:
		t, err = cfg.Transport(bindIP, port)
	case cfg.Count != nil:
		t, err = newNetTransport(bindIP, port, logger)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("could not set up transport: %w", err)
	}
	if cfg.Count != nil {
		t = newCountingTransport(t, cfg.Count)
	}
	return t, nil
}

// newNetTransport binds bindIP:port, TCP and UDP (port 0: a free port, retried as
// memberlist does for its own transport).
func newNetTransport(bindIP string, port int, logger *log.Logger) (*memberlist.NetTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{bindIP}, BindPort: port, Logger: logger}
	limit := 1
	if port == 0 {
		limit = 10 // binding TCP and UDP to one picked port races with other processes
	}
	var nt *memberlist.NetTransport
	var err error
	for range limit {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nt, err
}

// autoBindPorter is a transport that reports the port it picked for port 0.
type autoBindPorter interface{ GetAutoBindPort() int }

// countingTransport is a memberlist transport (NetTransport: UDP packets, TCP streams)
// with every byte it sends and receives reported to count, with the peer's address: the
// address a packet is sent to or came from, the address a stream was dialed to, or the
// remote address of an accepted stream (the peer's ephemeral port). The bytes are
// those on the wire above TCP/UDP: memberlist's label, encryption and compression
// included.
type countingTransport struct {
	nt    memberlist.NodeAwareTransport
	count func(peerAddr string, out bool, n int)

	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var (
	_ memberlist.NodeAwareTransport = (*countingTransport)(nil)
	_ autoBindPorter                = (*countingTransport)(nil)
)

// newCountingTransport wraps nt and starts forwarding what it receives.
func newCountingTransport(nt memberlist.NodeAwareTransport, count func(string, bool, int)) *countingTransport {
	t := &countingTransport{
		nt:       nt,
		count:    count,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		stop:     make(chan struct{}),
	}
	t.wg.Add(2)
	go t.forwardPackets()
	go t.forwardStreams()
	return t
}

// GetAutoBindPort is the wrapped transport's picked port, 0 if it does not say.
func (t *countingTransport) GetAutoBindPort() int {
	if p, ok := t.nt.(autoBindPorter); ok {
		return p.GetAutoBindPort()
	}
	return 0
}

func (t *countingTransport) forwardPackets() {
	defer t.wg.Done()
	in := t.nt.PacketCh()
	for {
		select {
		case p := <-in:
			if p.From != nil {
				t.count(p.From.String(), false, len(p.Buf))
			}
			select {
			case t.packetCh <- p:
			case <-t.stop:
				return
			}
		case <-t.stop:
			return
		}
	}
}

func (t *countingTransport) forwardStreams() {
	defer t.wg.Done()
	in := t.nt.StreamCh()
	for {
		select {
		case c := <-in:
			cc := t.wrap(c, c.RemoteAddr().String())
			select {
			case t.streamCh <- cc:
			case <-t.stop:
				_ = c.Close()
				return
			}
		case <-t.stop:
			return
		}
	}
}

func (t *countingTransport) wrap(c net.Conn, peer string) net.Conn {
	return &countingConn{Conn: c, peer: peer, count: t.count}
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *countingTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.nt.FinalAdvertiseAddr(ip, port)
}

// WriteTo implements memberlist.Transport.
func (t *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	ts, err := t.nt.WriteToAddress(b, a)
	if err == nil {
		t.count(a.Addr, true, len(b))
	}
	return ts, err
}

// PacketCh implements memberlist.Transport.
func (t *countingTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout implements memberlist.Transport.
func (t *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.nt.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return t.wrap(c, a.Addr), nil
}

// StreamCh implements memberlist.Transport.
func (t *countingTransport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown implements memberlist.Transport. memberlist keeps reading PacketCh and
// StreamCh until it returns, so the listeners drain through the forwarders before
// these stop. Safe to call more than once.
func (t *countingTransport) Shutdown() error {
	err := t.nt.Shutdown()
	t.stopOnce.Do(func() { close(t.stop) })
	t.wg.Wait()
	return err
}

// countingConn reports a stream's bytes.
type countingConn struct {
	net.Conn
	peer  string
	count func(peerAddr string, out bool, n int)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.count(c.peer, false, n)
	}
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.count(c.peer, true, n)
	}
	return n, err
}
