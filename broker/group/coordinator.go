package group

// coordinator.go holds the Coordinator: the registry of groups, request
// dispatch, version table, the per-group durable write pipeline used by
// OffsetCommit / OffsetDelete / DeleteGroups / SyncGroup (a generation's
// membership) / Compact / Expire, legacy replay (Restore) and Close. Loading
// and unloading a partition's groups is load.go; the records, record.go.
//
// Concurrency model: Coordinator.mu guards only the name -> *group map. Each
// group has its own mutex guarding all of its state (members, timers,
// offsets). Lock order is group.mu -> Coordinator.mu; Coordinator.mu is never
// held while acquiring a group lock. Responses are never sent while a group
// lock is held: they are queued on the group and sent by group.unlock.
//
// Durable writes of a group go through a FIFO queue drained by at most one
// goroutine per group. Everything queued while a store call is in flight is
// merged into the next Store.Write call ("group commit"; a Full or Deleted
// record goes alone), so the order of records in the log, the order in which
// results are applied in memory and the order of validation are all the same.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offset is one committed offset (or, with Delete set, a tombstone removing
// the committed offset of Topic/Partition).
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	Delete      bool // tombstone
	// TopicID is the ID the topic had when the offset was committed ("" if unknown or
	// committed before IDs were recorded): an offset of an earlier topic of the same
	// name is not served.
	TopicID string `json:",omitempty"`
}

// Store makes a group's records durable (the broker appends them to the group's
// __consumer_offsets partition and waits for fdatasync). A record is applied by Load
// whole or not at all; a failed call may or may not have been persisted, and the client
// is told it failed. The error may be ErrNotOwned or ErrLoading (the group's partition
// is not served here, or not loaded yet), or a *kerr.Error a log append answered (mapped
// like Kafka maps log-append errors, storeErrorCode); any other error is treated like
// KAFKA_STORAGE_ERROR, which Kafka reports to group clients as NOT_COORDINATOR
// (retriable: the client re-discovers the coordinator and retries). Calls for the same
// group are never concurrent.
type Store interface {
	Write(ctx context.Context, group string, rec Record) error
}

// Topics answers whether topic/partition exists (OffsetCommit to unknown ones
// gets UNKNOWN_TOPIC_OR_PARTITION).
type Topics interface {
	PartitionExists(topic string, partition int32) bool
}

// TopicIDs is what Topics may offer besides: the current ID of a topic ("" with false
// when there is no such topic). Offsets are committed with the ID of their topic, so
// that once the topic is deleted, or deleted and created again under the same name, its
// old offsets are neither served nor kept (a consumer of the new topic would skip
// records).
type TopicIDs interface {
	TopicID(topic string) (string, bool)
}

// Coordinator is the classic group coordinator. It is safe for concurrent use.
type Coordinator struct {
	cfg    Config
	store  Store
	topics Topics

	baseCtx context.Context // cancelled by Close; used for store calls
	cancel  context.CancelFunc
	writers sync.WaitGroup // running write loops

	mu     sync.Mutex
	groups map[string]*group
	closed bool
	// legacy holds the offsets Restore replayed from records written before offsets
	// lived in the group's partition: Load starts from them.
	legacy map[string][]Offset
	// txnGroups indexes the groups that may hold pending offsets of a producer (its
	// TxnOffsetCommit was queued, or a load found them), for CompleteTxn
	// (txn_complete.go).
	txnGroups map[int64]map[string]struct{}
}

