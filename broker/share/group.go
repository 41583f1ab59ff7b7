package share

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"time"
)

// Errors of ShareGroupHeartbeat.
var (
	ErrUnknownMember = errors.New("share: unknown member")          // UNKNOWN_MEMBER_ID
	ErrFencedEpoch   = errors.New("share: fenced member epoch")     // FENCED_MEMBER_EPOCH
	ErrBadHeartbeat  = errors.New("share: invalid heartbeat")       // INVALID_REQUEST
	ErrGroupTooLarge = errors.New("share: group max size reached")  // GROUP_MAX_SIZE_REACHED
	ErrNotShareGroup = errors.New("share: not a share group")       // GROUP_ID_NOT_FOUND
	ErrGroupNotEmpty = errors.New("share: share group has members") // NON_EMPTY_GROUP
)

// TopicInfo is what the assignor needs of a subscribed topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// Member is a share group member as ShareGroupDescribe shows it.
type Member struct {
	ID, ClientID, ClientHost, Rack string
	Epoch                          int32
	Subscribed                     []string
	Assignment                     map[[16]byte][]int32
	lastSeen                       time.Time
}

// Group is one share group on its coordinator.
type Group struct {
	ID          string
	Epoch       int32 // group epoch: moves with membership, subscriptions, topics
	AssignEpoch int32 // the epoch the current target assignment was computed at
	Members     map[string]*Member
	topicsPrint string
	target      map[string]map[[16]byte][]int32
	// Topics are the topics any member ever subscribed: where the group may have
	// share-partition state (DeleteGroups deletes it).
	Topics []string
}

// GroupConfig is the coordinator's configuration.
type GroupConfig struct {
	SessionTimeout    time.Duration // group.share.session.timeout.ms
	HeartbeatInterval time.Duration // group.share.heartbeat.interval.ms
	MaxSize           int           // group.share.max.size
	// Configs, when set, gives each group its own session timeout
	// (share.session.timeout.ms) over SessionTimeout.
	Configs *Configs
}

// GroupStore keeps share groups' membership durable (group_record.go). Each call
// carries the coordinator's epoch (its __consumer_offsets partition's leader epoch): the
// store refuses a write older than the newest epoch that read or wrote the group, so a
// coordinator that lost the group cannot overwrite its successor's membership.
type GroupStore interface {
	LoadGroup(ctx context.Context, group string, coordEpoch int32) (rec []byte, ok bool, err error)
	SaveGroup(ctx context.Context, group string, coordEpoch int32, rec []byte) error
}

// Groups is the share group coordinator's membership: every member's epoch and
// assignment. Each share group's partitions are shared: a partition may go to several
// members (when there are more members than partitions), and a member to several
// partitions; no revocation step is needed, since a partition held by two members at
// once is allowed. With a GroupStore every change is durable before it is answered, and
// a group is loaded again whenever the coordinator epoch it was loaded at is not the
// caller's (the group moved away and back).
type Groups struct {
	cfg    GroupConfig
	store  GroupStore // nil: memory only
	lmu    sync.Mutex // one load at a time (loads happen once per group and move)
	mu     sync.Mutex
	groups map[string]*groupEntry
	imu    sync.Mutex            // the index (group_index.go); taken before mu, never inside it
	index  map[int32]*groupIndex // per __consumer_offsets partition
}

// groupEntry is a group with what makes it durable.
type groupEntry struct {
	g          *Group
	coordEpoch int32
	rec        []byte // the encoding of the newest version
	ver        uint64 // bumped when rec changes
	durable    uint64 // the newest version the store has
	broken     bool   // a write failed: load again before serving
	wmu        sync.Mutex
}

// NewGroups returns an empty coordinator keeping membership in store (nil: memory only).
func NewGroups(cfg GroupConfig, store GroupStore) *Groups {
	return &Groups{cfg: cfg, store: store, groups: map[string]*groupEntry{}, index: map[int32]*groupIndex{}}
}

