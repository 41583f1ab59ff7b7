package gossip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member is one broker as gossip sees it.
type Member struct {
	BrokerID  int32
	Zone      string // availability zone (Kafka rack)
	KafkaAddr string // advertised Kafka listener, host:port
	Epoch     int64  // broker epoch the member announced
}

func (m Member) String() string {
	return fmt.Sprintf("broker %d (zone %q, kafka %s, epoch %d)", m.BrokerID, m.Zone, m.KafkaAddr, m.Epoch)
}

// Events receives changes in the set of live peers. Callbacks run one at a time, in
// order, on a goroutine of this package (never memberlist's), so a slow callback delays
// later callbacks but never the failure detector. Nil callbacks are skipped. No event is
// reported for the local member itself.
type Events struct {
	// OnJoin: a peer became alive (first seen, or back after being dead or left,
	// e.g. restarted with a new epoch).
	OnJoin func(Member)
	// OnUpdate: a live peer announced new metadata (epoch, endpoint or zone).
	OnUpdate func(Member)
	// OnLeave: a peer was declared dead by the failure detector or left gracefully.
	// The Member is its last known metadata. This is a suspicion for the controller to
	// act on (ReportSuspect); gossip decides nothing.
	OnLeave func(Member)
}

// ErrClosed is returned by operations on a Gossip after Leave or Close.
var ErrClosed = errors.New("gossip: closed")

// deadNodeReclaimTime lets a restarted broker take over its name (its broker id) at a
// new address as soon as its old incarnation is dead. Any positive value enables this
// in memberlist; the smallest one makes it immediate.
const deadNodeReclaimTime = time.Nanosecond

// maxBadNames bounds the memory used to de-duplicate malformed-metadata log lines.
const maxBadNames = 1024

type lifecycle uint8

const (
	stateNew lifecycle = iota
	stateStarted
	stateClosed
)

// Gossip is one broker's membership in the gossip cluster.
type Gossip struct {
	cfg     Config
	name    string
	log     *slog.Logger
	metrics *metrics
	disp    *dispatcher // set by Start; read by delegates only after Start set it

	metaMu sync.Mutex
	self   Member
	meta   []byte

	viewMu     sync.RWMutex
	view       map[string]Member // live members with valid metadata, self included
	viewClosed bool              // set by Leave/Close: late memberlist callbacks are ignored
	peerAddr   map[string]string // node name → gossip address, of the peers in view
	byAddr     map[string]string // gossip address → node name (PeerZone)

	badMu sync.Mutex
	bad   map[string]string // node name → last malformed metadata logged

	mu       sync.Mutex // lifecycle
	state    lifecycle
	ml       *memberlist.Memberlist
	stopJoin chan struct{}
	joinDone chan struct{}
	ev       Events
}

// New validates cfg and prepares a member; Start binds and joins.
func New(cfg Config, ev Events) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Seeds = slices.Clone(cfg.Seeds)
	cfg.SecretKey = slices.Clone(cfg.SecretKey)
	cfg.OldKeys = slices.Clone(cfg.OldKeys)
	self := Member{BrokerID: cfg.BrokerID, Zone: cfg.Zone, KafkaAddr: cfg.KafkaAddr, Epoch: cfg.Epoch}
	meta, err := encodeMeta(self)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "gossip", "broker", cfg.BrokerID)
	g := &Gossip{
		cfg:     cfg,
		name:    nodeName(cfg.BrokerID),
		log:     logger,
		metrics: newMetrics(),
		self:    self,
		meta:    meta,
		bad:     make(map[string]string),
		ev:      ev,
	}
	g.view = map[string]Member{g.name: self}
	g.peerAddr, g.byAddr = map[string]string{}, map[string]string{}
	return g, nil
}

