package group

// group.go is the classic group state machine (Kafka's ClassicGroup plus the
// rebalance logic of GroupMetadataManager):
//
//	Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//	  ▲                  ▲        │ (no member left)                  │ leader SyncGroup
//	  └──────────────────┼────────┘                                    ▼
//	                     └──── join / leave / expiry / metadata change ─ Stable
//	Dead: the group is being (or has been) deleted.
//
// Timers (member session, pending member, join phase, pending sync) are
// scheduled on Config.Clock; every callback takes the group lock and checks a
// token so that a timer that fired after being replaced or stopped is a no-op.
//
// Members that are waiting for a JoinGroup or SyncGroup response are not
// expired by their session timer (Kafka's hasSatisfiedHeartbeat): they are
// bounded by the rebalance timeout instead. Brand new members are bounded by
// NewMemberJoinTimeout while their first JoinGroup is pending.

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return stateNames[s] }

// groupType is what ListGroups v5+ reports for every group of this package.
const groupType = "classic"

type protocol struct {
	name     string
	metadata []byte
}

// waiter is a parked JoinGroup or SyncGroup request.
type waiter struct {
	version int16
	respond func(kmsg.Response)
}

type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []protocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte

	join  *waiter // parked JoinGroup, if any
	sync  *waiter // parked SyncGroup, if any
	isNew bool    // has not yet received its first JoinGroup response

	seq     uint64 // join order; the leader is re-elected in this order
	hbTimer Timer
	hbTok   uint64
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// matches reports whether protos equals the member's current protocols
// (names, order and metadata).
func (m *member) matches(protos []protocol) bool {
	if len(protos) != len(m.protocols) {
		return false
	}
	for i, p := range protos {
		q := m.protocols[i]
		if p.name != q.name || string(p.metadata) != string(q.metadata) {
			return false
		}
	}
	return true
}

// hasSatisfiedHeartbeat mirrors Kafka: a member parked in JoinGroup or
// SyncGroup does not need heartbeats, except brand new members.
func (m *member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return false
	}
	return m.join != nil || m.sync != nil
}

type pendingMember struct{ timer Timer }

type group struct {
	c    *Coordinator
	name string

	mu  sync.Mutex
	out []func() // responses to send once mu is released

	state        groupState
	prevState    groupState
	generation   int32
	protocolType string // set by the first member of an empty group; kept while Empty
	protocol     string // selected protocol of the generation; "" when Empty
	leader       string

	members     map[string]*member
	static      map[string]string // group.instance.id -> member id
	pending     map[string]*pendingMember
	pendingSync map[string]struct{}
	seq         uint64

	newMemberAdded bool // a member joined during the initial (delayed) rebalance

	joinTimer Timer
	joinTok   uint64
	syncTimer Timer
	syncTok   uint64

	offsets map[string]map[int32]Offset
	// txn holds the pending offsets of open transactions (txn_offsets.go); txnQueued
	// counts the TxnOffsetCommit writes of each producer queued or in flight.
	txn       txnOffsets
	txnQueued map[int64]int
	// meta is the membership the log holds for the group (its last Meta record): what a
	// Full record writes, since the state in memory may be mid-rebalance.
	meta *Meta
	// emptySince is when the group last became Empty (zero if it never had members):
	// its offsets expire OffsetsRetention after it.
	emptySince time.Time

	writeQ     []*write
	writing    bool
	afterBatch []func() // run after a batch of writes has been applied
	// restores counts Restore calls on the group, so a write in flight across a restore
	// knows memory was rebuilt from the log under it (errRestored).
	restores uint64

	// cg is set for a KIP-848 consumer group (consumer.go): its members live there.
	cg *consumerGroup

	removed  bool // no longer in the coordinator's map
	unloaded bool // removed by Unload: its partition left; nothing of it may be written
	closed   bool // coordinator closed
}

func newGroup(c *Coordinator, name string) *group {
	return &group{
		c:           c,
		name:        name,
		members:     make(map[string]*member),
		static:      make(map[string]string),
		pending:     make(map[string]*pendingMember),
		pendingSync: make(map[string]struct{}),
		offsets:     make(map[string]map[int32]Offset),
	}
}

func (g *group) lock() { g.mu.Lock() }

// unlock releases the group and then sends the responses queued meanwhile.
func (g *group) unlock() {
	out := g.out
	g.out = nil
	g.mu.Unlock()
	for _, f := range out {
		f()
	}
}

// send queues a response; it is delivered after the group lock is released.
func (g *group) send(respond func(kmsg.Response), resp kmsg.Response) {
	g.out = append(g.out, func() { respond(resp) })
}

func (g *group) transition(s groupState) {
	g.prevState = g.state
	g.state = s
}

// ---- timers -----------------------------------------------------------------