// HeartbeatRequest is a ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group, Member, ClientID, ClientHost string
	Epoch                               int32
	Rack                                *string
	Subscribed                          []string // nil: unchanged
	// CoordEpoch is the coordinator's epoch (its __consumer_offsets partition's leader
	// epoch), CoordPartition that partition (the index the group is listed in).
	CoordEpoch, CoordPartition int32
}

// HeartbeatResult is its answer; Assignment is set when the member must take it.
type HeartbeatResult struct {
	Epoch      int32
	Assignment map[[16]byte][]int32
	Sent       bool
}

// entry returns group id as coordinator epoch coordEpoch sees it, loading it from the
// store when it is not here, was loaded at another epoch, or a write failed; nil when
// there is no such group and create is false.
func (gs *Groups) entry(ctx context.Context, id string, coordEpoch int32, create bool, now time.Time) (*groupEntry, error) {
	fresh := func() *groupEntry {
		e := gs.groups[id]
		if e != nil && (gs.store == nil || (e.coordEpoch == coordEpoch && !e.broken)) {
			return e
		}
		return nil
	}
	gs.mu.Lock()
	e := fresh()
	if e == nil && gs.store == nil && create {
		e = &groupEntry{g: &Group{ID: id, Members: map[string]*Member{}}}
		gs.groups[id] = e
	}
	gs.mu.Unlock()
	if e != nil || gs.store == nil {
		return e, nil
	}
	gs.lmu.Lock()
	defer gs.lmu.Unlock()
	gs.mu.Lock()
	e = fresh()
	gs.mu.Unlock()
	if e != nil {
		return e, nil
	}
	rec, ok, err := gs.store.LoadGroup(ctx, id, coordEpoch)
	if err != nil {
		return nil, err
	}
	e = &groupEntry{coordEpoch: coordEpoch}
	switch {
	case ok && rec[0] != groupDeletedVersion:
		if e.g, err = decodeGroup(id, rec, now); err != nil {
			return nil, err
		}
		e.rec = rec
	case create:
		e.g = &Group{ID: id, Members: map[string]*Member{}}
	default:
		e = nil
	}
	gs.mu.Lock()
	if e == nil {
		delete(gs.groups, id)
	} else {
		gs.groups[id] = e
	}
	gs.mu.Unlock()
	return e, nil
}

// changed notes a change of e's durable form. Called with gs.mu held; it returns the
// version to make durable.
func (gs *Groups) changed(e *groupEntry) uint64 {
	if gs.store == nil {
		return 0
	}
	if rec := encodeGroup(e.g, e.coordEpoch); !bytes.Equal(rec, e.rec) {
		e.rec = rec
		e.ver++
	}
	return e.ver
}

