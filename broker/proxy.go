package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/wal"
)

// Proxy produce (zone routing). A client in this broker's zone was told this broker leads
// a partition whose real leader is in another zone. The batch is appended to this
// broker's WAL as a RecProxyBatch and synced (the fence token checked, as for any
// append); then a Link naming it goes to the leader over a persistent connection
// (peer), batched with the other links waiting for that leader. The leader assigns the
// offsets, appends the link to its own WAL, syncs, and answers with the base offset; the
// client is answered with the leader's answer, and only while this broker's lease is
// valid. Only the link and its answer cross zones.
//
// The WAL keeps the batch until the leader uploaded it (tier proxy pins), and lets it go
// only on proof: the leader's answer says the link was refused before it got offsets,
// or an upload covers the offsets it got (acked, or written but not acked), or, for an
// answer that was lost, the log end the leader gave after fencing the link sessions it
// may have gone on (fenceEnds). Links of one
// partition leave in WAL order on one connection, so an idempotent producer's sequence
// reaches the leader in order; the leader's checks (sequence, epoch, leadership, the
// producer's transaction) answer exactly as they would a direct produce. A link carries
// the batch's transactional attribute (partlog.Link.Attributes), so a transactional
// batch opens its producer's transaction in the partition where the leader links it,
// as a direct one does; the transaction's markers are the leader's own (the coordinator
// writes them to the leader, txnmarkers.go), never linked.

// maxLinksPerRequest bounds one link request; maxLinkRequests the requests in flight to
// one leader.
const (
	maxLinksPerRequest = 1024
	maxLinkRequests    = 32
)

var (
	// ErrLinkUnavailable: the leader could not be reached; the client retries (after a
	// metadata refresh, which may name another broker).
	errLinkUnavailable = fmt.Errorf("%w: the partition's leader is unreachable from its zone's proxy", partlog.ErrNotLeader)
	// errLinkLost: the leader's answer did not come; the batch may or may not be in the
	// log (an idempotent producer's retry finds out). REQUEST_TIMED_OUT.
	errLinkLost = kcode.New("broker: the leader's answer to a proxied batch was lost", kcode.RequestTimedOut)
	// errFenceStorage answers a link fence when the WAL failed before its barrier.
	errFenceStorage = fmt.Errorf("%w: the WAL failed before the link fence's barrier", partlog.ErrStorage)
	// errLinkAbandoned: the proxy stopped waiting for a link's answer (abandon.go): the
	// link may have been applied, so its pin is kept as a lost one, and the client is
	// told NOT_LEADER_OR_FOLLOWER (it refreshes its metadata and retries; an idempotent
	// retry is deduplicated wherever the link landed).
	errLinkAbandoned = errors.New("broker: link abandoned: its leader changed or this broker's lease lapsed")
)

// proxy holds the connections to other brokers and their link senders; as a leader, it
// holds the link sessions other brokers fenced (fences).
type proxy struct {
	b *Broker

	mu      sync.Mutex
	senders map[int32]*linkSender
	// nextSession numbers this broker's link sessions (one per sender, from 1, within
	// its registration epoch).
	nextSession uint64
	// fences: per proxy broker, the session below which its links are refused.
	fences  map[int32]linkFence
	clients map[int32]*peer.Client
	// follows: read replicas' long polls go on connections of their own, so that a
	// poll waiting at the leader never holds links back.
	follows map[int32]*peer.Client
	// peerCfg, when set, adjusts the peer configuration of connections opened from now
	// on (tests: SetPeerConfig).
	peerCfg func(*peer.Config)

	// watch: abandon.go.
	watchOnce sync.Once
	viewWake  chan struct{}
}

func newProxy(b *Broker) *proxy {
	return &proxy{b: b, senders: map[int32]*linkSender{}, clients: map[int32]*peer.Client{}, follows: map[int32]*peer.Client{},
		nextSession: 1, fences: map[int32]linkFence{}, viewWake: make(chan struct{}, 1)}
}

// client returns the connection to broker id at its advertised address in v.
func (px *proxy) client(v *metadata.View, id int32) (*peer.Client, error) {
	return px.clientIn(px.clients, v, id)
}

// followClient returns the connection for read replicas' polls to broker id.
func (px *proxy) followClient(v *metadata.View, id int32) (*peer.Client, error) {
	return px.clientIn(px.follows, v, id)
}

