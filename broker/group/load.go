package group

// load.go moves groups in and out of this coordinator with their partition of the log:
// Load replays records into fresh groups and installs them, Unload drops groups whose
// partition left, and Compact writes each group's whole state so the log below it can go.
//
// Why groups are replaced rather than updated: a coordinator that lost a group and gains it
// again must not serve what it remembered (a zombie member of the earlier tenure would
// commit with its old generation; a static member that rejoined elsewhere would be fenced).
// The log is the only truth: what another coordinator appended meanwhile is in it.

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// LoadStats says what Load installed.
type LoadStats struct {
	Records int // records replayed for the selected groups
	Groups  int // groups installed
	Members int // members of the installed groups, now waiting for their heartbeats
}

// Load replaces the state of the groups belongs selects by the replay of their records:
// replay calls apply for every record it reads, in log order (records of other groups are
// ignored). Nothing is visible before replay returns; on an error nothing changes and
// Load can be called again. Groups with members resume in Stable with the generation,
// leader and assignments of their last Meta, and each member must heartbeat within its
// session timeout from now. The caller keeps the groups' Status at Loading until Load
// returns (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS). Offsets restored by
// Restore (legacy records) are the base the replay starts from.
func (c *Coordinator) Load(belongs func(group string) bool, replay func(apply func(group string, rec Record)) error) (LoadStats, error) {
	var st LoadStats
	states := map[string]*loadState{}
	get := func(name string) *loadState {
		s := states[name]
		if s == nil {
			s = &loadState{}
			states[name] = s
		}
		return s
	}
	c.mu.Lock()
	for name, offs := range c.legacy {
		if belongs(name) {
			get(name).apply(Record{Offsets: offs})
		}
	}
	c.mu.Unlock()
	err := replay(func(name string, rec Record) {
		if !belongs(name) {
			return
		}
		st.Records++
		get(name).apply(rec)
	})
	if err != nil {
		return LoadStats{}, err
	}
	c.Unload(belongs)
	c.reindexTxn(belongs, states)
	names := make([]string, 0, len(states))
	for name, s := range states {
		if !s.empty() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		g := c.groupFrom(name, states[name])
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return st, errClosed
		}
		c.groups[name] = g
		c.mu.Unlock()
		g.lock()
		for _, m := range g.members {
			g.scheduleHeartbeat(m, m.sessionTimeout)
		}
		st.Members += len(g.members)
		if g.cg != nil {
			g.startConsumerTimers()
			st.Members += len(g.cg.members)
		}
		st.Groups++
		g.unlock()
	}
	return st, nil
}

// groupFrom builds a group from its replayed state.
func (c *Coordinator) groupFrom(name string, s *loadState) *group {
	g := newGroup(c, name)
	g.meta = s.meta
	if s.offsets != nil {
		g.offsets = s.offsets // the replay's maps are the group's from now on
	}
	g.txn = s.txn
	if cm := s.consumer; cm != nil {
		g.cg = consumerFrom(cm)
		g.protocolType = "consumer"
		g.emptySince = cm.Time
		g.consumerStateChanged()
	}
	if m := s.meta; m != nil {
		g.installMeta(m)
	}
	return g
}

// installMeta makes g the classic group m describes: Stable with its members, or Empty
// since m's time (no timers started). Called with g locked (or not yet shared).
func (g *group) installMeta(m *Meta) {
	g.meta = m
	g.generation = m.Generation
	g.protocolType = m.ProtocolType
	g.members, g.static = map[string]*member{}, map[string]string{}
	g.leader, g.protocol = "", ""
	for _, mm := range m.Members {
		mem := &member{
			id:               mm.ID,
			instanceID:       mm.InstanceID,
			clientID:         mm.ClientID,
			clientHost:       mm.ClientHost,
			protocolType:     m.ProtocolType,
			sessionTimeout:   mm.SessionTimeout,
			rebalanceTimeout: mm.RebalanceTimeout,
			assignment:       mm.Assignment,
		}
		for _, p := range mm.Protocols {
			mem.protocols = append(mem.protocols, protocol{name: p.Name, metadata: p.Metadata})
		}
		g.seq++
		mem.seq = g.seq
		g.members[mem.id] = mem
		if mem.instanceID != nil {
			g.static[*mem.instanceID] = mem.id
		}
	}
	if len(g.members) > 0 {
		g.protocol = m.Protocol
		g.leader = m.Leader
		if g.members[g.leader] == nil {
			g.leader = g.firstMemberID()
		}
		g.state = stateStable
	} else {
		g.state = stateEmpty
		g.emptySince = m.Time
	}
}

// Unload drops the groups belongs selects, because their partition is no longer served
// here (or is about to be loaded afresh): timers stop, parked JoinGroup and SyncGroup
// requests are answered NOT_COORDINATOR at once, queued writes fail with NOT_COORDINATOR
// and later requests find no group. It returns how many groups it dropped.
func (c *Coordinator) Unload(belongs func(group string) bool) int {
	c.mu.Lock()
	var gs []*group
	for name, g := range c.groups {
		if belongs(name) {
			gs = append(gs, g)
			delete(c.groups, name)
		}
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.lock()
		g.unloaded = true
		g.removed = true
		g.stopAll(kerr.NotCoordinator.Code)
		g.unlock()
	}
	return len(gs)
}

// Compact writes a Full record (the group's durable membership, every committed offset
// and every pending transactional one) for each live group belongs selects, through the group's write queue, so each
// lands after every write of the group made before it. Once Compact returns nil, every
// record of those groups appended before it was called is superseded: the caller may drop
// the log below the end it saw before calling. It returns the number of records written.
func (c *Coordinator) Compact(ctx context.Context, belongs func(group string) bool) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		n    int
	)
	for _, g := range c.allGroups() {
		if !belongs(g.name) {
			continue
		}
		g.lock()
		if g.removed {
			g.unlock()
			continue
		}
		wg.Add(1)
		g.enqueueWrite(&write{ctx: ctx, full: true, apply: func(err error) {
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				n++
			}
			mu.Unlock()
			wg.Done()
		}})
		g.unlock()
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// fullRecord is the group's whole durable state. Called with g locked.
func (g *group) fullRecord() Record {
	rec := Record{Full: true, Meta: g.meta}
	if g.cg != nil && (g.cg.durable != nil || g.cg.fromClassic == nil) {
		// (A conversion from a classic group not yet durable: the log still holds
		// the classic Meta.)
		rec.Meta, rec.Consumer = nil, g.cg.durable
	}
	topics := make([]string, 0, len(g.offsets))
	for t := range g.offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		ps := make([]Offset, 0, len(g.offsets[t]))
		for _, o := range g.offsets[t] {
			ps = append(ps, o)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		rec.Offsets = append(rec.Offsets, ps...)
	}
	rec.Txn = g.txn.list()
	return rec
}