// New returns a Coordinator. Config fields beyond the four basic ones
// (NewMemberJoinTimeout, OffsetMetadataMaxBytes) and a nil Clock take their
// defaults when zero. New panics if the resulting config is invalid. A nil
// store keeps offsets in memory only; a nil topics accepts every partition.
func New(cfg Config, store Store, topics Topics) *Coordinator {
	def := DefaultConfig()
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.NewMemberJoinTimeout == 0 {
		cfg.NewMemberJoinTimeout = def.NewMemberJoinTimeout
	}
	if cfg.ConsumerSessionTimeout == 0 {
		cfg.ConsumerSessionTimeout = def.ConsumerSessionTimeout
	}
	if cfg.ConsumerHeartbeatInterval == 0 {
		cfg.ConsumerHeartbeatInterval = def.ConsumerHeartbeatInterval
	}
	if cfg.OffsetMetadataMaxBytes == 0 {
		cfg.OffsetMetadataMaxBytes = def.OffsetMetadataMaxBytes
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:     cfg,
		store:   store,
		topics:  topics,
		baseCtx: ctx,
		cancel:  cancel,
		groups:  make(map[string]*group),
	}
}

// MaxVersions gives the highest version implemented per API key (min is 0).
// OffsetCommit v10 and OffsetFetch v10 switch to topic IDs and are excluded.
func MaxVersions() map[int16]int16 {
	return map[int16]int16{
		kmsg.OffsetCommit.Int16():   9,
		kmsg.OffsetFetch.Int16():    9,
		kmsg.JoinGroup.Int16():      9,
		kmsg.Heartbeat.Int16():      4,
		kmsg.LeaveGroup.Int16():     5,
		kmsg.SyncGroup.Int16():      5,
		kmsg.DescribeGroups.Int16(): 6,
		kmsg.ListGroups.Int16():     5,
		kmsg.DeleteGroups.Int16():   3,
		kmsg.OffsetDelete.Int16():   0,
	}
}

// ConsumerMaxVersions gives the versions of the KIP-848 consumer group keys served when
// Config.ConsumerProtocol is on (ConsumerGroupHeartbeat 68, ConsumerGroupDescribe 69).
func ConsumerMaxVersions() map[int16]int16 {
	return map[int16]int16{kmsg.ConsumerGroupHeartbeat.Int16(): 1, kmsg.ConsumerGroupDescribe.Int16(): 1}
}

func isConsumerKey(key int16) bool {
	_, ok := ConsumerMaxVersions()[key]
	return ok
}

// ConsumerProtocol reports whether the KIP-848 keys are served (and so advertised).
func (c *Coordinator) ConsumerProtocol() bool { return c.cfg.ConsumerProtocol }

// TxnOffsetCommitMaxVersion is the highest TxnOffsetCommit (key 28) version Handle
// serves (v5 is KIP-890's second part). The key is not in MaxVersions, so the Kafka server
// neither advertises it nor routes it here, until the transaction coordinator is wired:
// its handler must then verify the transaction (KIP-890) and its ACL matrix cover it.
const TxnOffsetCommitMaxVersion int16 = 4

// maxVersion is the highest version Handle serves of key: MaxVersions, and
// TxnOffsetCommit.
func maxVersion(key int16) (int16, bool) {
	if key == kmsg.TxnOffsetCommit.Int16() {
		return TxnOffsetCommitMaxVersion, true
	}
	if v, ok := ConsumerMaxVersions()[key]; ok {
		return v, true
	}
	v, ok := MaxVersions()[key]
	return v, ok
}