func (px *proxy) clientIn(clients map[int32]*peer.Client, v *metadata.View, id int32) (*peer.Client, error) {
	br, ok := v.Broker(id)
	if !ok || !br.Active() {
		return nil, fmt.Errorf("%w: broker %d is not active", peer.ErrUnavailable, id)
	}
	addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
	px.mu.Lock()
	defer px.mu.Unlock()
	if c := clients[id]; c != nil && c.Addr() == addr {
		return c, nil
	} else if c != nil {
		c.Close() // the broker restarted elsewhere
	}
	cfg := peer.DefaultConfig()
	cfg.ClientID = fmt.Sprintf("weir-broker-%d", px.b.cfg.NodeID)
	px.b.securePeer(&cfg)
	if px.peerCfg != nil {
		px.peerCfg(&cfg)
	}
	if tr := px.b.cfg.Traffic; tr != nil {
		zone := br.Rack
		if zone == "" {
			zone = routing.UnknownZone
		}
		cfg.Wrap = func(nc net.Conn) net.Conn { return tr.Conn(nc, zone, routing.KindPeer) }
	}
	c := peer.NewClient(addr, cfg)
	clients[id] = c
	return c, nil
}

// sender returns the link sender to broker id.
func (px *proxy) sender(v *metadata.View, id int32) (*linkSender, error) {
	c, err := px.client(v, id)
	if err != nil {
		return nil, err
	}
	px.mu.Lock()
	defer px.mu.Unlock()
	s := px.senders[id]
	if s == nil || s.c != c {
		if s != nil {
			s.stop()
		}
		s = px.newSenderLocked(c, id)
	}
	return s, nil
}

// newSenderLocked starts the link sender to broker id over c, on a new session.
func (px *proxy) newSenderLocked(c *peer.Client, id int32) *linkSender {
	s := &linkSender{px: px, c: c, leader: id, session: px.nextSession, wake: make(chan struct{}, 1), done: make(chan struct{}),
		slots: make(chan struct{}, maxLinkRequests), inflight: map[*pendingLink]struct{}{}}
	px.nextSession++
	px.senders[id] = s
	px.b.wg.Add(1)
	go s.run()
	return s
}

func (px *proxy) close() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, s := range px.senders {
		s.stop()
	}
	for _, c := range px.clients {
		c.Close()
	}
	for _, c := range px.follows {
		c.Close()
	}
}

// pendingLink is a link waiting to be sent or answered, and what to do with the answer.
// It is finished once: by the leader's answer (or the connection's failure), or earlier
// by abandon; whatever comes second is dropped.
type pendingLink struct {
	link partlog.Link
	// leaderEpoch is the partition's leader epoch in the view the link was routed by:
	// abandon compares it with the current view.
	leaderEpoch int32
	done        func(peer.LinkResult, error)
	finished    atomic.Bool
}

// finish runs done unless the link was finished already.
func (pl *pendingLink) finish(res peer.LinkResult, err error) {
	if !pl.finished.Swap(true) {
		pl.done(res, err)
	}
}

// linkSender sends the links for one leader: whatever queued while the previous request
// was being written goes in the next, and up to maxLinkRequests are in flight.
type linkSender struct {
	px      *proxy
	c       *peer.Client
	leader  int32
	session uint64
	mu      sync.Mutex
	queue   []*pendingLink
	// inflight are the links taken from the queue whose answers have not come: they may
	// be at the leader (abandon keeps their pins).
	inflight map[*pendingLink]struct{}
	wake     chan struct{}
	done     chan struct{}
	once     sync.Once
	slots    chan struct{}
}

func (s *linkSender) stop() { s.once.Do(func() { close(s.done) }) }

func (s *linkSender) enqueue(pl *pendingLink) {
	s.mu.Lock()
	s.queue = append(s.queue, pl)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *linkSender) run() {
	b := s.px.b
	defer b.wg.Done()
	for {
		select {
		case <-s.wake:
		case <-s.done:
			s.failAll(peer.ErrClosed)
			return
		case <-b.ctx.Done():
			s.failAll(peer.ErrClosed)
			return
		}
		for {
			s.mu.Lock()
			n := min(len(s.queue), maxLinksPerRequest)
			batch := append([]*pendingLink(nil), s.queue[:n]...)
			s.queue = s.queue[n:]
			for _, pl := range batch {
				s.inflight[pl] = struct{}{}
			}
			s.mu.Unlock()
			if n == 0 {
				break
			}
			select {
			case s.slots <- struct{}{}:
			case <-b.ctx.Done():
				s.settle(batch)
				for _, pl := range batch {
					pl.finish(peer.LinkResult{}, peer.ErrClosed)
				}
				continue
			}
			s.send(batch)
		}
	}
}

