package kafka

// Incremental fetch sessions (KIP-227). A consumer of many partitions names them all in
// every Fetch and gets every one of them back, though most have nothing new: the work
// and the bytes grow with the partitions, not with the data. A fetch session keeps the
// partitions of one fetcher on the broker, so that an incremental fetch names only the
// partitions whose fetch position changed (and those to forget), and its answer carries
// only the partitions with something to say.
//
// A request's (session id, epoch) says what it is, as in Kafka (FetchManager.newContext):
//
//	(0, -1)   sessionless full fetch: no session used or created (also every fetch below v7)
//	(0, 0)    full fetch that creates a session; the answer names it (epoch 1 next), or
//	          carries session id 0 when the cache is full and nothing may be evicted
//	(id, 0)   closes session id, then as (0, 0)
//	(id, -1)  closes session id, then as (0, -1)
//	(id, n)   incremental: n must be the session's epoch (else INVALID_FETCH_SESSION_EPOCH;
//	          an unknown id FETCH_SESSION_ID_NOT_FOUND; v13+ against a session made by
//	          names or the reverse FETCH_SESSION_TOPIC_ID_ERROR); the request's
//	          partitions are added to the session or update its entries (fetch offset,
//	          partition max bytes, leader epoch), ForgottenTopics are removed, and the
//	          fetch reads every partition of the session. A session left empty is closed
//	          and the fetch answered sessionless.
//
// An incremental answer lists a session partition only if it has records, an error, a
// preferred read replica, or a high watermark, last stable offset or log start offset
// other than the one last answered for it (Kafka's CachedPartition.maybeUpdateResponseData
// plus the last stable offset, which in Weir can move without the high watermark when a
// read_committed fetcher's open transaction ends); after an error the cached high
// watermark is -1, so the partition is answered again once the error clears. Partitions
// that returned records move to the end of the session's order, so under max bytes the
// others get their turn next (Kafka does the same). Every fetch resolves each partition's
// topic (by ID from v13, by name before), checks the client's READ ACL on it and asks the
// backend for its reader again: a deleted topic is answered UNKNOWN_TOPIC_ID (v13+) or
// UNKNOWN_TOPIC_OR_PARTITION, a revoked ACL TOPIC_AUTHORIZATION_FAILED, a moved partition
// NOT_LEADER_OR_FOLLOWER, on the very next fetch, exactly as a full fetch would; nothing
// the session caches can grant what a full fetch would refuse.
//
// The cache holds at most Slots sessions. A full fetch finding it full evicts, as Kafka's
// FetchSessionCache.tryEvict: the least recently used session if it was unused for
// MinEviction, else the smallest session older than MinEviction if the new one has more
// partitions; otherwise no session is created. Kafka's privileged (follower) sessions are
// not kept apart: no Weir broker fetches over the Kafka protocol (read replicas follow
// through broker/peer), so every session is a consumer's.
//
// Locks: fetchSessions.mu guards the cache (ids, use times, sizes); each session's mu
// guards its partitions and epoch. A session's mu is taken after the cache's, never
// before, and neither is held while the backend is called (the reads run between begin
// and finish on a snapshot of the session's partitions).
//
// Exported series:
//
//	weir_broker_fetch_sessions                       gauge, sessions in the cache
//	weir_broker_fetch_session_partitions             gauge, partitions in them
//	weir_broker_fetch_session_evictions_total        sessions evicted to make room
//	weir_broker_fetch_session_requests_total{kind}   fetches by kind: sessionless, full (may create), incremental

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/metricset"
)

// FetchSessionConfig bounds the broker's fetch sessions.
type FetchSessionConfig struct {
	// Slots is the most sessions kept (Kafka's max.incremental.fetch.session.cache.slots);
	// 0: none, every fetch is answered sessionless (session id 0).
	Slots int
	// MinEviction is how long a session is safe from eviction: one unused this long
	// makes room for any new one; one created longer ago than this can be evicted for a
	// larger one (Kafka's min.incremental.fetch.session.eviction.ms).
	MinEviction time.Duration
}

// DefaultFetchSessionConfig is Kafka's defaults: 1000 slots, 2 minutes.
func DefaultFetchSessionConfig() FetchSessionConfig {
	return FetchSessionConfig{Slots: 1000, MinEviction: 2 * time.Minute}
}

// Validate checks the settings.
func (c *FetchSessionConfig) Validate() error {
	if c.Slots < 0 || c.MinEviction < 0 {
		return errors.New("fetch session cache slots and min eviction must be >= 0")
	}
	return nil
}

// BindFlags registers the settings' flags on fs.
func (c *FetchSessionConfig) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Slots, "fetch-session-cache-slots", c.Slots,
		"most incremental fetch sessions (KIP-227) the broker keeps, each a consumer's set of partitions so its fetches name only what changed "+
			"(max.incremental.fetch.session.cache.slots); when full, a new session evicts an idle or smaller one, else the consumer fetches without one. 0: no sessions")
	fs.DurationVar(&c.MinEviction, "fetch-session-min-eviction", c.MinEviction,
		"a fetch session unused this long may be evicted for any new one, and one older than this for a larger one (min.incremental.fetch.session.eviction.ms)")
}