// flush makes version want of e durable (one write covers every caller waiting).
func (gs *Groups) flush(ctx context.Context, e *groupEntry, want uint64) error {
	if gs.store == nil {
		return nil
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	gs.mu.Lock()
	if e.durable >= want {
		gs.mu.Unlock()
		return nil
	}
	v, rec, epoch := e.ver, e.rec, e.coordEpoch
	gs.mu.Unlock()
	err := gs.store.SaveGroup(ctx, e.g.ID, epoch, rec)
	gs.mu.Lock()
	if err != nil {
		e.broken = true // memory may be ahead of the store: load again
	} else {
		e.durable = max(e.durable, v)
	}
	gs.mu.Unlock()
	return err
}

// Heartbeat applies one ShareGroupHeartbeat at now; topics resolves subscribed names.
// The change is durable before it returns.
func (gs *Groups) Heartbeat(ctx context.Context, req HeartbeatRequest, now time.Time, topics func(string) (TopicInfo, bool)) (HeartbeatResult, error) {
	if req.Member == "" || req.Epoch < -1 || (req.Epoch == 0 && len(req.Subscribed) == 0) {
		return HeartbeatResult{}, ErrBadHeartbeat
	}
	e, err := gs.entry(ctx, req.Group, req.CoordEpoch, req.Epoch == 0, now)
	if err != nil {
		return HeartbeatResult{}, err
	}
	if e == nil {
		return HeartbeatResult{}, ErrUnknownMember
	}
	if err := gs.indexed(ctx, Coord{Partition: req.CoordPartition, Epoch: req.CoordEpoch}, req.Group); err != nil {
		return HeartbeatResult{}, err
	}
	timeout := gs.sessionTimeout(ctx, req.Group, now)
	gs.mu.Lock()
	res, err := gs.heartbeat(e.g, req, now, timeout, topics)
	want := gs.changed(e)
	gs.mu.Unlock()
	if ferr := gs.flush(ctx, e, want); ferr != nil {
		return HeartbeatResult{}, ferr
	}
	return res, err
}

// heartbeat applies a heartbeat to g. Called with gs.mu held.
func (gs *Groups) heartbeat(g *Group, req HeartbeatRequest, now time.Time, timeout time.Duration, topics func(string) (TopicInfo, bool)) (HeartbeatResult, error) {
	gs.expire(g, now, timeout)
	m := g.Members[req.Member]
	switch {
	case req.Epoch == -1:
		if m != nil {
			delete(g.Members, req.Member)
			g.Epoch++
		}
		return HeartbeatResult{Epoch: -1}, nil
	case m == nil && req.Epoch != 0:
		return HeartbeatResult{}, ErrUnknownMember
	case m != nil && req.Epoch != 0 && req.Epoch != m.Epoch:
		return HeartbeatResult{}, ErrFencedEpoch
	case m == nil:
		if gs.cfg.MaxSize > 0 && len(g.Members) >= gs.cfg.MaxSize {
			return HeartbeatResult{}, ErrGroupTooLarge
		}
		m = &Member{ID: req.Member}
		g.Members[req.Member] = m
		g.Epoch++
	}
	m.lastSeen, m.ClientID, m.ClientHost = now, req.ClientID, req.ClientHost
	if req.Rack != nil {
		m.Rack = *req.Rack
	}
	if req.Subscribed != nil && !sameStrings(req.Subscribed, m.Subscribed) {
		m.Subscribed = append([]string(nil), req.Subscribed...)
		sort.Strings(m.Subscribed)
		g.Epoch++
		for _, t := range m.Subscribed {
			if !containsString(g.Topics, t) {
				g.Topics = append(g.Topics, t)
				sort.Strings(g.Topics)
			}
		}
	}
	if p := g.fingerprint(topics); p != g.topicsPrint {
		g.topicsPrint = p
		g.Epoch++
	}
	if g.AssignEpoch < g.Epoch || g.target == nil {
		g.target = assign(g, topics)
		g.AssignEpoch = g.Epoch
	}
	res := HeartbeatResult{Epoch: m.Epoch}
	if req.Epoch == 0 || m.Epoch < g.AssignEpoch {
		m.Epoch = g.AssignEpoch
		m.Assignment = g.target[m.ID]
		res.Epoch, res.Assignment, res.Sent = m.Epoch, m.Assignment, true
	}
	return res, nil
}

// sessionTimeout is group's session timeout: its own share.session.timeout.ms, else
// the coordinator's (also when its configs cannot be read: expiring a member late is
// safer than early).
func (gs *Groups) sessionTimeout(ctx context.Context, group string, now time.Time) time.Duration {
	if gs.cfg.Configs != nil {
		if s, err := gs.cfg.Configs.Get(ctx, group, now); err == nil {
			return s.SessionTimeout
		}
	}
	return gs.cfg.SessionTimeout
}

// expire removes the members silent for the session timeout.
func (gs *Groups) expire(g *Group, now time.Time, timeout time.Duration) {
	for id, m := range g.Members {
		if timeout > 0 && now.Sub(m.lastSeen) >= timeout {
			delete(g.Members, id)
			g.Epoch++
		}
	}
}

// fingerprint names the subscribed topics' IDs and partition counts.
func (g *Group) fingerprint(topics func(string) (TopicInfo, bool)) string {
	names := subscribedNames(g)
	var b []byte
	for _, n := range names {
		if ti, ok := topics(n); ok {
			b = append(b, n...)
			b = append(b, ti.ID[:]...)
			b = append(b, byte(ti.Partitions>>24), byte(ti.Partitions>>16), byte(ti.Partitions>>8), byte(ti.Partitions))
		}
	}
	return string(b)
}

func subscribedNames(g *Group) []string {
	set := map[string]bool{}
	for _, m := range g.Members {
		for _, t := range m.Subscribed {
			set[t] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// assign is the simple assignor: per topic, among its subscribers in member ID order,
// partition i goes to member i mod m when there are at least as many partitions as
// members, else member j takes partition j mod n (so every partition has a member and
// every member a partition, and partitions are shared).
func assign(g *Group, topics func(string) (TopicInfo, bool)) map[string]map[[16]byte][]int32 {
	out := map[string]map[[16]byte][]int32{}
	for _, name := range subscribedNames(g) {
		ti, ok := topics(name)
		if !ok || ti.Partitions <= 0 {
			continue
		}
		var subs []string
		for id, m := range g.Members {
			if containsString(m.Subscribed, name) {
				subs = append(subs, id)
			}
		}
		sort.Strings(subs)
		give := func(member string, p int32) {
			if out[member] == nil {
				out[member] = map[[16]byte][]int32{}
			}
			out[member][ti.ID] = append(out[member][ti.ID], p)
		}
		n := int(ti.Partitions)
		if n >= len(subs) {
			for p := 0; p < n; p++ {
				give(subs[p%len(subs)], int32(p))
			}
		} else {
			for j, id := range subs {
				give(id, int32(j%n))
			}
		}
	}
	return out
}

// Describe returns a copy of group id (nil: none) as coordinator epoch coordEpoch
// sees it.
func (gs *Groups) Describe(ctx context.Context, id string, coordEpoch int32, now time.Time) (*Group, error) {
	e, err := gs.entry(ctx, id, coordEpoch, false, now)
	if e == nil || err != nil {
		return nil, err
	}
	timeout := gs.sessionTimeout(ctx, id, now)
	gs.mu.Lock()
	g := e.g
	gs.expire(g, now, timeout)
	c := *g
	c.Members = map[string]*Member{}
	for k, m := range g.Members {
		mc := *m
		c.Members[k] = &mc
	}
	want := gs.changed(e)
	gs.mu.Unlock()
	return &c, gs.flush(ctx, e, want) // expired members are gone for good
}

// Delete deletes share group id, which must have no members (DeleteGroups); it returns
// the topics whose share-partition states the caller deletes.
func (gs *Groups) Delete(ctx context.Context, id string, coordEpoch int32, now time.Time) ([]string, error) {
	e, err := gs.entry(ctx, id, coordEpoch, false, now)
	switch {
	case err != nil:
		return nil, err
	case e == nil:
		return nil, ErrNotShareGroup
	}
	timeout := gs.sessionTimeout(ctx, id, now)
	gs.mu.Lock()
	gs.expire(e.g, now, timeout)
	n, topics := len(e.g.Members), append([]string(nil), e.g.Topics...)
	want := gs.changed(e)
	gs.mu.Unlock()
	if err := gs.flush(ctx, e, want); err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, ErrGroupNotEmpty
	}
	if gs.store != nil {
		rec := binary.BigEndian.AppendUint32([]byte{groupDeletedVersion}, uint32(coordEpoch))
		if err := gs.store.SaveGroup(ctx, id, coordEpoch, rec); err != nil {
			return nil, err
		}
	}
	gs.mu.Lock()
	if gs.groups[id] == e {
		delete(gs.groups, id)
	}
	gs.mu.Unlock()
	return topics, nil
}

// List returns the share groups' IDs.
func (gs *Groups) List() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ids := make([]string, 0, len(gs.groups))
	for id := range gs.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x := append([]string(nil), a...)
	sort.Strings(x)
	for i := range x {
		if x[i] != b[i] {
			return false
		}
	}
	return true
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