func (s *linkSender) failAll(err error) {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, pl := range q {
		pl.finish(peer.LinkResult{}, err)
	}
}

// settle forgets batch's links as in flight (their answers came, or they were not sent).
func (s *linkSender) settle(batch []*pendingLink) {
	s.mu.Lock()
	for _, pl := range batch {
		delete(s.inflight, pl)
	}
	s.mu.Unlock()
}

func (s *linkSender) send(batch []*pendingLink) {
	b := s.px.b
	req := peer.LinkRequest{Proxy: b.cfg.NodeID, ProxyEpoch: b.epoch, Session: s.session, Links: make([]partlog.Link, len(batch))}
	for i := range batch {
		req.Links[i] = batch[i].link
	}
	start := time.Now()
	s.c.Do(req.AppendTo(nil), func(resp []byte, err error) {
		<-s.slots
		s.settle(batch)
		b.metrics.linkSeconds.Observe(time.Since(start).Seconds())
		var rs []peer.LinkResult
		if err == nil {
			rs, err = peer.DecodeLinkResults(resp, len(batch))
			if err != nil {
				err = fmt.Errorf("%w: %w", peer.ErrLost, err)
			}
		}
		for i, pl := range batch {
			if err != nil {
				pl.finish(peer.LinkResult{}, err)
				continue
			}
			pl.finish(rs[i], nil)
		}
	})
}

// proxyWriter is the kafka.Writer of a partition led by another broker.
type proxyWriter struct {
	b           *Broker
	t           *metadata.Topic
	index       int32
	leader      int32
	leaderEpoch int32
}

// routedHere reports whether zone routing sends a client of zone to this broker for a
// partition it does not lead: the client is in this broker's zone and the partition's
// leader in another. Any other client gets NOT_LEADER, as from Kafka.
func (b *Broker) routedHere(t *metadata.Topic, index int32, zone string) bool {
	if !b.cfg.ZoneRouting || zone == "" || zone != b.cfg.Rack || t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return false
	}
	br, ok := b.meta.View().Broker(t.Partitions[index].Leader)
	return ok && br.Rack != zone
}

// proxyFor returns the proxy writer of partition index of t when zone routing sends its
// produce through this broker: the partition has an active leader elsewhere that is
// serving it. A moving partition is proxied too: its leader serves it until its target
// preloaded it (moveprep.go), and refuses the links once it closes for the hand-off.
func (b *Broker) proxyFor(t *metadata.Topic, index int32) (kafka.Writer, bool) {
	if !b.cfg.ZoneRouting || b.proxy == nil || t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return nil, false
	}
	mp := t.Partitions[index]
	if mp.Leader == b.cfg.NodeID || mp.Leader < 0 || mp.Recovering {
		return nil, false
	}
	if br, ok := b.meta.View().Broker(mp.Leader); !ok || !br.Active() {
		return nil, false
	}
	return proxyWriter{b: b, t: t, index: index, leader: mp.Leader, leaderEpoch: mp.LeaderEpoch}, true
}

func (pw proxyWriter) Offsets() (logStart, hw int64) { return -1, -1 }

func (pw proxyWriter) SetLogStart(context.Context, int64) error { return partlog.ErrNotLeader }