// Handle serves one request of the group API keys (MaxVersions, and TxnOffsetCommit).
// respond is called exactly once, possibly later from another goroutine, with a response
// of the same version as req. Handle never blocks on I/O or on a rebalance.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request, respond func(kmsg.Response)) {
	if ctx == nil {
		ctx = context.Background()
	}
	maxV, ok := maxVersion(req.Key())
	if !ok {
		// Not a group API; answer with an empty response of the right kind
		// so respond is still called exactly once.
		respond(req.ResponseKind())
		return
	}
	if v := req.GetVersion(); v < 0 || v > maxV {
		respond(errorResponse(req, kerr.UnsupportedVersion.Code))
		return
	}
	if !c.cfg.ConsumerProtocol && isConsumerKey(req.Key()) {
		respond(errorResponse(req, kerr.UnsupportedVersion.Code))
		return
	}
	if _, txn := req.(*kmsg.TxnOffsetCommitRequest); txn && !c.cfg.Transactions {
		respond(errorResponse(req, kerr.TransactionalIDAuthorizationFailed.Code))
		return
	}
	if c.isClosed() {
		respond(errorResponse(req, kerr.CoordinatorNotAvailable.Code))
		return
	}
	req, respond, ok = authorize(ctx, req, respond) // authz.go
	if !ok {
		return
	}
	if code := c.ownershipCode(req); code != 0 {
		respond(errorResponse(req, code))
		return
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		c.handleJoinGroup(ctx, r, respond)
	case *kmsg.SyncGroupRequest:
		c.handleSyncGroup(r, respond)
	case *kmsg.HeartbeatRequest:
		c.handleHeartbeat(r, respond)
	case *kmsg.LeaveGroupRequest:
		c.handleLeaveGroup(r, respond)
	case *kmsg.OffsetCommitRequest:
		c.handleOffsetCommit(ctx, r, respond)
	case *kmsg.OffsetFetchRequest:
		c.handleOffsetFetch(r, respond)
	case *kmsg.ListGroupsRequest:
		c.handleListGroups(r, respond)
	case *kmsg.DescribeGroupsRequest:
		c.handleDescribeGroups(r, respond)
	case *kmsg.DeleteGroupsRequest:
		c.handleDeleteGroups(ctx, r, respond)
	case *kmsg.OffsetDeleteRequest:
		c.handleOffsetDelete(ctx, r, respond)
	case *kmsg.TxnOffsetCommitRequest:
		c.handleTxnOffsetCommit(ctx, r, respond)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		c.handleConsumerHeartbeat(ctx, r, respond)
	case *kmsg.ConsumerGroupDescribeRequest:
		c.handleConsumerDescribe(r, respond)
	default:
		respond(errorResponse(req, kerr.InvalidRequest.Code))
	}
}