// Start binds the gossip address (TCP and UDP) and starts the failure detector. If
// Seeds are configured, it joins them in the background, retrying with backoff until a
// seed answers and again whenever no peer is known; Start itself does not wait for a
// seed to answer.
func (g *Gossip) Start() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateStarted:
		return errors.New("gossip: already started")
	case stateClosed:
		return ErrClosed
	}

	mc, err := g.memberlistConfig()
	if err != nil {
		return err
	}
	if err := g.metrics.register(g.cfg.Registerer); err != nil {
		return err
	}
	t, err := newTransport(g.cfg, mc.BindAddr, mc.BindPort, mc.Logger)
	if err != nil {
		g.metrics.unregister(g.cfg.Registerer)
		return fmt.Errorf("gossip: starting memberlist: %w", err)
	}
	if t != nil {
		if p, ok := t.(autoBindPorter); ok && mc.BindPort == 0 && p.GetAutoBindPort() != 0 {
			// As memberlist does when it binds the port itself.
			mc.BindPort = p.GetAutoBindPort()
			mc.AdvertisePort = mc.BindPort
		}
		mc.Transport = t
	}
	g.disp = newDispatcher(g.ev)
	ml, err := memberlist.Create(mc)
	if err != nil {
		if mc.Transport != nil {
			_ = mc.Transport.Shutdown() // memberlist does not always (idempotent)
		}
		g.disp.close()
		g.metrics.unregister(g.cfg.Registerer)
		return fmt.Errorf("gossip: starting memberlist: %w", err)
	}
	g.ml = ml
	g.state = stateStarted
	g.metrics.membersAlive.Set(float64(g.memberCount()))
	g.log.Info("gossip started", "addr", g.addrLocked(), "cluster", g.cfg.Cluster,
		"zone", g.cfg.Zone, "kafka_addr", g.cfg.KafkaAddr, "epoch", g.currentSelf().Epoch)

	if seeds := g.otherSeeds(); len(seeds) > 0 {
		g.stopJoin = make(chan struct{})
		g.joinDone = make(chan struct{})
		go g.joinLoop(seeds, g.stopJoin, g.joinDone)
	}
	return nil
}

func (g *Gossip) memberlistConfig() (*memberlist.Config, error) {
	c := g.cfg
	mc := memberlist.DefaultLANConfig()
	mc.Name = g.name
	mc.Label = c.Cluster

	host, port, err := resolveHostPort(c.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind address: %w", err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if c.AdvertiseAddr != "" {
		ahost, aport, err := resolveHostPort(c.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip: advertise address: %w", err)
		}
		if aport == 0 {
			aport = port // memberlist also replaces it with the picked port when port is 0
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ahost, aport
	}

	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.SuspicionMult = c.SuspicionMult
	mc.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	mc.GossipInterval = c.GossipInterval
	mc.GossipNodes = c.GossipNodes
	mc.PushPullInterval = c.PushPullInterval
	mc.TCPTimeout = 3 * time.Second
	mc.DeadNodeReclaimTime = deadNodeReclaimTime
	if len(c.SecretKey) > 0 {
		kr, err := memberlist.NewKeyring(c.OldKeys, c.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("gossip: keyring: %w", err)
		}
		mc.Keyring = kr
		// memberlist's defaults, stated: unencrypted packets and streams are dropped.
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}

	d := &delegate{g: g}
	mc.Delegate = d
	mc.Events = d
	mc.Alive = d
	mc.Conflict = d
	var ml *slog.Logger
	if c.Logger != nil {
		ml = c.Logger.With("broker", c.BrokerID)
	}
	mc.Logger = newMemberlistLogger(ml)
	return mc, nil
}

// resolveHostPort splits host:port and resolves a host name to an IP address
// (memberlist needs literal IPs), preferring IPv4.
func resolveHostPort(hp string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: bad port", hp)
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), int(port), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", 0, err
	}
	if len(ips) == 0 {
		return "", 0, fmt.Errorf("%q resolves to no address", host)
	}
	pick := ips[0].IP
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			pick = ip.IP
			break
		}
	}
	return pick.String(), int(port), nil
}

// otherSeeds drops seeds that name this member itself.
func (g *Gossip) otherSeeds() []string {
	self := map[string]bool{g.addrLocked(): true, g.cfg.BindAddr: true}
	if g.cfg.AdvertiseAddr != "" {
		self[g.cfg.AdvertiseAddr] = true
	}
	var out []string
	for _, s := range g.cfg.Seeds {
		if !self[s] {
			out = append(out, s)
		}
	}
	return out
}