// Append writes the batch to this broker's WAL, links it into the leader's log, and
// answers with the leader's answer.
func (pw proxyWriter) Append(h *recbatch.Header, batch []byte, logAppendTime bool, done func(kafka.AppendResult)) {
	b := pw.b
	if h.Control() {
		// Markers are written by their partition's leader only (txnmarkers.go); the
		// front end refuses a client's control batch before this.
		done(kafka.AppendResult{Err: partlog.ErrControlLink})
		return
	}
	stamped := int64(-1)
	payload := partlog.EncodeBatchRec(pw.t.ID, pw.index, batch)
	if logAppendTime {
		stamped = b.now().UnixMilli()
		recbatch.SetLogAppendTime(payload[partlog.BatchRecHdr:], stamped)
	}
	fail := func(err error) { done(kafka.AppendResult{Err: err}) }
	start := time.Now()
	b.wal.Append(wal.Entry{Type: partlog.RecProxyBatch, Payload: payload, Done: func(pos wal.Pos, err error) {
		switch {
		case errors.Is(err, wal.ErrFenced):
			b.markFenced(err.Error())
			fail(partlog.ErrNotLeader)
			return
		case err != nil:
			fail(err)
			return
		}
		data := payload[partlog.BatchRecHdr:]
		b.recent.add(pos+partlog.BatchRecHdr, data) // for this zone's read replica
		link, err := partlog.LinkOf(pw.t.ID, pw.index, b.cfg.NodeID, b.epoch, pos+partlog.BatchRecHdr, h, data)
		if err != nil {
			fail(err) // a control batch: refused above already
			return
		}
		var pin *tier.ProxyPin
		if b.tier != nil {
			pin = b.tier.PinProxied(link.Key(), pos) // the leader may read it from now on
		}
		s, err := b.proxy.sender(b.meta.View(), pw.leader)
		if err != nil {
			if pin != nil {
				b.tier.ReleasePin(pin)
			}
			b.metrics.links.WithLabelValues("unavailable").Inc()
			fail(errLinkUnavailable)
			return
		}
		s.enqueue(&pendingLink{link: link, leaderEpoch: pw.leaderEpoch, done: func(res peer.LinkResult, err error) {
			pw.answered(link, pin, res, err, stamped, start, done)
		}})
	}})
}

// answered finishes a proxied produce with the leader's answer. The pin is released
// only when the answer proves the batch is not in the leader's log and never will be;
// an answer that gave offsets keeps it until an upload covers them, acked or not; a
// lost answer keeps it until a session fence resolves it (resolveLostLoop).
func (pw proxyWriter) answered(link partlog.Link, pin *tier.ProxyPin, res peer.LinkResult, err error, stamped int64, start time.Time, done func(kafka.AppendResult)) {
	b := pw.b
	switch {
	case errors.Is(err, errLinkAbandoned):
		// The link may be at its leader (or reach it yet, on a session the lost-pin
		// resolution fences): the pin is kept until that fence's proof, exactly as for a
		// lost answer. The client is told to go to the partition's leader now.
		if pin != nil {
			b.tier.LostPin(pin)
		}
		b.metrics.links.WithLabelValues("abandoned").Inc()
		done(kafka.AppendResult{Err: partlog.ErrNotLeader})
		return
	case errors.Is(err, peer.ErrLost):
		if pin != nil {
			b.tier.LostPin(pin)
		}
		b.metrics.links.WithLabelValues("lost").Inc()
		done(kafka.AppendResult{Err: errLinkLost})
		return
	case err != nil: // never sent
		if pin != nil {
			b.tier.ReleasePin(pin)
		}
		b.metrics.links.WithLabelValues("unavailable").Inc()
		done(kafka.AppendResult{Err: errLinkUnavailable})
		return
	case res.Class == peer.LinkRefused:
		if pin != nil {
			b.tier.ReleasePin(pin)
		}
		b.metrics.links.WithLabelValues("refused").Inc()
		done(kafka.AppendResult{Err: kerr.ErrorForCode(res.Code)})
		return
	}
	if pin != nil {
		b.tier.ResolvePin(pin, res.Base+int64(link.LastOffsetDelta)+1)
	}
	if res.Class == peer.LinkMaybeLogged {
		// Written at the leader but not acked there: it may be in the log, so the
		// batch stays until an upload covers its offsets; the client retries (an
		// idempotent retry finds the original if it is in the log).
		b.metrics.links.WithLabelValues("unacked").Inc()
		done(kafka.AppendResult{Err: kerr.ErrorForCode(res.Code)})
		return
	}
	b.metrics.links.WithLabelValues("ok").Inc()
	b.metrics.proxySeconds.Observe(time.Since(start).Seconds())
	if !b.leaseOK() {
		// Linked and durable, but this broker may be fenced by now: no ack from here.
		done(kafka.AppendResult{Err: partlog.ErrNotLeader})
		return
	}
	done(kafka.AppendResult{Base: res.Base, LogStart: res.LogStart, AppendTime: stamped})
}