// after schedules f with the group locked, unless the group is gone by then.
func (g *group) after(d time.Duration, f func()) Timer {
	return g.c.cfg.Clock.AfterFunc(d, func() {
		g.lock()
		defer g.unlock()
		if g.closed || g.removed || g.c.isClosed() {
			return
		}
		f()
	})
}

func (g *group) scheduleHeartbeat(m *member, d time.Duration) {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbTok++
	tok := m.hbTok
	m.hbTimer = g.after(d, func() {
		if g.members[m.id] != m || m.hbTok != tok || g.state == stateDead {
			return
		}
		if !m.hasSatisfiedHeartbeat() {
			g.removeMemberAndUpdate(m)
		}
	})
}

func (g *group) stopHeartbeat(m *member) {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
		m.hbTimer = nil
	}
	m.hbTok++
}

func (g *group) scheduleJoin(d time.Duration, f func()) {
	g.cancelJoin()
	tok := g.joinTok
	g.joinTimer = g.after(d, func() {
		if g.joinTok == tok {
			f()
		}
	})
}

func (g *group) cancelJoin() {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.joinTok++
}

func (g *group) cancelSync() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	g.syncTok++
}

// ---- membership -------------------------------------------------------------

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

func (g *group) firstMemberID() string {
	var first *member
	for _, m := range g.members {
		if first == nil || m.seq < first.seq {
			first = m
		}
	}
	if first == nil {
		return ""
	}
	return first.id
}

func (g *group) addMember(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.seq++
	m.seq = g.seq
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// removeMember drops m from the group, failing any request it has parked
// with UNKNOWN_MEMBER_ID.
func (g *group) removeMember(m *member) {
	if m.join != nil {
		g.send(m.join.respond, joinError(m.join.version, "", kerr.UnknownMemberID.Code))
		m.join = nil
	}
	if m.sync != nil {
		g.send(m.sync.respond, syncError(m.sync.version, kerr.UnknownMemberID.Code))
		m.sync = nil
	}
	g.stopHeartbeat(m)
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = g.firstMemberID()
	}
}

// removeMemberAndUpdate removes a member (leave, session expiry) and moves
// the group along.
func (g *group) removeMemberAndUpdate(m *member) {
	g.removeMember(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.maybePrepareRebalanceOrCompleteJoin()
	case statePreparingRebalance:
		if g.hasAllMembersJoined() {
			g.completeJoin()
		}
	}
}

func (g *group) addPendingMember(id string, session time.Duration) {
	p := &pendingMember{}
	g.pending[id] = p
	p.timer = g.after(session, func() {
		if g.pending[id] != p {
			return
		}
		g.removePending(id)
		if g.state == statePreparingRebalance && g.hasAllMembersJoined() {
			g.completeJoin()
		}
	})
}

func (g *group) removePending(id string) {
	if p := g.pending[id]; p != nil {
		p.timer.Stop()
		delete(g.pending, id)
	}
}

// validateMember checks that memberID (with instanceID for static members)
// is the current member, as Kafka's ClassicGroup.validateMember.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if existing != memberID {
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (g *group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.join != nil {
			n++
		}
	}
	return n
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.pending) == 0 && g.numAwaitingJoin() == len(g.members)
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols reports whether a member with this protocol type and
// protocols may join: any non-empty type/protocol list is fine when nobody
// else is in the group; otherwise the type must match and at least one
// protocol must be supported by every other member. self, if not nil, is the
// joining member's current incarnation and is not counted (Kafka counts it,
// which only prevents a lone member from changing its protocols).
func (g *group) supportsProtocols(protocolType string, protos []protocol, self *member) bool {
	others := len(g.members)
	if self != nil {
		others--
	}
	if g.state == stateEmpty || others == 0 {
		return protocolType != "" && len(protos) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protos {
		n := 0
		for _, m := range g.members {
			if m != self && m.supports(p.name) {
				n++
			}
		}
		if n == others {
			return true
		}
	}
	return false
}

// selectProtocol picks the generation's protocol as Kafka does: among the
// protocols every member supports, each member votes for the first one in
// its own preference order and the most voted wins. Ties are broken by the
// leader's preference order (Kafka breaks them arbitrarily), so when all
// members list protocols in the same order the leader's first common
// protocol is chosen.
func (g *group) selectProtocol() string {
	leader := g.members[g.leader]
	if leader == nil {
		leader = g.members[g.firstMemberID()]
	}
	if leader == nil {
		return ""
	}
	var candidates []string
	for _, p := range leader.protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.name)
		}
	}
	if len(candidates) == 0 {
		if len(leader.protocols) > 0 {
			return leader.protocols[0].name // unreachable: joins are checked
		}
		return ""
	}
	isCandidate := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		isCandidate[c] = true
	}
	votes := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if isCandidate[p.name] {
				votes[p.name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// subscribedTopics returns the topics that consumer-protocol members
// subscribe to (from their kmsg.ConsumerMemberMetadata), or nil if the group
// does not use the "consumer" protocol type. Members whose metadata cannot
// be parsed are skipped.
func (g *group) subscribedTopics() map[string]bool {
	if g.protocolType != "consumer" || len(g.members) == 0 {
		return nil
	}
	topics := make(map[string]bool)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.protocol != "" && p.name != g.protocol {
				continue
			}
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(p.metadata); err != nil {
				continue
			}
			for _, t := range meta.Topics {
				topics[t] = true
			}
		}
	}
	return topics
}