// joinLoop joins the seeds at start-up until a seed answers, and again whenever this
// member knows no live peer (e.g. after a network partition). A peer joining this
// member first does not end the start-up joins: the two may be a group that formed
// apart from the seeds' (members starting together while some seeds were down), which
// would otherwise never merge with it.
func (g *Gossip) joinLoop(seeds []string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	seedAnswered := false
	failures := 0
	var delay time.Duration
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		} else {
			select {
			case <-stop:
				return
			default:
			}
		}
		if seedAnswered && g.peerCount() > 0 {
			failures = 0
			delay = g.cfg.JoinRetryInterval
			continue
		}
		n, err := g.ml.Join(seeds)
		if n > 0 && g.peerCount() > 0 {
			g.log.Info("gossip joined cluster", "seeds_answered", n, "members", g.memberCount())
			seedAnswered = true
			failures = 0
			delay = g.cfg.JoinRetryInterval
			continue
		}
		failures++
		g.metrics.joinFailures.Inc()
		if err == nil {
			err = errors.New("seeds answered but no live peer is known")
		}
		// Peers starting at the same time miss each other at first: stay quiet for a few
		// attempts, then log every doubling to keep a long wait readable; quiet too
		// while some peer is known (it joined this member).
		if failures >= 4 && failures&(failures-1) == 0 && g.peerCount() == 0 {
			g.log.Warn("gossip join failed, retrying", "seeds", seeds, "attempts", failures, "err", err)
		} else {
			g.log.Debug("gossip join failed, retrying", "seeds", seeds, "attempts", failures, "err", err)
		}
		delay = backoff(g.cfg.JoinRetryInterval, g.cfg.JoinRetryMax, failures)
	}
}

// backoff returns base·2^(attempt-1), capped at limit, with ±10% jitter.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
	return max(d+jitter, time.Millisecond)
}

// Members returns the live members (alive or suspected, not yet declared dead) with
// valid metadata, this broker included, sorted by broker id. Before Start and after
// Leave/Close it holds only this broker.
func (g *Gossip) Members() []Member {
	g.viewMu.RLock()
	out := make([]Member, 0, len(g.view))
	for _, m := range g.view {
		out = append(out, m)
	}
	g.viewMu.RUnlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.BrokerID, b.BrokerID) })
	return out
}

// Lookup returns the live member with broker id id, if any.
func (g *Gossip) Lookup(id int32) (Member, bool) {
	g.viewMu.RLock()
	defer g.viewMu.RUnlock()
	m, ok := g.view[nodeName(id)]
	return m, ok
}

// PeerZone returns the zone of the live peer whose gossip address is addr (host:port,
// as Config.Count reports it). A stream a peer opened comes from an ephemeral port: when
// no peer has the address addr, the zone is the one every live peer at addr's IP
// announces, if they agree. ok is false when no peer matches or the peers at that IP
// are in different zones; a matched peer that announced no zone gives "" and true.
// Cheap enough for every packet (a read lock and a map lookup; a scan of the peers when
// the exact address is not known).
func (g *Gossip) PeerZone(addr string) (zone string, ok bool) {
	g.viewMu.RLock()
	defer g.viewMu.RUnlock()
	if name, found := g.byAddr[addr]; found {
		m, found := g.view[name]
		return m.Zone, found
	}
	ip, err := netip.ParseAddrPort(addr)
	if err != nil {
		return "", false
	}
	for name, pa := range g.peerAddr {
		pip, err := netip.ParseAddrPort(pa)
		if err != nil || pip.Addr().Unmap() != ip.Addr().Unmap() {
			continue
		}
		z := g.view[name].Zone
		if ok && z != zone {
			return "", false
		}
		zone, ok = z, true
	}
	return zone, ok
}

// setPeerAddrLocked records the gossip address of peer name ("": forget it). viewMu
// must be held for writing.
func (g *Gossip) setPeerAddrLocked(name, addr string) {
	if old, found := g.peerAddr[name]; found {
		if old == addr {
			return
		}
		if g.byAddr[old] == name {
			delete(g.byAddr, old)
		}
		delete(g.peerAddr, name)
	}
	if addr != "" {
		g.peerAddr[name] = addr
		g.byAddr[addr] = name
	}
}

// Self returns the metadata this broker announces.
func (g *Gossip) Self() Member { return g.currentSelf() }

func (g *Gossip) currentSelf() Member {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	return g.self
}

func (g *Gossip) peerCount() int { return g.memberCount() - 1 }

func (g *Gossip) memberCount() int {
	g.viewMu.RLock()
	defer g.viewMu.RUnlock()
	return len(g.view)
}