// linkFence is a point in a proxy's link sessions: the sessions of earlier registration
// epochs, and those of epoch numbered below session, are fenced.
type linkFence struct {
	epoch   int64
	session uint64
}

func (f linkFence) covers(epoch int64, session uint64) bool {
	return epoch < f.epoch || epoch == f.epoch && session < f.session
}

// fence records, as a leader, that proxy's sessions below f are fenced (a fence only
// ever moves up).
func (px *proxy) fence(proxy int32, f linkFence) {
	px.mu.Lock()
	defer px.mu.Unlock()
	if old, ok := px.fences[proxy]; !ok || f.covers(old.epoch, old.session) {
		px.fences[proxy] = f
	}
}

// fenced reports whether a link of proxy's session (epoch, session) must be refused.
func (px *proxy) fenced(proxy int32, epoch int64, session uint64) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	f, ok := px.fences[proxy]
	return ok && f.covers(epoch, session)
}

// rotate ends this broker's link sessions to the given leaders: their senders stop
// (links queued and not sent fail as never sent) and the next links to them go on new
// sessions. It returns the fence point that covers every session opened so far.
func (px *proxy) rotate(leaders map[int32]bool) linkFence {
	px.mu.Lock()
	defer px.mu.Unlock()
	for id, s := range px.senders {
		if leaders[id] {
			s.stop()
			delete(px.senders, id)
		}
	}
	return linkFence{epoch: px.b.epoch, session: px.nextSession}
}

// resolveLostLoop resolves the proxy pins whose link answers were lost: it ends the link
// sessions they may have gone on and asks the partitions' leaders to fence them and give
// their log ends (fenceEnds); a leader that does not answer is asked again next round,
// and the pins stay meanwhile. Sessions are ended only when a pin was lost since the
// last fence (that fence point still covers the others), so a leader that is down for
// long does not make every round cut the sessions to the leaders that are up.
//
// A leader is asked to fence below the last fence point only if its sender was ended
// when that point was taken (rotated): a sender to it left running has a session below
// the point, and the fence would refuse every link it sends from then on (as
// NOT_LEADER_OR_FOLLOWER, which the client retries on the same sender: a partition
// stalled for good; the zone lab's outage after a partition hit it). When the leaders
// of the lost pins include one not rotated (a failover moved a partition to it), the
// sessions are ended again, to all of them.
func (b *Broker) resolveLostLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.LinkGrace / 6)
	defer t.Stop()
	var last linkFence
	var rotated map[int32]bool
	for {
		select {
		case <-t.C:
		case <-b.ctx.Done():
			return
		}
		keys, fresh := b.tier.LostPins() // marks them
		if len(keys) == 0 {
			continue
		}
		leaders := b.leadersOf(keys)
		if fresh || last.session == 0 || !subset(leaders, rotated) {
			last, rotated = b.proxy.rotate(leaders), leaders
		}
		ends, err := b.fenceEndsAt(b.ctx, b.cfg.NodeID, last, keys, rotated)
		if err != nil {
			b.log.Debug("fencing link sessions failed; retrying", "err", err)
		}
		for k, end := range ends {
			b.tier.ResolveLost(k, end)
		}
	}
}