// ownershipCode is the error for a request naming a group this coordinator does not
// serve now, or 0. Clients send batched group requests to one coordinator per batch, so
// one foreign group fails the whole request with NOT_COORDINATOR and the client
// re-routes; otherwise one group still being restored fails it with
// COORDINATOR_LOAD_IN_PROGRESS and the client retries the batch later. (Kafka checks
// loading first, but there a loading group is always the coordinator's own.) ListGroups
// names no group: handleListGroups asks Config.Loading.
func (c *Coordinator) ownershipCode(req kmsg.Request) int16 {
	if c.cfg.Status == nil {
		return 0
	}
	var groups []string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		groups = []string{r.Group}
	case *kmsg.SyncGroupRequest:
		groups = []string{r.Group}
	case *kmsg.HeartbeatRequest:
		groups = []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		groups = []string{r.Group}
	case *kmsg.OffsetCommitRequest:
		groups = []string{r.Group}
	case *kmsg.OffsetDeleteRequest:
		groups = []string{r.Group}
	case *kmsg.TxnOffsetCommitRequest:
		groups = []string{r.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		groups = []string{r.Group}
	case *kmsg.ConsumerGroupDescribeRequest:
		groups = r.Groups
	case *kmsg.OffsetFetchRequest:
		if r.Version >= 8 {
			for _, g := range r.Groups {
				groups = append(groups, g.Group)
			}
		} else {
			groups = []string{r.Group}
		}
	case *kmsg.DescribeGroupsRequest:
		groups = r.Groups
	case *kmsg.DeleteGroupsRequest:
		groups = r.Groups
	}
	loading := false
	for _, g := range groups {
		switch c.cfg.Status(g) {
		case NotOwned:
			return kerr.NotCoordinator.Code
		case Loading:
			loading = true
		}
	}
	if loading {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// status is Config.Status, Owned when there is none.
func (c *Coordinator) status(group string) OwnStatus {
	if c.cfg.Status == nil {
		return Owned
	}
	return c.cfg.Status(group)
}

// Committed returns a copy of the committed offsets of a group
// (topic -> partition -> offset). It returns nil for an unknown group.
func (c *Coordinator) Committed(group string) map[string]map[int32]Offset {
	g := c.lookup(group)
	if g == nil {
		return nil
	}
	g.lock()
	defer g.unlock()
	if g.removed {
		return nil
	}
	out := make(map[string]map[int32]Offset, len(g.offsets))
	for t, ps := range g.offsets {
		m := make(map[int32]Offset, len(ps))
		for p, o := range ps {
			m[p] = o
		}
		out[t] = m
	}
	return out
}

// Restore applies a committed offset (or a tombstone) of a legacy record, written
// before offsets lived in the group's partition, in log order; replaying a prefix again
// is harmless. It does not call the Store. The offsets are also kept as the base from
// which Load of the group's partition starts. A write that was already on its way to the
// store when the restore reached its group is not applied in memory and is answered
// NOT_COORDINATOR.
func (c *Coordinator) Restore(group string, o Offset) {
	c.mu.Lock()
	if c.legacy == nil {
		c.legacy = map[string][]Offset{}
	}
	c.legacy[group] = append(c.legacy[group], o)
	c.mu.Unlock()
	for {
		g := c.getOrCreate(group)
		g.lock()
		if g.removed {
			g.unlock()
			continue
		}
		g.restores++
		if o.Delete {
			g.deleteOffset(o.Topic, o.Partition)
			if g.unused() {
				g.removeFromCoordinator()
			}
		} else {
			g.setOffset(o)
		}
		g.unlock()
		return
	}
}

// Close stops all timers, fails pending JoinGroup/SyncGroup requests with
// COORDINATOR_NOT_AVAILABLE, cancels in-flight store calls and waits for them
// to return. Requests handled after Close get COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()

	c.cancel()
	for _, g := range gs {
		g.lock()
		g.shutdown()
		g.unlock()
	}
	c.writers.Wait()
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// lookup returns the live group called name, or nil.
func (c *Coordinator) lookup(name string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[name]
}

// getOrCreate returns the group called name, creating an Empty one if needed.
// The caller must lock it and re-check g.removed.
func (c *Coordinator) getOrCreate(name string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		g = newGroup(c, name)
		c.groups[name] = g
	}
	return g
}

// lockedGroup returns the named group locked, or nil if it does not exist.
// With create, a missing group is created (in state Empty).
func (c *Coordinator) lockedGroup(name string, create bool) *group {
	for {
		var g *group
		if create {
			g = c.getOrCreate(name)
		} else if g = c.lookup(name); g == nil {
			return nil
		}
		g.lock()
		if !g.removed {
			return g
		}
		g.unlock() // raced with removal; retry against the map
	}
}

func (c *Coordinator) allGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	return gs
}

// ---- client identity ------------------------------------------------------

type clientInfoKey struct{}

type clientInfo struct{ id, host string }

// WithClientInfo returns a context carrying the request header's client ID
// and the client's host (address), which the coordinator uses to build
// member IDs and reports in DescribeGroups. The broker should wrap the ctx it
// passes to Handle with it.
func WithClientInfo(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientInfoKey{}, clientInfo{clientID, clientHost})
}

func clientFrom(ctx context.Context) (id, host string) {
	if ci, ok := ctx.Value(clientInfoKey{}).(clientInfo); ok {
		return ci.id, ci.host
	}
	return "", ""
}

// newMemberID mirrors Kafka: "<client.id or group.instance.id>-<uuid4>".
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return prefix + "-" + string(s[:])
}

// ---- durable writes ---------------------------------------------------------

var (
	errClosed = errors.New("group coordinator closed")
	// ErrNotOwned and ErrLoading: the group's Status changed between the request's check
	// and its write, so the write is not sent to the store; a Store returns them too when
	// it finds the same (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
	ErrNotOwned = errors.New("group: coordinator no longer owns the group")
	ErrLoading  = errors.New("group: the group's committed offsets are being restored")
	// errRestored: Restore reached the group while its write was in flight; the log the
	// restore read is newer than what the write would put in memory.
	errRestored = errors.New("group: group restored while a write was in flight")
)

