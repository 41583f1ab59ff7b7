package gossip

import "sync"

type eventKind uint8

const (
	eventJoin eventKind = iota
	eventUpdate
	eventLeave
)

func (k eventKind) String() string {
	switch k {
	case eventJoin:
		return "join"
	case eventUpdate:
		return "update"
	default:
		return "leave"
	}
}

type event struct {
	kind   eventKind
	member Member
}

// dispatcher calls the Events callbacks on its own goroutine, in the order memberlist
// reported the changes. Its queue is unbounded, so memberlist's goroutines (which
// notify while holding memberlist's node lock) never wait for a slow callback.
type dispatcher struct {
	ev Events

	mu      sync.Mutex
	queue   []event
	stopped bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newDispatcher(ev Events) *dispatcher {
	d := &dispatcher{
		ev:   ev,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go d.run()
	return d
}

// push queues an event; it never blocks. Events pushed after close are dropped.
func (d *dispatcher) push(e event) {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	d.queue = append(d.queue, e)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		}
		for {
			d.mu.Lock()
			if d.stopped || len(d.queue) == 0 {
				d.mu.Unlock()
				break
			}
			e := d.queue[0]
			d.queue[0] = event{}
			d.queue = d.queue[1:]
			if len(d.queue) == 0 {
				d.queue = nil
			}
			d.mu.Unlock()
			d.deliver(e)
		}
	}
}

func (d *dispatcher) deliver(e event) {
	var fn func(Member)
	switch e.kind {
	case eventJoin:
		fn = d.ev.OnJoin
	case eventUpdate:
		fn = d.ev.OnUpdate
	case eventLeave:
		fn = d.ev.OnLeave
	}
	if fn != nil {
		fn(e.member)
	}
}

// close drops queued events and stops the goroutine. It does not wait for a callback
// that is already being delivered (so a callback may itself call Close or Leave); at
// most that one callback runs after close returns.
func (d *dispatcher) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.stopped = true
	d.queue = nil
	close(d.stop)
}