// subset reports whether every member of a is in b.
func subset(a, b map[int32]bool) bool {
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

// leadersOf is the set of current leaders of keys.
func (b *Broker) leadersOf(keys []partlog.Key) map[int32]bool {
	v := b.meta.View()
	out := map[int32]bool{}
	for _, k := range keys {
		if t := v.TopicByID(k.ID); t != nil && int(k.Index) < len(t.Partitions) {
			out[t.Partitions[k.Index].Leader] = true
		}
	}
	return out
}

// errLinkBarrier ends a fence's barrier entry in the WAL (never written).
var errLinkBarrier = errors.New("broker: link fence barrier")

// fenceLinks fences proxy's link sessions below f here and answers, for each partition of
// refs this broker leads, its next offset as it was when no link of those sessions could
// be prepared any more: a barrier entry goes through the WAL committer after the fence,
// so every link prepared before it is below the end it reads, and every link after it
// finds the fence and is refused (appendLink). done runs once every group before the
// barrier is finished, from the WAL's syncer (it must not block).
func (b *Broker) fenceLinks(proxy int32, f linkFence, refs []peer.PartitionRef, done func([]peer.Offsets)) {
	b.proxy.fence(proxy, f)
	out := make([]peer.Offsets, len(refs))
	for i := range out {
		out[i] = peer.Offsets{Code: kafka.ErrorCode(partlog.ErrNotLeader), HW: -1, LogStart: -1, LeaderEpoch: -1}
	}
	b.wal.Append(wal.Entry{
		Type: partlog.RecLink,
		Prepare: func([]byte) error {
			for i, r := range refs {
				p := b.parts.Get(r.Topic, r.Partition)
				if p == nil {
					continue
				}
				if st, next, _ := p.Progress(); st == partlog.Ready {
					out[i] = peer.Offsets{HW: next, LogStart: -1, LeaderEpoch: p.LeaderEpoch()}
				}
			}
			return errLinkBarrier
		},
		Done: func(_ wal.Pos, err error) {
			if !errors.Is(err, errLinkBarrier) { // the WAL failed before the barrier
				for i := range out {
					out[i] = peer.Offsets{Code: kafka.ErrorCode(errFenceStorage), HW: -1, LogStart: -1, LeaderEpoch: -1}
				}
			}
			done(out)
		},
	})
}

// fenceEnds asks the current leaders of keys to fence proxy's link sessions below f and
// returns the log ends they gave (partitions whose leader did not answer, or does not
// lead them, are left out: asked again later). The leader asked is the one the current
// view names, not necessarily the one a link went to: a leader that is serving a
// partition took it over only after its earlier leader could no longer add to the log
// (its WAL fenced, or the hand-off done), so a link of a session to an earlier leader is
// below what the current leader's log starts from.
func (b *Broker) fenceEnds(ctx context.Context, proxy int32, f linkFence, keys []partlog.Key) (map[partlog.Key]int64, error) {
	return b.fenceEndsAt(ctx, proxy, f, keys, nil)
}

// fenceEndsAt is fenceEnds asking only the leaders in only (nil: any); the partitions
// of the others are left out (asked again later).
func (b *Broker) fenceEndsAt(ctx context.Context, proxy int32, f linkFence, keys []partlog.Key, only map[int32]bool) (map[partlog.Key]int64, error) {
	v := b.meta.View()
	byLeader := map[int32][]peer.PartitionRef{}
	out := map[partlog.Key]int64{}
	for _, k := range keys {
		t := v.TopicByID(k.ID)
		if t == nil || int(k.Index) >= len(t.Partitions) {
			out[k] = 1<<63 - 1 // deleted: nothing to keep
			continue
		}
		if l := t.Partitions[k.Index].Leader; l >= 0 && (only == nil || only[l]) {
			byLeader[l] = append(byLeader[l], peer.PartitionRef{Topic: k.ID, Partition: k.Index})
		}
	}
	var firstErr error
	for l, refs := range byLeader {
		os, err := b.askFence(ctx, v, l, proxy, f, refs)
		for i := range os {
			if os[i].Code == 0 {
				out[partlog.Key{ID: refs[i].Topic, Index: refs[i].Partition}] = os[i].HW
			}
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("broker: fencing links at broker %d: %w", l, err)
		}
	}
	return out, firstErr
}

// askFence runs fenceLinks at broker l (this one, or another over its connection).
func (b *Broker) askFence(ctx context.Context, v *metadata.View, l, proxy int32, f linkFence, refs []peer.PartitionRef) ([]peer.Offsets, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if l == b.cfg.NodeID {
		ch := make(chan []peer.Offsets, 1)
		b.fenceLinks(proxy, f, refs, func(os []peer.Offsets) { ch <- os })
		select {
		case os := <-ch:
			return os, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, err := b.proxy.client(v, l)
	if err != nil {
		return nil, err
	}
	req := peer.FenceRequest{Proxy: proxy, Epoch: f.epoch, Session: f.session, Parts: refs}
	resp, err := c.Call(ctx, req.AppendTo(nil))
	if err != nil {
		return nil, err
	}
	return peer.DecodeOffsets(resp, len(refs))
}

// ProxyPinsHeld is the number of batches this broker proxied whose leaders have not
// uploaded them yet: its WAL keeps them (tests, metrics).
func (b *Broker) ProxyPinsHeld() int {
	if b.tier == nil {
		return 0
	}
	return b.tier.ProxyPinsHeld()
}