// Sentinels of a fetch naming a session it cannot use (errors.go gives their codes).
var (
	errFetchSessionNotFound = errors.New("kafka: fetch session not found (closed, evicted, or from before a restart)")
	errFetchSessionEpoch    = errors.New("kafka: fetch session epoch out of step")
	errFetchSessionTopicID  = errors.New("kafka: fetch session keyed by topic IDs and the request by names, or the reverse")
)

// finalEpoch closes a session (FetchMetadata.FINAL_EPOCH).
const finalEpoch = -1

// nextEpoch is the epoch after e: 1 after MaxInt32, as in FetchMetadata.nextEpoch.
func nextEpoch(e int32) int32 {
	if e < 0 {
		return finalEpoch
	}
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// sessionKey names a partition in a session: by topic ID from v13, by name before.
type sessionKey struct {
	id        [16]byte
	topic     string
	partition int32
}

// sessionPart is a session's partition: what its fetcher last asked of it and what it
// was last answered.
type sessionPart struct {
	key                      sessionKey
	fetchOffset, logStartReq int64 // the request's fetch offset and (followers') log start
	maxBytes                 int32
	leaderEpoch, lastEpoch   int32 // current leader epoch, last fetched epoch
	hw, lso, logStart        int64 // last answered; hw -1 after an error
	gone                     bool  // forgotten: dropped from parts at the next compaction
}

// fetchSession is one fetcher's session.
type fetchSession struct {
	id  int32
	ids bool // keyed by topic IDs (created by a v13+ fetch)

	// Guarded by fetchSessions.mu.
	created, lastUsed time.Time
	size              int // partitions when last counted into fetchSessions.partitions

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry
	parts []*sessionPart
	byKey map[sessionKey]*sessionPart
}

// fetchSessions is the broker's cache of fetch sessions.
type fetchSessions struct {
	cfg FetchSessionConfig
	now func() time.Time

	mu         sync.Mutex
	byID       map[int32]*fetchSession
	partitions int

	open      prometheus.Gauge
	parts     prometheus.Gauge
	evictions prometheus.Counter
	requests  *prometheus.CounterVec
}

func newFetchSessions(cfg FetchSessionConfig, now func() time.Time, set *metricset.Set) *fetchSessions {
	c := &fetchSessions{cfg: cfg, now: now, byID: map[int32]*fetchSession{},
		open:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_fetch_sessions", Help: "Incremental fetch sessions (KIP-227) in the broker's cache (at most --fetch-session-cache-slots)."}),
		parts:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_broker_fetch_session_partitions", Help: "Partitions in the broker's fetch sessions."}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_broker_fetch_session_evictions_total", Help: "Fetch sessions evicted to make room for a new one."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_broker_fetch_session_requests_total",
			Help: "Fetch requests by session kind: sessionless (no session), full (names every partition; creates a session), incremental (names what changed)."}, []string{"kind"}),
	}
	set.MustRegister(c.open, c.parts, c.evictions, c.requests)
	return c
}

// fetchKind is what a fetch is to the session cache.
type fetchKind uint8

const (
	fetchSessionless fetchKind = iota
	fetchFull
	fetchIncremental
)

var fetchKindNames = [...]string{"sessionless", "full", "incremental"}

// fetchSessionCtx is what begin decided for one fetch, for finish.
type fetchSessionCtx struct {
	kind  fetchKind
	ids   bool          // v13+
	sess  *fetchSession // incremental
	epoch int32         // incremental: the session's epoch once this fetch was applied
}

// remove takes session id out of the cache (a full fetch closing it).
func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	if s := c.byID[id]; s != nil {
		c.removeLocked(s)
	}
	c.mu.Unlock()
}

func (c *fetchSessions) removeLocked(s *fetchSession) {
	delete(c.byID, s.id)
	c.partitions -= s.size
	s.size = 0
	c.gauges()
}

func (c *fetchSessions) gauges() {
	c.open.Set(float64(len(c.byID)))
	c.parts.Set(float64(c.partitions))
}

// touchLocked marks s used now and counts its partitions (n) again.
func (c *fetchSessions) touchLocked(s *fetchSession, n int, now time.Time) {
	s.lastUsed = now
	c.partitions += n - s.size
	s.size = n
	c.gauges()
}

// insert adds s, of n partitions, if there is room or room can be made (evict); it
// reports whether s was added, with a fresh id.
func (c *fetchSessions) insert(s *fetchSession, n int) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.cfg.Slots && !c.evictLocked(n, now) {
		return false
	}
	for s.id == 0 || c.byID[s.id] != nil {
		s.id = 1 + rand.Int32N(math.MaxInt32-1)
	}
	s.created = now
	c.byID[s.id] = s
	c.touchLocked(s, n, now)
	return true
}