// UpdateEpoch announces a new broker epoch (after the broker re-registered). The
// change applies locally at once and spreads by gossip; UpdateEpoch does not wait for
// the peers to see it.
func (g *Gossip) UpdateEpoch(epoch int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateClosed {
		return ErrClosed
	}
	g.metaMu.Lock()
	self := g.self
	self.Epoch = epoch
	meta, err := encodeMeta(self)
	if err != nil {
		g.metaMu.Unlock()
		return err
	}
	g.self, g.meta = self, meta
	g.metaMu.Unlock()

	g.viewMu.Lock()
	g.view[g.name] = self
	g.viewMu.Unlock()

	if g.state == stateStarted {
		// UpdateNode queues the alive broadcast, then waits for it to be sent; the
		// only error is that wait timing out, which does not stop the broadcast.
		if err := g.ml.UpdateNode(time.Nanosecond); err != nil {
			g.log.Debug("gossip epoch update queued", "epoch", epoch, "detail", err)
		}
		g.log.Info("gossip announced new epoch", "epoch", epoch)
	}
	return nil
}

// Addr returns the gossip address other members reach this one at (host:port, with
// the picked port when BindAddr had port 0), or "" before Start.
func (g *Gossip) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addrLocked()
}

func (g *Gossip) addrLocked() string {
	if g.ml == nil {
		return ""
	}
	return g.ml.LocalNode().Address()
}

// Leave tells the peers this broker is leaving (they fire OnLeave at once instead of
// waiting for the failure detector), waits up to timeout for that broadcast to go out,
// then shuts down. It returns an error if the broadcast was not confirmed in time; the
// member is shut down either way. Leave after Leave or Close is a no-op.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateNew:
		g.state = stateClosed
		return nil
	case stateClosed:
		return nil
	}
	g.stopJoinLoop()
	var errs []error
	if err := g.ml.Leave(timeout); err != nil {
		errs = append(errs, fmt.Errorf("gossip: leave: %w", err))
	}
	if err := g.ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("gossip: shutdown: %w", err))
	}
	g.finishClose()
	g.log.Info("gossip left cluster")
	return errors.Join(errs...)
}

// Close shuts down without telling the peers, as a crash would: they fire OnLeave
// once their failure detector declares this broker dead. Close after Leave or Close is
// a no-op.
func (g *Gossip) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateNew:
		g.state = stateClosed
		return nil
	case stateClosed:
		return nil
	}
	g.stopJoinLoop()
	err := g.ml.Shutdown()
	g.finishClose()
	g.log.Info("gossip closed")
	if err != nil {
		return fmt.Errorf("gossip: shutdown: %w", err)
	}
	return nil
}

func (g *Gossip) stopJoinLoop() {
	if g.stopJoin != nil {
		close(g.stopJoin)
		<-g.joinDone // bounded by one Join attempt (memberlist's TCP timeout)
		g.stopJoin = nil
	}
}

func (g *Gossip) finishClose() {
	g.state = stateClosed
	g.disp.close()
	g.metrics.unregister(g.cfg.Registerer)
	g.viewMu.Lock()
	g.viewClosed = true
	g.view = map[string]Member{g.name: g.currentSelf()}
	clear(g.peerAddr)
	clear(g.byAddr)
	g.viewMu.Unlock()
}

// ---- memberlist delegates ----
//
// memberlist calls these with its node lock held: they must be quick, must not block
// and must not call back into memberlist.

type delegate struct{ g *Gossip }

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.AliveDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate.
func (d *delegate) NodeMeta(limit int) []byte {
	d.g.metaMu.Lock()
	defer d.g.metaMu.Unlock()
	if len(d.g.meta) > limit { // cannot happen: encodeMeta checks the limit
		return nil
	}
	return slices.Clone(d.g.meta)
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate; this package sends no user messages or state.
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// decodeNode returns the Member a peer announces, checking that its node name matches
// the broker id in its metadata.
func decodeNode(n *memberlist.Node) (Member, error) {
	m, err := decodeMeta(n.Meta)
	if err != nil {
		return Member{}, err
	}
	id, ok := brokerIDFromName(n.Name)
	if !ok {
		return Member{}, fmt.Errorf("gossip: node name %q is not %s<id>", n.Name, nodeNamePrefix)
	}
	if id != m.BrokerID {
		return Member{}, fmt.Errorf("gossip: node %q announces broker id %d", n.Name, m.BrokerID)
	}
	return m, nil
}

// NotifyAlive implements memberlist.AliveDelegate: alive messages of members whose
// metadata does not decode are dropped, so such a member never enters memberlist's
// node list (it is neither probed nor reported).
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	if n.Name == d.g.name {
		return nil // about us; memberlist refutes stale claims itself
	}
	if _, err := decodeNode(n); err != nil {
		d.g.noteMalformed(n, err)
		return err
	}
	return nil
}

