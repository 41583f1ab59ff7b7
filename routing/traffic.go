package routing

import (
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/metricset"
)

// Kind is what a counted byte was for (the kind label of weir_traffic_bytes_total).
type Kind uint8

const (
	// KindClientRecords: record batches clients produce (in) and fetch (out).
	KindClientRecords Kind = iota
	// KindClientOther: every other byte of a client connection.
	KindClientOther
	// KindPeer: inter-broker traffic on peer connections (broker/peer: a proxied produce's
	// link and its answer, read replicas' follows, log-end queries). Its label value
	// stays "link" (label values are what dashboards and queries use).
	KindPeer
	// KindWALRead: bytes read from another broker's WAL on the shared file system.
	KindWALRead
	// KindController: traffic with the controllers.
	KindController
	// KindGossip: memberlist traffic.
	KindGossip

	numKinds
)

// Kinds lists every kind, in label order.
var Kinds = [...]Kind{KindClientRecords, KindClientOther, KindPeer, KindWALRead, KindController, KindGossip}

var kindNames = [numKinds]string{"client_records", "client_other", "link", "wal_read", "controller", "gossip"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "invalid"
}

// ParseKind is the Kind of a kind label.
func ParseKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// BothEndsCount reports whether both ends of this kind's traffic are brokers that
// count it (link, gossip): each byte is then in two brokers' counters, as out at its
// sender and as in at its receiver.
func (k Kind) BothEndsCount() bool { return k == KindPeer || k == KindGossip }

// Direction is whether this broker received (In) or sent (Out) the bytes.
type Direction uint8

const (
	In Direction = iota
	Out
)

func (d Direction) String() string {
	if d == Out {
		return "out"
	}
	return "in"
}

// Labels of peer zones that are not a zone.
const (
	// UnknownZone is the label of bytes whose peer's zone is not known.
	UnknownZone = "unknown"
	// OtherZone is the label of bytes of peer zones beyond MaxPeerZones, or not valid.
	OtherZone = "_other"
)

// MaxPeerZones bounds the peer zone labels of one Traffic: a client may name any zone
// in its client.id, and every distinct label is a time series.
const MaxPeerZones = 64

// MetricName is the counter Traffic exports.
const MetricName = "weir_traffic_bytes_total"

// Traffic counts one broker's bytes by peer zone, kind and direction and exports them
// as MetricName{local_zone, peer_zone, kind, direction}. Counting is lock-free: a
// Counter or Conn resolves its cells once (a map lookup under a mutex) and then only
// adds atomically. Safe for concurrent use.
type Traffic struct {
	local string
	desc  *prometheus.Desc
	set   *metricset.Set

	mu    sync.Mutex // guards peers and each peer's lastOther (Collect)
	peers map[string]*peerCells
	order []*peerCells // in creation order, for Collect
}

// peerCells are one peer zone's counters. For the client kinds the cells hold the
// total bytes of client connections (client_other) and the record bytes among them
// (client_records); Collect exports client_other as their difference, which it keeps
// monotonic (lastOther): records may be marked just before their bytes are counted.
type peerCells struct {
	label     string
	bytes     [numKinds][2]atomic.Uint64
	lastOther [2]uint64
}

// NewTraffic returns the byte accounting of a broker in localZone ("" for none),
// registered on reg (nil: counted, not exported) until Close.
func NewTraffic(localZone string, reg prometheus.Registerer) *Traffic {
	t := &Traffic{
		local: zoneLabel(localZone),
		desc: prometheus.NewDesc(MetricName,
			"Bytes this broker moved, by the zone of the other end (unknown when not known), kind (client_records, client_other, link: inter-broker connections, wal_read, controller, gossip) and direction (in: received, out: sent).",
			[]string{"local_zone", "peer_zone", "kind", "direction"}, nil),
		set:   metricset.New(reg),
		peers: map[string]*peerCells{},
	}
	t.set.MustRegister(t)
	return t
}

// Close unregisters the counter.
func (t *Traffic) Close() { t.set.Close() }

// LocalZone is the local_zone label.
func (t *Traffic) LocalZone() string { return t.local }

func zoneLabel(z string) string {
	if z == "" {
		return UnknownZone
	}
	if !ValidZone(z) {
		return OtherZone
	}
	return z
}

// cells finds or creates peer's cells.
func (t *Traffic) cells(peer string) *peerCells {
	label := zoneLabel(peer)
	t.mu.Lock()
	defer t.mu.Unlock()
	if pc := t.peers[label]; pc != nil {
		return pc
	}
	if len(t.peers) >= MaxPeerZones-1 { // the last label is OtherZone's
		label = OtherZone
		if pc := t.peers[label]; pc != nil {
			return pc
		}
	}
	pc := &peerCells{label: label}
	t.peers[label] = pc
	t.order = append(t.order, pc)
	return pc
}

// Counter is the counting handle of one peer zone and kind.
type Counter struct {
	total   *[2]atomic.Uint64
	records *[2]atomic.Uint64 // client kinds only
	kind    Kind
}

// Counter returns the handle counting kind bytes with peerZone ("" when unknown). Keep
// it: resolving it takes a lock, adding does not.
func (t *Traffic) Counter(peerZone string, kind Kind) *Counter {
	if kind >= numKinds {
		kind = KindClientOther
	}
	pc := t.cells(peerZone)
	c := &Counter{kind: kind}
	switch kind {
	case KindClientRecords, KindClientOther:
		c.total, c.records = &pc.bytes[KindClientOther], &pc.bytes[KindClientRecords]
	default:
		c.total = &pc.bytes[kind]
	}
	return c
}

