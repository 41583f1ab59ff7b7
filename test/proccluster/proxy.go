package proccluster

import (
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections to one address; cut drops them all and refuses new ones
// (a network partition between a broker and a controller, without root or namespaces).
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cutOff bool
	conns  map[net.Conn]struct{}
	closed bool
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	px := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go px.accept()
	return px, nil
}

func (px *proxy) addr() string { return px.ln.Addr().String() }

func (px *proxy) accept() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		if px.cutOff || px.closed {
			px.mu.Unlock()
			c.Close()
			continue
		}
		px.conns[c] = struct{}{}
		px.mu.Unlock()
		go px.pipe(c)
	}
}

func (px *proxy) pipe(c net.Conn) {
	defer func() {
		px.mu.Lock()
		delete(px.conns, c)
		px.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", px.target)
	if err != nil {
		return
	}
	px.mu.Lock()
	if px.cutOff || px.closed {
		px.mu.Unlock()
		up.Close()
		return
	}
	px.conns[up] = struct{}{}
	px.mu.Unlock()
	defer func() {
		px.mu.Lock()
		delete(px.conns, up)
		px.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (px *proxy) cut(on bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.cutOff = on
	if on {
		for c := range px.conns {
			c.Close()
		}
	}
}

func (px *proxy) close() {
	px.mu.Lock()
	px.closed = true
	for c := range px.conns {
		c.Close()
	}
	px.mu.Unlock()
	px.ln.Close()
}
