package share

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// Errors of ShareGroupHeartbeat.
var (
	ErrUnknownMember = errors.New("share: unknown member")         // UNKNOWN_MEMBER_ID
	ErrFencedEpoch   = errors.New("share: fenced member epoch")    // FENCED_MEMBER_EPOCH
	ErrBadHeartbeat  = errors.New("share: invalid heartbeat")      // INVALID_REQUEST
	ErrGroupTooLarge = errors.New("share: group max size reached") // GROUP_MAX_SIZE_REACHED
	ErrNotShareGroup = errors.New("share: not a share group")      // GROUP_ID_NOT_FOUND
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
}

// GroupConfig is the coordinator's configuration.
type GroupConfig struct {
	SessionTimeout    time.Duration // group.share.session.timeout.ms
	HeartbeatInterval time.Duration // group.share.heartbeat.interval.ms
	MaxSize           int           // group.share.max.size
}

// Groups is the share group coordinator's membership: every member's epoch and
// assignment. Each share group's partitions are shared: a partition may go to several
// members (when there are more members than partitions), and a member to several
// partitions; no revocation step is needed, since a partition held by two members at
// once is allowed.
type Groups struct {
	cfg    GroupConfig
	mu     sync.Mutex
	groups map[string]*Group
}

// NewGroups returns an empty coordinator.
func NewGroups(cfg GroupConfig) *Groups {
	return &Groups{cfg: cfg, groups: map[string]*Group{}}
}

// HeartbeatRequest is a ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group, Member, ClientID, ClientHost string
	Epoch                               int32
	Rack                                *string
	Subscribed                          []string // nil: unchanged
}

// HeartbeatResult is its answer; Assignment is set when the member must take it.
type HeartbeatResult struct {
	Epoch      int32
	Assignment map[[16]byte][]int32
	Sent       bool
}

// Heartbeat applies one ShareGroupHeartbeat at now; topics resolves subscribed names.
func (gs *Groups) Heartbeat(req HeartbeatRequest, now time.Time, topics func(string) (TopicInfo, bool)) (HeartbeatResult, error) {
	if req.Member == "" || req.Epoch < -1 || (req.Epoch == 0 && len(req.Subscribed) == 0) {
		return HeartbeatResult{}, ErrBadHeartbeat
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groups[req.Group]
	if g == nil {
		if req.Epoch != 0 {
			return HeartbeatResult{}, ErrUnknownMember
		}
		g = &Group{ID: req.Group, Members: map[string]*Member{}}
		gs.groups[req.Group] = g
	}
	gs.expire(g, now)
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

// expire removes the members silent for the session timeout.
func (gs *Groups) expire(g *Group, now time.Time) {
	for id, m := range g.Members {
		if gs.cfg.SessionTimeout > 0 && now.Sub(m.lastSeen) >= gs.cfg.SessionTimeout {
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

// Describe returns a copy of group id (nil: none).
func (gs *Groups) Describe(id string, now time.Time) *Group {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.groups[id]
	if g == nil {
		return nil
	}
	gs.expire(g, now)
	c := *g
	c.Members = map[string]*Member{}
	for k, m := range g.Members {
		mc := *m
		c.Members[k] = &mc
	}
	return &c
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