// write is one queued durable operation of a group.
type write struct {
	ctx     context.Context // request context; a cancelled request is dropped unwritten
	offsets []Offset
	meta    *Meta // the group's membership from now on (nil: unchanged)
	// full: write the group's whole state (Record.Full), computed when the write reaches
	// the head of the queue, after every earlier write is applied. deleted: the group is
	// gone (Record.Deleted). Either is written alone, never merged with other writes.
	full, deleted bool
	// txn: pending offsets of a transaction (Record.Txn); ends: transactions ended
	// (Record.TxnEnds).
	txn  []TxnOffset
	ends []TxnEnd
	// consumer: a consumer group's state from now on (Record.Consumer).
	consumer *ConsumerMeta
	// apply runs with the group locked once the outcome is known (err is nil
	// on success). It updates memory and queues the response.
	apply func(err error)
}

func (w *write) alone() bool { return w.full || w.deleted }

// class orders the kinds of write as a record applies them (Meta and Offsets, Txn,
// TxnEnds): writes merged into one record keep their order only if their classes do not
// decrease.
func (w *write) class() int {
	switch {
	case len(w.ends) > 0:
		return 2
	case len(w.txn) > 0:
		return 1
	}
	return 0
}

// enqueueWrite queues w behind earlier writes of g. Called with g locked.
func (g *group) enqueueWrite(w *write) {
	if g.writing {
		g.writeQ = append(g.writeQ, w)
		return
	}
	c := g.c
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.writers.Add(1) // under c.mu: never concurrent with Close's Wait
	}
	c.mu.Unlock()
	if closed {
		w.apply(errClosed)
		return
	}
	g.writeQ = append(g.writeQ, w)
	g.writing = true
	go g.writeLoop()
}

// nextBatch takes the writes the next store call carries and the record they make:
// every queued write up to the first one that goes alone or would apply out of order in
// the record (write.class), or that one by itself. Called with g locked, after every
// earlier batch is applied. dropped[i] is the error of a write whose request was
// cancelled before it was written (it is left out).
func (g *group) nextBatch() (batch []*write, rec Record, dropped []error) {
	n := 0
	for n < len(g.writeQ) && !g.writeQ[n].alone() && (n == 0 || g.writeQ[n].class() >= g.writeQ[n-1].class()) {
		n++
	}
	if n == 0 {
		n = 1
	}
	batch = g.writeQ[:n:n]
	g.writeQ = g.writeQ[n:]
	dropped = make([]error, len(batch))
	for i, w := range batch {
		if err := w.ctx.Err(); err != nil {
			dropped[i] = err
			continue
		}
		switch {
		case w.full:
			rec = g.fullRecord()
		case w.deleted:
			rec = Record{Deleted: true}
		default:
			rec.Offsets = append(rec.Offsets, w.offsets...)
			rec.Txn = append(rec.Txn, w.txn...)
			rec.TxnEnds = append(rec.TxnEnds, w.ends...)
			if w.meta != nil {
				rec.Meta = w.meta
			}
			if w.consumer != nil {
				rec.Consumer = w.consumer
			}
		}
	}
	return batch, rec, dropped
}

func (rec *Record) empty() bool {
	return len(rec.Offsets) == 0 && rec.Meta == nil && rec.Consumer == nil && !rec.Full && !rec.Deleted && len(rec.Txn) == 0 && len(rec.TxnEnds) == 0
}