// Add counts n bytes moved in direction d. For KindClientRecords they count as record
// bytes of a client connection that were not otherwise counted (Conn.Records marks
// bytes a Conn counted).
func (c *Counter) Add(d Direction, n int) {
	if n <= 0 || d > Out {
		return
	}
	// Records before the total, and Collect reads the total before the records: a
	// scrape in between sees client_other too small (kept by the clamp), never too big.
	if c.kind == KindClientRecords {
		c.records[d].Add(uint64(n))
	}
	c.total[d].Add(uint64(n))
}

// Describe implements prometheus.Collector.
func (t *Traffic) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

// Collect implements prometheus.Collector: every non-zero cell.
func (t *Traffic) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pc := range t.order {
		for d := In; d <= Out; d++ {
			// The total first, so a record byte Counter.Add counts (marked before its
			// total) never shows as client_other. Conn.Records may mark bytes before
			// they are counted (a Fetch answer still in a write buffer: a dip, which
			// is not exported, the last value stays) or after (a Produce request
			// parsed after it was read: client_other runs ahead by the bytes read and
			// not yet marked, bounded by the requests in flight, not cumulative).
			total := pc.bytes[KindClientOther][d].Load()
			rec := pc.bytes[KindClientRecords][d].Load()
			if total >= rec && total-rec > pc.lastOther[d] {
				pc.lastOther[d] = total - rec
			}
			for _, k := range Kinds {
				v := pc.bytes[k][d].Load()
				switch k {
				case KindClientRecords:
					v = rec
				case KindClientOther:
					v = pc.lastOther[d]
				}
				if v == 0 {
					continue
				}
				ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(v), t.local, pc.label, k.String(), d.String())
			}
		}
	}
}

// Conn counts every byte read from (In) and written to (Out) a connection under its
// current peer zone and kind, which may change while it is open (SetPeer: a client's
// zone is learned from its first request). The counting is an atomic add per Read or
// Write. Deadlines, Close and addresses are the wrapped connection's.
type Conn struct {
	net.Conn
	t *Traffic
	c atomic.Pointer[Counter]

	// Before its first SetPeer a PendingConn keeps its counts here: a client's zone is
	// known only once its first request is read, and those bytes are its zone's.
	mu      sync.Mutex
	pending [2]uint64
}

// NetConn returns the connection Conn counts the bytes of (as tls.Conn's NetConn does),
// for socket options such as SetLinger.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Conn wraps nc, counting under peerZone and kind. A client connection is counted as
// KindClientOther; Records marks the record bytes among its bytes.
func (t *Traffic) Conn(nc net.Conn, peerZone string, kind Kind) *Conn {
	c := &Conn{Conn: nc, t: t}
	c.c.Store(t.Counter(peerZone, kind))
	return c
}

// PendingConn wraps nc, holding its counts until the first SetPeer says whose they are.
func (t *Traffic) PendingConn(nc net.Conn) *Conn { return &Conn{Conn: nc, t: t} }

// SetPeer counts the connection's later bytes under peerZone and kind (the bytes
// counted so far stay where they were counted, except a PendingConn's, which go there).
func (c *Conn) SetPeer(peerZone string, kind Kind) {
	ctr := c.t.Counter(peerZone, kind)
	if c.c.Load() != nil {
		c.c.Store(ctr)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c.Load() == nil {
		ctr.total[In].Add(c.pending[In])
		ctr.total[Out].Add(c.pending[Out])
	}
	c.c.Store(ctr)
}

// Settle counts a PendingConn's held bytes under peerZone and kind if nothing claimed
// them (a connection closed before its first SetPeer); otherwise it does nothing.
func (c *Conn) Settle(peerZone string, kind Kind) {
	if c.c.Load() == nil {
		c.SetPeer(peerZone, kind)
	}
}

// count adds n bytes in direction d under the current counter, or to the pending ones.
func (c *Conn) count(d Direction, n int) {
	if cc := c.c.Load(); cc != nil {
		cc.total[d].Add(uint64(n))
		return
	}
	c.mu.Lock()
	if cc := c.c.Load(); cc != nil {
		c.mu.Unlock()
		cc.total[d].Add(uint64(n))
		return
	}
	c.pending[d] += uint64(n)
	c.mu.Unlock()
}

// Records marks n bytes this connection counted (or is about to count) in direction d
// as record bytes (client_records rather than client_other): the record batches of a
// Produce request read, or of a Fetch answer written. No-op on a connection of another
// kind.
func (c *Conn) Records(d Direction, n int) {
	cc := c.c.Load()
	if n <= 0 || d > Out || cc == nil || cc.records == nil {
		return
	}
	cc.records[d].Add(uint64(n))
}

// Read implements net.Conn, counting what it read.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.count(In, n)
	}
	return n, err
}

// Write implements net.Conn, counting what it wrote.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.count(Out, n)
	}
	return n, err
}

// Unwrap is the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// ReaderAt wraps r, a file of another broker's WAL, counting every byte read from it as
// KindWALRead in, peer ownerZone (the zone of the broker that wrote it).
func (t *Traffic) ReaderAt(r io.ReaderAt, ownerZone string) io.ReaderAt {
	return &readerAt{r: r, c: t.Counter(ownerZone, KindWALRead)}
}

type readerAt struct {
	r io.ReaderAt
	c *Counter
}

func (r *readerAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	if n > 0 {
		r.c.total[In].Add(uint64(n))
	}
	return n, err
}