// ---- rebalance ----------------------------------------------------------------

func (g *group) canRebalance() bool {
	return g.state == stateStable || g.state == stateCompletingRebalance || g.state == stateEmpty
}

func (g *group) maybePrepareRebalanceOrCompleteJoin() {
	if g.canRebalance() {
		g.prepareRebalance()
	} else {
		g.maybeCompleteJoinPhase()
	}
}

// maybeCompleteJoinPhase completes the join phase early once every member
// has rejoined, except during the initial delayed rebalance of an empty
// group, which always waits for its delay.
func (g *group) maybeCompleteJoinPhase() {
	if g.state == statePreparingRebalance && g.hasAllMembersJoined() && g.prevState != stateEmpty {
		g.completeJoin()
	}
}

func (g *group) prepareRebalance() {
	if g.state == stateCompletingRebalance {
		g.resetAndPropagateAssignmentWithError(kerr.RebalanceInProgress.Code)
	}
	g.clearPendingSync()
	initial := g.state == stateEmpty
	g.transition(statePreparingRebalance)
	if initial {
		delay := g.c.cfg.InitialRebalanceDelay
		remaining := max(g.rebalanceTimeout()-delay, 0)
		g.scheduleJoin(delay, func() { g.tryCompleteInitialRebalance(delay, remaining) })
		return
	}
	if g.hasAllMembersJoined() {
		g.completeJoin()
		return
	}
	g.scheduleJoin(g.rebalanceTimeout(), g.completeJoin)
}