func (g *group) writeLoop() {
	defer g.c.writers.Done()
	for {
		g.lock()
		if len(g.writeQ) == 0 {
			g.writing = false
			g.writeQ = nil
			g.unlock()
			return
		}
		batch, rec, dropped := g.nextBatch()
		restores, unloaded, removed := g.restores, g.unloaded, g.removed
		g.unlock()

		var err error
		switch {
		case g.c.baseCtx.Err() != nil:
			err = errClosed
		case unloaded:
			err = ErrNotOwned
		case rec.empty():
		case removed && rec.Full:
			// Deleted since Compact queued it: nothing of the group is left to write.
		default:
			// Checked again here: the request was checked when it arrived, but the
			// group's partition may have been lost or regained (Loading) since, and a
			// write made during a load would be overwritten by older loaded records.
			switch g.c.status(g.name) {
			case NotOwned:
				err = ErrNotOwned
			case Loading:
				err = ErrLoading
			default:
				if g.c.store != nil {
					err = g.c.store.Write(g.c.baseCtx, g.name, rec)
				}
			}
		}

		g.lock()
		if err == nil && (g.restores != restores || g.unloaded) {
			err = errRestored
		}
		for i, w := range batch {
			if dropped[i] != nil {
				w.apply(dropped[i])
			} else {
				w.apply(err)
			}
		}
		after := g.afterBatch
		g.afterBatch = nil
		for _, f := range after {
			f()
		}
		g.unlock()
	}
}

// storeErrorCode maps a Store / write error to the code the client
// sees, following Kafka's mapping of log-append errors for the group
// coordinator (GroupCoordinatorService / GroupMetadataManager):
// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and
// REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER and
// KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; batch-too-large errors ->
// tooLarge. A plain (non-kerr) error is a local storage failure, i.e.
// KAFKA_STORAGE_ERROR -> NOT_COORDINATOR. Cancellation / shutdown ->
// COORDINATOR_NOT_AVAILABLE.
func storeErrorCode(err error, tooLarge int16) int16 {
	if err == nil {
		return 0
	}
	switch {
	case errors.Is(err, errClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, ErrNotOwned) || errors.Is(err, errRestored):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable.Code
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return kerr.NotCoordinator.Code
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			return tooLarge
		}
		return ke.Code
	}
	return kerr.NotCoordinator.Code
}

// ---- generic error responses --------------------------------------------------

// errorResponse builds a response of req's kind and version in which every
// error field that applies carries code.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := resp.(*kmsg.JoinGroupResponse)
		resp.ErrorCode = code
		resp.MemberID = r.MemberID
	case *kmsg.SyncGroupRequest:
		resp.(*kmsg.SyncGroupResponse).ErrorCode = code
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = code
	case *kmsg.LeaveGroupRequest:
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = code
	case *kmsg.OffsetCommitRequest:
		resp := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	case *kmsg.OffsetFetchRequest:
		resp := resp.(*kmsg.OffsetFetchResponse)
		if r.Version >= 8 {
			for _, rg := range r.Groups {
				g := kmsg.NewOffsetFetchResponseGroup()
				g.Group, g.ErrorCode = rg.Group, code
				resp.Groups = append(resp.Groups, g)
			}
		} else {
			resp.ErrorCode = code
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	case *kmsg.ListGroupsRequest:
		resp.(*kmsg.ListGroupsResponse).ErrorCode = code
	case *kmsg.DescribeGroupsRequest:
		resp := resp.(*kmsg.DescribeGroupsResponse)
		for _, name := range r.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
	case *kmsg.DeleteGroupsRequest:
		resp := resp.(*kmsg.DeleteGroupsResponse)
		for _, name := range r.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
	case *kmsg.OffsetDeleteRequest:
		resp.(*kmsg.OffsetDeleteResponse).ErrorCode = code
	case *kmsg.TxnOffsetCommitRequest:
		resp := resp.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			resp.Topics = append(resp.Topics, txnCommitTopicError(t, code))
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode = code
	case *kmsg.ConsumerGroupDescribeRequest:
		resp := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for _, name := range r.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, code
			resp.Groups = append(resp.Groups, g)
		}
	}
	return resp
}

func strp(s string) *string { return &s }

func ms(d int32) time.Duration { return time.Duration(d) * time.Millisecond }
