package controller

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// memNet is an in-memory network for the controllers' HTTP API: listeners whose Accept
// waits on a channel and connections that are net.Pipe pairs. Unlike a loopback socket,
// a goroutine waiting on it is durably blocked in a testing/synctest bubble, so the
// controllers of a memCluster can run there on the bubble's fake clock, fence votes
// (controller to controller, over the API) included. Made inside the bubble that uses
// it: its channels belong to that bubble.
type memNet struct {
	mu  sync.Mutex
	lns map[string]*memListener
}

func newMemNet() *memNet { return &memNet{lns: map[string]*memListener{}} }

// listen binds addr, replacing a closed listener of a stopped controller.
func (n *memNet) listen(addr string) (*memListener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.lns[addr]; old != nil && !old.closed() {
		return nil, fmt.Errorf("memnet: listen %s: address in use", addr)
	}
	ln := &memListener{addr: memNetAddr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
	n.lns[addr] = ln
	return ln, nil
}

// dial is an http.Transport's DialContext on this network: the client's end of a pipe
// whose other end the listener at addr accepts.
func (n *memNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	ln := n.lns[addr]
	n.mu.Unlock()
	if ln == nil {
		return nil, fmt.Errorf("memnet: dial %s: connection refused", addr)
	}
	client, server := net.Pipe()
	select {
	case ln.conns <- server:
		return client, nil
	case <-ln.done:
		err := fmt.Errorf("memnet: dial %s: connection refused", addr)
		client.Close()
		server.Close()
		return nil, err
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

// memListener is a net.Listener of a memNet. Accept returns net.ErrClosed once it is
// closed, as a socket's does, so http.Server.Serve ends.
type memListener struct {
	addr  memNetAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }

func (l *memListener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// memNetAddr is a memNet address: any name with a port, as an HTTP URL wants.
type memNetAddr string

func (a memNetAddr) Network() string { return "memnet" }
func (a memNetAddr) String() string  { return string(a) }
