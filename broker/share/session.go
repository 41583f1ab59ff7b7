package share

import (
	"errors"
	"math"
	"sync"
)

// Errors of share sessions.
var (
	ErrSessionNotFound = errors.New("share: share session not found")     // SHARE_SESSION_NOT_FOUND
	ErrSessionEpoch    = errors.New("share: invalid share session epoch") // INVALID_SHARE_SESSION_EPOCH
	ErrSessionLimit    = errors.New("share: share session cache is full") // SHARE_SESSION_LIMIT_REACHED
)

// FinalEpoch closes a share session.
const FinalEpoch = -1

// TP is a topic partition by topic ID.
type TP struct {
	Topic     [16]byte
	Partition int32
}

type session struct {
	next  int32
	parts map[TP]struct{}
	owner any // the connection that opened it
}

// Ended is a share session dropped with its connection: whose it was and its partitions.
type Ended struct {
	Group, Member string
	Parts         []TP
}

// Sessions are the share sessions of this broker (KIP-932's share fetch sessions, one
// per group member and broker): the partitions a member fetches here, so a request
// names only what changed, and the epoch that orders its requests.
type Sessions struct {
	max int
	mu  sync.Mutex
	s   map[[2]string]*session
}

// NewSessions returns a cache of at most max sessions (0: no bound).
func NewSessions(max int) *Sessions { return &Sessions{max: max, s: map[[2]string]*session{}} }

// Fetch applies a ShareFetch's session part: epoch 0 opens (or reopens) the session with
// add on connection owner (any comparable token: the session ends with it, Drop), a
// positive epoch must be the next one and adds add and drops forget, FinalEpoch closes
// it. It returns the session's partitions (for FinalEpoch, those it had).
func (ss *Sessions) Fetch(group, member string, epoch int32, add, forget []TP, owner any) ([]TP, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := [2]string{group, member}
	s := ss.s[k]
	switch {
	case epoch == 0:
		if s == nil && ss.max > 0 && len(ss.s) >= ss.max {
			return nil, ErrSessionLimit
		}
		s = &session{next: 1, parts: map[TP]struct{}{}, owner: owner}
		ss.s[k] = s
	case s == nil:
		return nil, ErrSessionNotFound
	case epoch == FinalEpoch:
		delete(ss.s, k)
		return s.list(), nil
	case epoch != s.next:
		return nil, ErrSessionEpoch
	default:
		s.next = nextEpoch(s.next)
	}
	for _, tp := range add {
		s.parts[tp] = struct{}{}
	}
	for _, tp := range forget {
		delete(s.parts, tp)
	}
	return s.list(), nil
}

// Ack applies a ShareAcknowledge's epoch: 0 is refused (acknowledging needs a session),
// a positive epoch must be the next one, FinalEpoch closes the session. It returns the
// session's partitions.
func (ss *Sessions) Ack(group, member string, epoch int32) ([]TP, error) {
	if epoch == 0 {
		return nil, ErrSessionEpoch
	}
	return ss.Fetch(group, member, epoch, nil, nil, nil)
}

// Drop ends the sessions opened on connection owner (it closed) and returns them, so the
// caller releases what their members hold (Kafka's share session cache does so on a
// disconnect, rather than leaving the records locked until their locks run out).
func (ss *Sessions) Drop(owner any) []Ended {
	if owner == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []Ended
	for k, s := range ss.s {
		if s.owner == owner {
			delete(ss.s, k)
			out = append(out, Ended{Group: k[0], Member: k[1], Parts: s.list()})
		}
	}
	return out
}

// Owner returns the connection that opened group's member's session (ok false: none).
func (ss *Sessions) Owner(group, member string) (owner any, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.s[[2]string{group, member}]; s != nil {
		return s.owner, true
	}
	return nil, false
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func (s *session) list() []TP {
	out := make([]TP, 0, len(s.parts))
	for tp := range s.parts {
		out = append(out, tp)
	}
	return out
}