// tryCompleteInitialRebalance extends the initial delay while new members
// keep arriving, bounded by the rebalance timeout (Kafka's InitialDelayedJoin).
func (g *group) tryCompleteInitialRebalance(delay, remaining time.Duration) {
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		newDelay := min(g.c.cfg.InitialRebalanceDelay, remaining)
		newRemaining := max(remaining-delay, 0)
		g.scheduleJoin(newDelay, func() { g.tryCompleteInitialRebalance(newDelay, newRemaining) })
		return
	}
	g.completeJoin()
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// dropped, a new generation starts and every parked JoinGroup is answered
// (only the leader gets the member list).
func (g *group) completeJoin() {
	g.cancelJoin()
	g.newMemberAdded = false
	for _, m := range g.sortedMembers() {
		if m.join == nil && m.instanceID == nil {
			g.removeMember(m)
		}
	}
	if g.state == stateDead {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait for them
		// to rejoin or for their sessions to expire.
		g.scheduleJoin(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.initNextGeneration()
	if g.state == stateEmpty {
		// Durable, so a coordinator that takes the group over does not resume members
		// that are gone; and the offsets expire from now (Kafka stores the empty group).
		g.emptySince = g.c.cfg.Clock.Now()
		g.storeMeta(g.metaOf(nil, g.emptySince), nil)
		return
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			w := m.join
			m.join = nil
			g.send(w.respond, g.joinResponse(w.version, m.id, m.id == g.leader, g.leader, false))
		}
		g.scheduleHeartbeat(m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	g.schedulePendingSync()
}

// maybeElectNewJoinedLeader makes sure the leader is a member that rejoined.
func (g *group) maybeElectNewJoinedLeader() bool {
	leader := g.members[g.leader]
	if leader == nil {
		return false
	}
	if leader.join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

func (g *group) initNextGeneration() {
	g.generation++
	if len(g.members) > 0 {
		g.protocol = g.selectProtocol()
		g.transition(stateCompletingRebalance)
	} else {
		g.protocol = ""
		g.transition(stateEmpty)
	}
	g.clearPendingSync()
}

func (g *group) clearPendingSync() {
	clear(g.pendingSync)
	g.cancelSync()
}

// schedulePendingSync removes members that do not send SyncGroup within the
// rebalance timeout after the join phase (Kafka's pending-sync expiration).
func (g *group) schedulePendingSync() {
	g.cancelSync()
	tok := g.syncTok
	gen := g.generation
	g.syncTimer = g.after(g.rebalanceTimeout(), func() {
		if g.syncTok != tok || g.generation != gen {
			return
		}
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		if len(g.pendingSync) == 0 {
			return
		}
		for _, m := range g.sortedMembers() {
			if _, ok := g.pendingSync[m.id]; ok {
				g.removeMember(m)
			}
		}
		g.prepareRebalance()
	})
}

func (g *group) removePendingSync(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.cancelSync()
	}
}

func (g *group) resetAndPropagateAssignmentWithError(code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	g.propagateAssignment(code)
}

// propagateAssignment answers every parked SyncGroup.
func (g *group) propagateAssignment(code int16) {
	for _, m := range g.sortedMembers() {
		if m.sync == nil {
			continue
		}
		w := m.sync
		m.sync = nil
		resp := syncError(w.version, code)
		if code == 0 {
			resp.MemberAssignment = m.assignment
			if w.version >= 5 {
				resp.ProtocolType = strp(g.protocolType)
				resp.Protocol = strp(g.protocol)
			}
		}
		g.send(w.respond, resp)
		// The member's session may have lapsed while it was parked.
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
}

// storeMeta writes the group's membership; done, if not nil, runs with the outcome.
func (g *group) storeMeta(meta *Meta, done func(err error)) {
	g.enqueueWrite(&write{ctx: context.Background(), meta: meta, apply: func(err error) {
		if err == nil {
			g.meta = meta
		}
		if done != nil {
			done(err)
		}
	}})
}

// ---- responses ----------------------------------------------------------------

func joinError(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.ErrorCode = code
	resp.MemberID = memberID
	return resp
}

// joinResponse is a successful JoinGroup response for the current generation.
func (g *group) joinResponse(version int16, memberID string, withMembers bool, leader string, skip bool) *kmsg.JoinGroupResponse {
	resp := joinError(version, memberID, 0)
	resp.Generation = g.generation
	resp.ProtocolType = strp(g.protocolType)
	resp.Protocol = strp(g.protocol)
	resp.LeaderID = leader
	resp.SkipAssignment = skip
	if withMembers {
		for _, m := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.id
			rm.InstanceID = m.instanceID
			rm.ProtocolMetadata = m.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

func syncError(version int16, code int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = version
	resp.ErrorCode = code
	return resp
}

// ---- offsets ------------------------------------------------------------------

// setOffset applies a plain commit: later than every pending offset of its partition.
func (g *group) setOffset(o Offset) {
	g.txn.supersede(o.Topic, o.Partition)
	g.putOffset(o)
}

// putOffset makes o the committed offset of its partition.
func (g *group) putOffset(o Offset) {
	ps := g.offsets[o.Topic]
	if ps == nil {
		ps = make(map[int32]Offset)
		g.offsets[o.Topic] = ps
	}
	ps[o.Partition] = o
}

// deleteOffset applies a tombstone: the committed offset and the pending ones go.
func (g *group) deleteOffset(topic string, partition int32) {
	g.txn.drop(topic, partition)
	ps := g.offsets[topic]
	if ps == nil {
		return
	}
	delete(ps, partition)
	if len(ps) == 0 {
		delete(g.offsets, topic)
	}
}

func (g *group) offset(topic string, partition int32) (Offset, bool) {
	o, ok := g.offsets[topic][partition]
	return o, ok
}

// idle reports whether the group is Empty with no members, no pending
// members and no offsets, committed or pending in a transaction.
func (g *group) idle() bool {
	return g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && g.txn.empty() &&
		(g.cg == nil || len(g.cg.members) == 0)
}

// unused reports whether the group holds nothing worth keeping: idle and no
// durable write queued or in flight.
func (g *group) unused() bool {
	return g.idle() && len(g.writeQ) == 0 && !g.writing
}

// removeFromCoordinator marks the group Dead and drops it from the map, so
// the next request for its name starts a fresh group.
func (g *group) removeFromCoordinator() {
	g.stopAll(kerr.CoordinatorNotAvailable.Code)
	g.transition(stateDead)
	g.removed = true
	g.c.mu.Lock()
	if g.c.groups[g.name] == g {
		delete(g.c.groups, g.name)
	}
	g.c.mu.Unlock()
}

// shutdown is called by Coordinator.Close.
func (g *group) shutdown() {
	g.closed = true
	g.stopAll(kerr.CoordinatorNotAvailable.Code)
}

// stopAll stops every timer and fails every parked request with code.
func (g *group) stopAll(code int16) {
	g.cancelJoin()
	g.cancelSync()
	for id := range g.pending {
		g.removePending(id)
	}
	if g.cg != nil {
		for _, m := range g.cg.members {
			g.stopConsumerTimers(m)
		}
	}
	for _, m := range g.sortedMembers() {
		g.stopHeartbeat(m)
		if m.join != nil {
			g.send(m.join.respond, joinError(m.join.version, m.id, code))
			m.join = nil
		}
		if m.sync != nil {
			g.send(m.sync.respond, syncError(m.sync.version, code))
			m.sync = nil
		}
	}
}
