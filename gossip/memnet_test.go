package gossip

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// memNetwork is an in-memory network for memberlist transports (Config.Transport), so
// members can run inside a testing/synctest bubble: it has no goroutines, and what
// waits, waits on channels or timers, which the bubble's fake clock drives.
//
// It behaves like loopback where the tests need it to: packets are fire and forget
// (never block the sender; dropped when nothing listens at the address or the
// receiver's queue is full), streams are net.Pipe pairs (dialing an address nothing
// listens at is refused at once), one address is held by one transport until it shuts
// down, and a transport that shuts down closes its streams, as a crashed process's do.
// memberlist's MockNetwork does not fit: its packets block the sender until received
// (two members acking each other deadlock), its Shutdown does nothing (a closed member
// keeps receiving), and it routes by node name (a restarted member at a new address
// is reached at the old one).
//
// Channels and timers belong to the bubble that creates them: make the network inside
// the synctest.Test function.
type memNetwork struct {
	ip string

	mu       sync.Mutex
	nextPort int
	byAddr   map[string]*memTransport
}

// memQueueLen is how many packets wait for a receiver before more are dropped (a
// socket buffer).
const memQueueLen = 1024

func newMemNetwork() *memNetwork {
	return &memNetwork{ip: "127.0.0.1", nextPort: 7000, byAddr: map[string]*memTransport{}}
}

var errMemRefused = errors.New("memnet: connection refused")

// freeAddr returns an address no transport holds, not handed out before.
func (n *memNetwork) freeAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pickLocked()
}

func (n *memNetwork) pickLocked() string {
	for {
		n.nextPort++
		addr := net.JoinHostPort(n.ip, strconv.Itoa(n.nextPort))
		if n.byAddr[addr] == nil {
			return addr
		}
	}
}

// transport is a Config.Transport: it listens at ip:port (port 0: a free one).
func (n *memNetwork) transport(ip string, port int) (memberlist.NodeAwareTransport, error) {
	if ip != n.ip {
		return nil, fmt.Errorf("memnet: cannot bind %s: the network has only %s", ip, n.ip)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if port == 0 {
		addr = n.pickLocked()
	} else if n.byAddr[addr] != nil {
		return nil, fmt.Errorf("memnet: listen %s: address already in use", addr)
	}
	ap, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	t := &memTransport{
		n:        n,
		addr:     ap,
		packetCh: make(chan *memberlist.Packet, memQueueLen),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	n.byAddr[addr] = t
	return t, nil
}

func (n *memNetwork) lookup(addr string) *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byAddr[addr]
}

// memTransport is one member's endpoint on a memNetwork.
type memTransport struct {
	n        *memNetwork
	addr     *net.UDPAddr
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	done     chan struct{} // closed by Shutdown

	mu     sync.Mutex
	closed bool
	conns  []net.Conn // stream ends held by this member, closed by Shutdown
}

var (
	_ memberlist.NodeAwareTransport = (*memTransport)(nil)
	_ autoBindPorter                = (*memTransport)(nil)
)

// GetAutoBindPort is the port listened at.
func (t *memTransport) GetAutoBindPort() int { return t.addr.Port }

// FinalAdvertiseAddr implements memberlist.Transport: the given address, else the one
// listened at.
func (t *memTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	adv := t.addr.IP
	if ip != "" {
		if adv = net.ParseIP(ip); adv == nil {
			return nil, 0, fmt.Errorf("memnet: bad advertise IP %q", ip)
		}
	}
	if port == 0 {
		port = t.addr.Port
	}
	return adv, port, nil
}

// WriteTo implements memberlist.Transport.
func (t *memTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport. It never blocks; like UDP,
// a packet nobody can receive is lost without an error.
func (t *memTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	now := time.Now()
	if t.isClosed() {
		return now, net.ErrClosed
	}
	if dest := t.n.lookup(a.Addr); dest != nil {
		dest.deliver(&memberlist.Packet{Buf: slices.Clone(b), From: t.addr, Timestamp: now})
	}
	return now, nil
}

func (t *memTransport) deliver(p *memberlist.Packet) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	select {
	case t.packetCh <- p:
	default: // queue full: dropped
	}
}

// PacketCh implements memberlist.Transport.
func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout implements memberlist.Transport.
func (t *memTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport: a stream to the member
// listening at a.Addr (the node name is ignored, as by TCP), from an ephemeral port.
func (t *memTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	dest := t.n.lookup(a.Addr)
	if dest == nil {
		return nil, fmt.Errorf("memnet: dial %s: %w", a.Addr, errMemRefused)
	}
	remote, err := net.ResolveTCPAddr("tcp", a.Addr)
	if err != nil {
		return nil, err
	}
	local, err := net.ResolveTCPAddr("tcp", t.n.freeAddr())
	if err != nil {
		return nil, err
	}
	mine, theirs := net.Pipe()
	mine = &memConn{Conn: mine, local: local, remote: remote}
	theirs = &memConn{Conn: theirs, local: remote, remote: local}
	if !t.track(mine) {
		_, _ = mine.Close(), theirs.Close()
		return nil, net.ErrClosed
	}
	if !dest.track(theirs) {
		_, _ = mine.Close(), theirs.Close()
		return nil, fmt.Errorf("memnet: dial %s: %w", a.Addr, errMemRefused)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dest.streamCh <- theirs:
		return mine, nil
	case <-dest.done:
		err = errMemRefused
	case <-t.done:
		err = net.ErrClosed
	case <-timer.C:
		err = errors.New("memnet: i/o timeout")
	}
	_, _ = mine.Close(), theirs.Close()
	return nil, fmt.Errorf("memnet: dial %s: %w", a.Addr, err)
}

// track records a stream end to close at Shutdown; false if already shut down.
func (t *memTransport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns = slices.DeleteFunc(t.conns, func(c net.Conn) bool { return c.(*memConn).isClosed() })
	t.conns = append(t.conns, c)
	return true
}

// StreamCh implements memberlist.Transport.
func (t *memTransport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown implements memberlist.Transport: the address is free again, packets to it
// are lost, dials to it refused, and this member's streams are closed.
func (t *memTransport) Shutdown() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()

	t.n.mu.Lock()
	if t.n.byAddr[t.addr.String()] == t {
		delete(t.n.byAddr, t.addr.String())
	}
	t.n.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return nil
}

func (t *memTransport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// memConn is a net.Pipe end with TCP addresses.
type memConn struct {
	net.Conn
	local, remote net.Addr

	mu     sync.Mutex
	closed bool
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *memConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