// evictLocked makes room for a new session of n partitions, by Kafka's rules
// (FetchSessionCacheShard.tryEvict, without privileged sessions): the least recently
// used session if unused for MinEviction; else the smallest (then lowest id) of the
// sessions created more than MinEviction ago, if smaller than n. A linear scan: it runs
// only when the cache is full.
func (c *fetchSessions) evictLocked(n int, now time.Time) bool {
	var lru, small *fetchSession
	for _, s := range c.byID {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || (s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id) {
			lru = s
		}
		if now.Sub(s.created) > c.cfg.MinEviction && (small == nil || s.size < small.size || (s.size == small.size && s.id < small.id)) {
			small = s
		}
	}
	victim := small
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.lastUsed) > c.cfg.MinEviction:
		victim = lru
	case small == nil || n <= small.size:
		return false
	}
	c.removeLocked(victim)
	c.evictions.Inc()
	return true
}

// begin applies a fetch's session fields and returns what the fetch reads: the
// request's partitions, or for an incremental fetch every partition of its session. An
// error is the fetch's top-level answer.
func (c *fetchSessions) begin(req *kmsg.FetchRequest) (fetchSessionCtx, []fetchPart, error) {
	fc := fetchSessionCtx{ids: req.Version >= 13}
	if req.Version < 7 || req.SessionEpoch == 0 || req.SessionEpoch == finalEpoch {
		if req.Version >= 7 && req.SessionID != 0 {
			c.remove(req.SessionID) // a full fetch closes the session it names
		}
		if req.Version >= 7 && req.SessionEpoch == 0 && c.cfg.Slots > 0 {
			fc.kind = fetchFull
		}
		c.requests.WithLabelValues(fetchKindNames[fc.kind]).Inc()
		return fc, requestParts(req), nil
	}
	c.mu.Lock()
	s := c.byID[req.SessionID]
	if s == nil {
		c.mu.Unlock()
		return fc, nil, errFetchSessionNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != req.SessionEpoch:
		c.mu.Unlock()
		return fc, nil, fmt.Errorf("%w: session %d expects epoch %d, the fetch has %d", errFetchSessionEpoch, s.id, s.epoch, req.SessionEpoch)
	case s.ids != fc.ids:
		c.mu.Unlock()
		return fc, nil, errFetchSessionTopicID
	}
	s.update(req)
	if len(s.byKey) == 0 {
		c.removeLocked(s)
		c.mu.Unlock()
		c.requests.WithLabelValues(fetchKindNames[fetchSessionless]).Inc()
		return fc, requestParts(req), nil
	}
	c.touchLocked(s, len(s.byKey), c.now())
	s.epoch = nextEpoch(s.epoch)
	c.mu.Unlock()
	fc.kind, fc.sess, fc.epoch = fetchIncremental, s, s.epoch
	c.requests.WithLabelValues(fetchKindNames[fc.kind]).Inc()
	return fc, s.snapshot(), nil
}

// update applies an incremental fetch's partitions and ForgottenTopics to s (s.mu held):
// a partition already in s takes the request's fetch parameters, a new one is added at
// the end; then the forgotten ones are removed.
func (s *fetchSession) update(req *kmsg.FetchRequest) {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k := s.key(rt.TopicID, rt.Topic, rp.Partition)
			p := s.byKey[k]
			if p == nil {
				p = &sessionPart{key: k, hw: -1, lso: -1, logStart: -1}
				s.byKey[k] = p
				s.parts = append(s.parts, p)
			}
			p.set(rp)
		}
	}
	forgot := false
	for _, ft := range req.ForgottenTopics {
		for _, index := range ft.Partitions {
			k := s.key(ft.TopicID, ft.Topic, index)
			if p := s.byKey[k]; p != nil {
				p.gone, forgot = true, true
				delete(s.byKey, k)
			}
		}
	}
	if forgot {
		kept := s.parts[:0]
		for _, p := range s.parts {
			if !p.gone {
				kept = append(kept, p)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
	}
}

// key is the session key of a partition the way s keys them.
func (s *fetchSession) key(id [16]byte, topic string, partition int32) sessionKey {
	if s.ids {
		return sessionKey{id: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// set takes a request's fetch parameters.
func (p *sessionPart) set(rp *kmsg.FetchRequestTopicPartition) {
	p.fetchOffset, p.logStartReq, p.maxBytes = rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes
	p.leaderEpoch, p.lastEpoch = rp.CurrentLeaderEpoch, rp.LastFetchedEpoch
}

// answered records what a partition was answered; it reports whether an incremental
// answer must carry it.
func (p *sessionPart) answered(out *kmsg.FetchResponseTopicPartition) bool {
	must := len(out.RecordBatches) > 0 || out.PreferredReadReplica >= 0 || out.ErrorCode != 0 ||
		out.HighWatermark != p.hw || out.LastStableOffset != p.lso || out.LogStartOffset != p.logStart
	p.hw, p.lso, p.logStart = out.HighWatermark, out.LastStableOffset, out.LogStartOffset
	if out.ErrorCode != 0 {
		p.hw = -1 // answered again when the error clears
	}
	return must
}