func (g *Gossip) noteMalformed(n *memberlist.Node, err error) {
	g.badMu.Lock()
	defer g.badMu.Unlock()
	if prev, ok := g.bad[n.Name]; ok && prev == string(n.Meta) {
		return
	}
	if len(g.bad) >= maxBadNames {
		clear(g.bad)
	}
	g.bad[n.Name] = string(n.Meta)
	g.metrics.malformedMeta.Inc()
	g.log.Warn("gossip ignoring member with malformed metadata",
		"node", n.Name, "addr", n.Address(), "meta_len", len(n.Meta), "err", err)
}

func (g *Gossip) forgetMalformed(name string) {
	g.badMu.Lock()
	delete(g.bad, name)
	g.badMu.Unlock()
}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) {
	g := d.g
	m, err := decodeNode(n)
	if err != nil {
		g.noteMalformed(n, err)
		return
	}
	g.forgetMalformed(n.Name)
	if n.Name == g.name {
		return // the local node; the view already holds it
	}
	g.viewMu.Lock()
	if g.viewClosed {
		g.viewMu.Unlock()
		return
	}
	g.view[n.Name] = m
	g.setPeerAddrLocked(n.Name, n.Address())
	count := len(g.view)
	g.viewMu.Unlock()
	g.metrics.membersAlive.Set(float64(count))
	g.log.Info("gossip peer joined", "peer", m.BrokerID, "zone", m.Zone, "kafka_addr", m.KafkaAddr,
		"epoch", m.Epoch, "gossip_addr", n.Address())
	g.disp.push(event{kind: eventJoin, member: m})
}

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) {
	g := d.g
	m, err := decodeNode(n)
	if err != nil {
		g.noteMalformed(n, err) // keep the last valid metadata
		return
	}
	g.forgetMalformed(n.Name)
	if n.Name == g.name {
		return
	}
	g.viewMu.Lock()
	if g.viewClosed {
		g.viewMu.Unlock()
		return
	}
	old, known := g.view[n.Name]
	g.view[n.Name] = m
	g.setPeerAddrLocked(n.Name, n.Address())
	count := len(g.view)
	g.viewMu.Unlock()
	g.metrics.membersAlive.Set(float64(count))
	switch {
	case !known:
		g.log.Info("gossip peer joined", "peer", m.BrokerID, "zone", m.Zone, "kafka_addr", m.KafkaAddr,
			"epoch", m.Epoch, "gossip_addr", n.Address())
		g.disp.push(event{kind: eventJoin, member: m})
	case old != m:
		g.log.Info("gossip peer updated", "peer", m.BrokerID, "zone", m.Zone, "kafka_addr", m.KafkaAddr,
			"epoch", m.Epoch, "old_epoch", old.Epoch)
		g.disp.push(event{kind: eventUpdate, member: m})
	}
}

// NotifyLeave implements memberlist.EventDelegate. memberlist calls it when a node is
// declared dead (failed probes and an expired suspicion) or leaves gracefully.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	g := d.g
	if n.Name == g.name {
		return
	}
	g.viewMu.Lock()
	if g.viewClosed {
		g.viewMu.Unlock()
		return
	}
	old, known := g.view[n.Name]
	delete(g.view, n.Name)
	g.setPeerAddrLocked(n.Name, "")
	count := len(g.view)
	g.viewMu.Unlock()
	if !known {
		return // never accepted (malformed metadata)
	}
	g.metrics.membersAlive.Set(float64(count))
	g.metrics.suspectEvents.Inc()
	g.log.Info("gossip peer dead or left", "peer", old.BrokerID, "zone", old.Zone, "epoch", old.Epoch,
		"gossip_addr", n.Address())
	g.disp.push(event{kind: eventLeave, member: old})
}

// NotifyConflict implements memberlist.ConflictDelegate: another live process at a
// different address uses this broker id (misconfiguration, or a restart at a new
// address before the old incarnation was declared dead).
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.g.metrics.conflicts.Inc()
	d.g.log.Warn("gossip broker id claimed at two addresses", "node", existing.Name,
		"known_addr", existing.Address(), "other_addr", other.Address())
}
