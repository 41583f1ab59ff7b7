// Package metadata defines the cluster metadata a broker serves from (brokers, topics,
// partitions, configs, leader epochs, log start offsets) and the Store interface through
// which it is read and changed.
//
// The single-node LocalStore in this package persists to one file; the Raft controller
// implements the same interface for a cluster. Brokers never mutate a View: every change
// goes through the Store, which publishes a new immutable View and closes the channel
// returned by Changed.
package metadata

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weir-io/weir/security/acl"
)

// Sentinel errors; the broker translates them to Kafka error codes at the protocol edge.
var (
	ErrTopicExists        = errors.New("metadata: topic already exists")
	ErrUnknownTopic       = errors.New("metadata: unknown topic")
	ErrInvalidTopic       = errors.New("metadata: invalid topic name")
	ErrInvalidPartitions  = errors.New("metadata: invalid partition count")
	ErrInvalidReplication = errors.New("metadata: invalid replication factor")
	ErrInvalidConfig      = errors.New("metadata: invalid config")
	ErrInvalidOffset      = errors.New("metadata: invalid offset")
	ErrNotController      = errors.New("metadata: not available")
	// ErrFenced: the broker's epoch is no longer current (its lease ran out, it was
	// fenced or it registered again); it must stop acking and register again.
	ErrFenced = errors.New("metadata: broker fenced")
	// ErrMoveRefused: a partition move does not match the current state (the partition
	// is not moving, the caller does not lead it, or the target is not an active broker).
	ErrMoveRefused = errors.New("metadata: partition move refused")
	// ErrRecoveryRefused: a CompleteRecovery does not match the current state (the
	// partition is not recovering, the caller does not lead it, or the leader epoch is
	// not the current one: a completion of an earlier takeover). Nothing changed.
	ErrRecoveryRefused = errors.New("metadata: partition recovery refused")
	// ErrDuplicateBroker: a registration was refused because the broker ID is in use by
	// a live process (another incarnation whose lease is still fresh). A restart after a
	// crash waits until the dead process's lease has run out (about a second).
	ErrDuplicateBroker = errors.New("metadata: broker ID in use by a live process")
	// ErrObjectRejected: an object manifest change does not match the current state; the
	// error's message gives the reason (stale or fenced broker epoch, a range that leaves
	// a gap or overlaps, an unknown object, an object in the wrong state). Nothing changed.
	// A refusal for a stale or fenced epoch also matches ErrFenced, one for a partition
	// that does not exist (any more) also ErrUnknownTopic.
	ErrObjectRejected = errors.New("metadata: object rejected")
	// ErrUnknownBroker: no broker of that ID ever registered.
	ErrUnknownBroker = errors.New("metadata: unknown broker")
	// ErrBrokerState: the broker's state forbids the change (decommissioning a live
	// broker, or one that still leads partitions). Nothing changed.
	ErrBrokerState = errors.New("metadata: broker state forbids the change")
)

// TopicID is a topic's UUID. It changes when a topic is deleted and created again, so
// WAL records of a deleted topic never leak into its successor.
type TopicID [16]byte

func (id TopicID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// IsZero reports whether id is the all-zero UUID Kafka uses for "no topic ID".
func (id TopicID) IsZero() bool { return id == TopicID{} }

// NewTopicID returns a random topic UUID.
func NewTopicID() TopicID {
	var id TopicID
	_, _ = rand.Read(id[:])
	return id
}

// Broker is one broker as clients see it, plus its liveness as the controller sees it.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Epoch is a new number each time the broker registers (each process start).
	Epoch int64 `json:"epoch,omitempty"`
	// State is BrokerActive, BrokerFenced, BrokerDraining or BrokerDecommissioned; the
	// empty string means active.
	State BrokerState `json:"state,omitempty"`
	// Listeners are the broker's extra Kafka listeners: named ones (Kafka's listener
	// names, each with its security protocol) and per-zone ones (zone routing, named
	// after their zone). A client connected to a listener of some name is told, for
	// every broker, its listener of that name (Endpoint), so it stays on listeners of
	// that name (and protocol), as with Kafka's named listeners. Host and Port are the
	// main listener.
	Listeners []Listener `json:"listeners,omitempty"`
}

// Listener is one extra Kafka listener of a broker.
type Listener struct {
	// Name keys the listener among the broker's listeners; a zone listener's name is its
	// zone (registrations older than names carry only Zone).
	Name string `json:"name,omitempty"`
	// Protocol is Kafka's security protocol of the listener: PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL ("" PLAINTEXT).
	Protocol string `json:"protocol,omitempty"`
	// Zone: clients that connect here are clients of this zone ("" none).
	Zone string `json:"zone,omitempty"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// Key is the listener's name: Name, else (an older registration) its Zone.
func (l Listener) Key() string {
	if l.Name != "" {
		return l.Name
	}
	return l.Zone
}

// Kafka's security protocols of a listener.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// ValidProtocol reports whether p is one of Kafka's security protocols ("" PLAINTEXT).
func ValidProtocol(p string) bool {
	switch p {
	case "", ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

// MaxListeners bounds the extra listeners of one broker.
const MaxListeners = 16

// Endpoint is the address to give a client connected to the listener named name (""
// the main listener): the broker's listener of that name if it has one, else its main
// Host and Port.
func (b Broker) Endpoint(name string) (host string, port int32) {
	if name != "" {
		for _, l := range b.Listeners {
			if l.Key() == name {
				return l.Host, l.Port
			}
		}
	}
	return b.Host, b.Port
}

// BrokerState is a broker's liveness state.
type BrokerState string

const (
	BrokerActive BrokerState = "active"
	BrokerFenced BrokerState = "fenced"
	// BrokerDraining: the registration is live (the broker heartbeats, serves and acks
	// what it still leads), but it is shutting down: its partitions are being moved
	// away gracefully and it is given none (placement, failover, moves, the
	// balancer). A new registration (the next epoch) is active again.
	BrokerDraining BrokerState = "draining"
	// BrokerDecommissioned: an operator declared a fenced broker gone for good (weir
	// admin decommission). Like fenced it is given nothing and clients are not sent to
	// it, and listings leave it out; the entry stays so that the ID's epochs keep
	// growing if a broker of that ID ever registers again (its WAL directories and
	// fence token are named by epoch).
	BrokerDecommissioned BrokerState = "decommissioned"
)

// Decommissioned reports whether an operator retired the broker (BrokerDecommissioned).
func (b Broker) Decommissioned() bool { return b.State == BrokerDecommissioned }

// Active reports whether the registration is live, so clients may be sent to this
// broker for what it leads: active or draining (a draining broker serves its
// partitions until they have moved). Whether it may be given partitions is Accepting.
func (b Broker) Active() bool {
	return b.State == "" || b.State == BrokerActive || b.State == BrokerDraining
}

// Draining reports whether the broker is live but being drained (BrokerDraining).
func (b Broker) Draining() bool { return b.State == BrokerDraining }

// Accepting reports whether the broker may be given partitions: active and not
// draining. New partitions, failover takers, move targets and the controller's
// balancer pick only accepting brokers.
func (b Broker) Accepting() bool { return b.State == "" || b.State == BrokerActive }

// PartitionLoad is one partition's recent traffic as its leader measures it, reported
// to the controller (only partitions with traffic), which weighs it when balancing
// leadership. Short JSON keys: it travels with heartbeats.
type PartitionLoad struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	// BytesPerSec is the recent rate of record bytes produced to the partition (a
	// moving average over the last minute or so, not an instant rate: the balancer
	// should not chase spikes).
	BytesPerSec int64 `json:"b"`
}

// Partition is the metadata of one partition.
type Partition struct {
	Index          int32 `json:"index"`
	Leader         int32 `json:"leader"`
	LeaderEpoch    int32 `json:"leader_epoch"`
	LogStartOffset int64 `json:"log_start_offset"`
	// Logs lists, oldest first, the WALs that hold this partition's data: the broker of
	// each entry wrote the offsets from its StartOffset up to the next entry's. The last
	// entry belongs to the current leader. A leadership move appends an entry; no data is
	// copied, the new leader reads the old leader's WAL on the shared file system.
	Logs []LogRange `json:"logs,omitempty"`
	// MovingTo is the broker a graceful move hands the partition to, or -1 (also when 0
	// and Logs is empty, for state written before moves existed: see Moving).
	MovingTo int32 `json:"moving_to,omitempty"`
	Moving   bool  `json:"moving,omitempty"`
	// MoveGen identifies the pending graceful move (0 when none, and in state written
	// before moves had generations): the controller gives every move it begins a new
	// value, and a completion names the move it completes, so a late completion of a
	// cancelled move can never complete a later one with an old end offset.
	MoveGen uint64 `json:"move_gen,omitempty"`
	// Recovering: Leader took the partition over from a fenced broker and must recover
	// it before serving: seal the fenced broker's WAL directories of epochs up to
	// RecoverEpoch, read them to their end, and report that end with CompleteRecovery
	// (Recoverer). Until then Logs is unchanged, its last range the fenced broker's,
	// open-ended. Leader is -1 while no broker is active to take it over; LeaderEpoch
	// was bumped by the takeover.
	Recovering bool `json:"recovering,omitempty"`
	// RecoverEpoch is the registration epoch of the fenced broker whose WAL holds the
	// last log range (0 unless Recovering). A takeover of a partition that was already
	// Recovering (its taker died before completing) keeps it: the last range is still
	// the earlier dead broker's.
	RecoverEpoch int64 `json:"recover_epoch,omitempty"`
	// Objects is the partition's manifest in object storage: the committed objects that
	// hold its offsets, ascending and contiguous (each range starts where the previous
	// one ended + 1). Ranges leave from the front only: raising the log start offset
	// drops those wholly below it (TrimManifest), DeleteObjects those of deleted
	// objects. Never modify the elements in place: Views share them.
	Objects []ObjectRange `json:"objects,omitempty"`
	// Producers is the idempotent producer state as of the end of the last committed
	// object range, replaced by every commit of a range of this partition (and cleared
	// by one without a snapshot, since it would then describe an older offset). Its
	// batches may be gone from every WAL, so a leader that loads the partition starts
	// from it. Nil in state written before snapshots: the state then comes from the WALs
	// alone. Shared by Views: never modified in place.
	Producers *ProducerSnapshot `json:"producers,omitempty"`
}

// UploadedThrough is the first offset not in object storage yet: the last range's
// LastOffset + 1, or -1 when the manifest is empty.
func (p Partition) UploadedThrough() int64 {
	if n := len(p.Objects); n > 0 {
		return p.Objects[n-1].LastOffset + 1
	}
	return -1
}

// ObjectRange says that an object holds a partition's offsets FirstOffset..LastOffset
// (both inclusive), so that retention can decide from the metadata alone.
type ObjectRange struct {
	Object      uint64 `json:"object"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	// MaxTimestamp is the largest max timestamp (ms) of the range's record batches; 0 in
	// state written before it was recorded.
	MaxTimestamp int64 `json:"max_timestamp,omitempty"`
	// Bytes is the size of the range's record batches in the object (0: not recorded).
	Bytes int64 `json:"bytes,omitempty"`
	// Aborted lists the aborted transactions whose abort markers lie in the range, by
	// marker offset: a read_committed read of the range's data filters them once the
	// WAL that held the markers is gone. Shared by Views: never modified in place.
	Aborted []AbortedTxn `json:"aborted,omitempty"`
	// Compacted: the log cleaner wrote this range (ObjectRules.Replace): its offsets
	// are sparse, and the cleaner's next pass counts it clean, not dirty. The cleaner's
	// checkpoint is the end of the manifest's compacted prefix.
	Compacted bool `json:"compacted,omitempty"`
}

// AbortedTxn is one aborted transaction of a partition: its producer's batches from
// First on, up to the abort marker at Last, are not to be read by read_committed
// consumers. Short JSON keys: ranges carry them through Raft with every object commit.
type AbortedTxn struct {
	ProducerID int64 `json:"p"`
	First      int64 `json:"f"`
	Last       int64 `json:"l"`
}

// Equal reports whether r and q are the same range (ObjectRange holds a slice, so it
// is not comparable with ==).
func (r ObjectRange) Equal(q ObjectRange) bool {
	return r.Object == q.Object && r.FirstOffset == q.FirstOffset && r.LastOffset == q.LastOffset &&
		r.MaxTimestamp == q.MaxTimestamp && r.Bytes == q.Bytes && slices.Equal(r.Aborted, q.Aborted) && r.Compacted == q.Compacted
}

// ObjectState is where an object is in its life: prepared (an ID and key handed out,
// the PUT may or may not have happened), committed (its ranges are in the partitions'
// manifests), deleted (gone from object storage; the controller drops it from the state
// when it is deleted, so Views hold only prepared and committed objects).
type ObjectState string

const (
	ObjectPrepared  ObjectState = "prepared"
	ObjectCommitted ObjectState = "committed"
	ObjectDeleted   ObjectState = "deleted"
)

// Object is one object in object storage. Key is decided by the store from ID (ObjectKey);
// Broker and Epoch are the registration that prepared it (only it may commit it).
type Object struct {
	ID     uint64      `json:"id"`
	Key    string      `json:"key"`
	Size   int64       `json:"size,omitempty"`
	State  ObjectState `json:"state"`
	Broker int32       `json:"broker"`
	Epoch  int64       `json:"epoch"`
}

// PartitionRange is one partition's offsets FirstOffset..LastOffset (inclusive) in an
// object being committed; it becomes the ObjectRange (PartitionRange.ObjectRange) of the
// partition's manifest.
type PartitionRange struct {
	Topic       TopicID `json:"topic_id"`
	Partition   int32   `json:"partition"`
	FirstOffset int64   `json:"first_offset"`
	LastOffset  int64   `json:"last_offset"`
	// MaxTimestamp is the largest max timestamp (ms) of the range's record batches.
	MaxTimestamp int64 `json:"max_timestamp,omitempty"`
	// Bytes is the size of the range's record batches in the object (not negative).
	Bytes int64 `json:"bytes,omitempty"`
	// Producers is the partition's idempotent producer state as of this range's end
	// (Offset = LastOffset + 1); nil when no producer has state. It becomes the
	// partition's Producers.
	Producers *ProducerSnapshot `json:"producers,omitempty"`
	// Aborted is the aborted transactions whose markers lie in the range, ascending by
	// marker offset, at most MaxRangeAborted; it becomes the ObjectRange's Aborted.
	Aborted []AbortedTxn `json:"aborted,omitempty"`
}

// MaxRangeAborted bounds the aborted transactions one committed range carries (each
// counts one towards MaxCommitRanges: PartitionRange.Weight); the uploader ends a range
// before the marker that would pass it.
const MaxRangeAborted = 4000

// ProducerWindow is how many of an idempotent producer's last batches a partition
// remembers: clients keep at most five requests in flight, so a retry is always of one
// of the last five.
const ProducerWindow = 5

// MaxSnapshotProducers bounds a ProducerSnapshot: the producers whose last batch is the
// most recent. A producer left out (more than this many others wrote to the partition
// after it) is unknown after a load and may start at any sequence again (KIP-360);
// Kafka forgets producers by time instead (producer.id.expiration.ms, 24 h by default).
const MaxSnapshotProducers = 1000

// ProducerSnapshot is a partition's idempotent producer state as of Offset: every batch
// below Offset counted, none from Offset on. Short JSON keys: it travels through Raft
// with every object commit.
type ProducerSnapshot struct {
	Offset    int64           `json:"o"`
	Producers []ProducerState `json:"p"` // ascending IDs, 1..MaxSnapshotProducers
}

// ProducerState is one producer of a ProducerSnapshot: its epoch and its last batches
// (1..ProducerWindow, oldest first), each [first sequence, last sequence, base offset]
// (the last sequence wraps past MaxInt32 as Kafka's do, so it may be the smaller).
type ProducerState struct {
	ID      int64      `json:"i"`
	Epoch   int16      `json:"e,omitempty"`
	Batches [][3]int64 `json:"b"`
	// TxnFirst is the first offset of the producer's transaction open as of the
	// snapshot's offset (nil: none). A producer with an open transaction is kept even
	// when its batches at or below the snapshot's end left its window (Batches may then
	// be empty), since its transaction holds the last stable offset back.
	TxnFirst *int64 `json:"t,omitempty"`
}

// LogRange says that Broker's WAL holds a partition's offsets from StartOffset on (up to
// the next range's StartOffset).
type LogRange struct {
	Broker      int32 `json:"broker"`
	StartOffset int64 `json:"start_offset"`
}

// Topic is the metadata of one topic. Configs holds only explicitly set keys; defaults
// come from the config catalogue (TopicConfigs).
type Topic struct {
	Name       string            `json:"name"`
	ID         TopicID           `json:"id"`
	Partitions []Partition       `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Config returns the effective value of a topic config key and whether it was set
// explicitly on the topic.
func (t *Topic) Config(key string) (string, bool) {
	if v, ok := t.Configs[key]; ok {
		return v, true
	}
	if d, ok := TopicConfigs[key]; ok {
		return d.Default, false
	}
	return "", false
}

// Compacted reports whether t's cleanup.policy includes compact (compact or
// compact,delete): its producers must key every record, and the log cleaner keeps each
// key's latest record.
func (t *Topic) Compacted() bool {
	policy, _ := t.Config("cleanup.policy")
	return strings.Contains(policy, "compact")
}

// View is an immutable snapshot of the metadata. Version increases with every change.
type View struct {
	Version      uint64
	ClusterID    string
	ControllerID int32
	Brokers      []Broker
	Topics       map[string]*Topic
	// Objects holds the prepared and committed objects by ID (deleted ones are dropped).
	// It may be nil (no objects, or a store without object manifests).
	Objects map[uint64]Object
	// Scram holds the users' SCRAM credentials (scram.go); nil: none. Shared, never
	// modified: set before the View is published.
	Scram ScramUsers
	// ACLs are the cluster's ACL bindings (acls.go); nil: none. Immutable, indexed.
	ACLs *acl.Set
	byID map[TopicID]*Topic
	// deleted holds the IDs of deleted topics (tombstones; SetTopicTombstones).
	deleted map[TopicID]bool
}

// SetTopicTombstones records the IDs of deleted topics in the View (before it is
// published). A topic ID is never reused, so a tombstone says for good that a topic is
// gone, while a topic merely missing from a View may have been created after it.
func (v *View) SetTopicTombstones(ids []TopicID) {
	if len(ids) == 0 {
		v.deleted = nil
		return
	}
	v.deleted = make(map[TopicID]bool, len(ids))
	for _, id := range ids {
		v.deleted[id] = true
	}
}

// TopicDeleted reports whether the topic with this ID was deleted (tombstoned). False
// for a topic the View does not know at all: it may be newer than the View.
func (v *View) TopicDeleted(id TopicID) bool { return v.deleted[id] }

// TopicTombstones lists the IDs of deleted topics, sorted.
func (v *View) TopicTombstones() []TopicID {
	out := make([]TopicID, 0, len(v.deleted))
	for id := range v.deleted {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// TopicByID finds a topic by its UUID.
func (v *View) TopicByID(id TopicID) *Topic {
	if v.byID == nil {
		return nil
	}
	return v.byID[id]
}

// Broker finds a broker by ID.
func (v *View) Broker(id int32) (Broker, bool) {
	for _, b := range v.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// PartitionsLedBy counts the partitions broker id leads (Recovering ones included). A
// draining broker is done once it leads none.
func (v *View) PartitionsLedBy(id int32) int {
	n := 0
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n
}

// NewView returns a View with its topic-ID index built. The View takes ownership of
// brokers and topics: neither may be modified afterwards.
func NewView(version uint64, clusterID string, controllerID int32, brokers []Broker, topics map[string]*Topic) *View {
	return NewViewWithObjects(version, clusterID, controllerID, brokers, topics, nil)
}

// NewViewWithObjects is NewView with the object table; the View takes ownership of
// objects too.
func NewViewWithObjects(version uint64, clusterID string, controllerID int32, brokers []Broker, topics map[string]*Topic, objects map[uint64]Object) *View {
	if topics == nil {
		topics = map[string]*Topic{}
	}
	v := &View{Version: version, ClusterID: clusterID, ControllerID: controllerID, Brokers: brokers, Topics: topics, Objects: objects}
	v.index()
	return v
}

// Object finds an object (prepared or committed) by ID.
func (v *View) Object(id uint64) (Object, bool) {
	o, ok := v.Objects[id]
	return o, ok
}

// GarbageObjects lists, by ID, the objects no one will ever read or commit, which a
// garbage collector may delete (first the key from object storage, then DeleteObjects):
//   - prepared objects whose broker registration is over (the broker is fenced or
//     registered again since): only that registration could have committed them;
//   - committed objects no partition's manifest references any more: every range was
//     dropped, because its topic was deleted or its partition's log start offset passed
//     it (SetLogStartOffset drops the manifest's front ranges wholly below the new log
//     start, TrimManifest). An object shared with a partition whose data is still live
//     stays referenced by that partition and is not garbage.
//
// Prepared objects of a live registration are left to their broker, which knows
// whether it is still uploading them.
func (v *View) GarbageObjects() []Object {
	refs := v.referencedObjects()
	live := make(map[int32]int64, len(v.Brokers)) // active broker → its epoch
	for _, b := range v.Brokers {
		if b.Active() {
			live[b.ID] = b.Epoch
		}
	}
	var out []Object
	for _, o := range v.Objects {
		switch o.State {
		case ObjectPrepared:
			if e, ok := live[o.Broker]; ok && e == o.Epoch {
				continue
			}
		case ObjectCommitted:
			if refs[o.ID] > 0 {
				continue
			}
		default:
			continue
		}
		out = append(out, o)
	}
	sortObjects(out)
	return out
}

// ExpiredObjects lists, by ID, the committed objects retention may delete now: every
// range of the object is below its partition's log start offset, and each range is at
// the front of its manifest once the other listed objects are gone (DeleteObjects
// accepts exactly such a batch). An object that also holds live data of another
// partition stays, and so does every object behind it in a manifest.
//
// Raising a log start drops the ranges wholly below it from the manifest, so objects
// whose data it passed show up in GarbageObjects, not here. Ranges below the log start
// stay in a manifest only when they were committed below a log start raised before
// (an upload of offsets DeleteRecords had already passed) or come from state written
// before SetLogStartOffset trimmed manifests; those are listed here.
func (v *View) ExpiredObjects() []Object {
	refs := v.referencedObjects()
	// Candidates: objects with every range below its log start offset.
	cand := map[uint64]bool{}
	below := map[uint64]int{}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Objects {
				if r.LastOffset < p.LogStartOffset {
					below[r.Object]++
				}
			}
		}
	}
	for id, n := range below {
		if o, ok := v.Objects[id]; ok && o.State == ObjectCommitted && n == refs[id] {
			cand[id] = true
		}
	}
	// Keep only candidates whose every range lies in a manifest prefix of candidates.
	for changed := true; changed; {
		changed = false
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				i := 0
				for i < len(p.Objects) && cand[p.Objects[i].Object] {
					i++
				}
				for _, r := range p.Objects[i:] {
					if cand[r.Object] {
						delete(cand, r.Object)
						changed = true
					}
				}
			}
		}
	}
	out := make([]Object, 0, len(cand))
	for id := range cand {
		out = append(out, v.Objects[id])
	}
	sortObjects(out)
	return out
}

// referencedObjects counts the manifest ranges that reference each object.
func (v *View) referencedObjects() map[uint64]int {
	refs := map[uint64]int{}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Objects {
				refs[r.Object]++
			}
		}
	}
	return refs
}

func sortObjects(os []Object) {
	sort.Slice(os, func(i, j int) bool { return os[i].ID < os[j].ID })
}

func (v *View) index() {
	v.byID = make(map[TopicID]*Topic, len(v.Topics))
	for _, t := range v.Topics {
		v.byID[t.ID] = t
	}
}

// TopicSpec asks for a new topic.
type TopicSpec struct {
	Name              string
	Partitions        int32 // -1: default
	ReplicationFactor int16 // -1: default; any value other than -1 or 1 is accepted and ignored (storage is shared)
	Configs           map[string]string
}

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Key   string
	Op    ConfigOpType
	Value string
}

// ConfigOpType mirrors Kafka's IncrementalAlterConfigs op types.
type ConfigOpType int8

const (
	OpSet ConfigOpType = iota
	OpDelete
	OpAppend
	OpSubtract
)

// Store reads and changes the metadata. Implementations must be safe for concurrent use.
type Store interface {
	// View returns the current snapshot; never nil once the store is open.
	View() *View
	// Changed returns a channel closed at the next change of View.
	Changed() <-chan struct{}
	// CreateTopic creates a topic; with validateOnly it only checks the spec.
	CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool) (*Topic, error)
	// DeleteTopic deletes a topic by name.
	DeleteTopic(ctx context.Context, name string) (*Topic, error)
	// CreatePartitions grows a topic to total partitions.
	CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) error
	// AlterTopicConfigs applies incremental config ops to a topic.
	AlterTopicConfigs(ctx context.Context, name string, ops []ConfigOp, validateOnly bool) error
	// SetLogStartOffset raises a partition's log start offset (DeleteRecords, retention)
	// and drops the front ranges of its object manifest that lie wholly below it
	// (TrimManifest); an object no manifest references any more is then garbage.
	SetLogStartOffset(ctx context.Context, id TopicID, partition int32, offset int64) error
	// AllocateProducerID returns a producer ID never handed out before.
	AllocateProducerID(ctx context.Context) (int64, error)
}

// ObjectManifest is implemented by stores that keep the object manifests (the Raft
// controller's client, and LocalStore for the single broker). The rules are the same
// for both (ObjectRules; stated in controller/cmd_objects.go). An upload is: PrepareObject (an ID and key) → PUT the object →
// CommitObject (its ranges join the partitions' manifests) → trim the WAL. Objects
// prepared and never committed, and objects no manifest references (their topics were
// deleted, or SetLogStartOffset passed all their ranges), are found with
// View.GarbageObjects; ranges that stay in a manifest below the log start (committed
// below it) are found with View.ExpiredObjects. A key is deleted from object storage
// before DeleteObjects is called.
type ObjectManifest interface {
	// PrepareObject reserves a new object for this broker's current registration.
	PrepareObject(ctx context.Context) (Object, error)
	// CommitObject commits a prepared object with its size and, per partition, the
	// offsets it holds; each range must continue its partition's manifest. On
	// ErrObjectRejected nothing changed.
	CommitObject(ctx context.Context, id uint64, size int64, ranges []PartitionRange) error
	// DeleteObjects forgets deleted objects: prepared ones, committed ones no manifest
	// references, and committed ones whose every range is below its partition's log
	// start offset and at the front of its manifest. IDs already deleted are ignored.
	DeleteObjects(ctx context.Context, ids []uint64) error
}

// ObjectCompactor is implemented by stores whose manifests the log cleaner rewrites (the
// Raft controller's client, LocalStore, metatest's BrokerStore): a prepared object holding
// the compacted form of a run of a partition's ranges replaces them in one step.
type ObjectCompactor interface {
	// ReplaceRanges commits prepared object id (size bytes) as the compacted form of the
	// consecutive manifest ranges named by r (ObjectRules.Replace). On
	// ErrObjectRejected nothing changed: the old objects keep serving.
	ReplaceRanges(ctx context.Context, id uint64, size int64, r RangeReplace) error
}

// Registrar is implemented by stores that learn brokers' addresses from the brokers
// themselves: a broker registers once its listener is bound.
type Registrar interface {
	RegisterBroker(ctx context.Context, b Broker) error
}

// Epocher is implemented by stores that register brokers in epochs (the Raft
// controller's client, metatest's BrokerStore): a broker names its WAL after its
// registration's epoch.
type Epocher interface {
	// Epoch is the broker's current registration epoch (0 before it registered).
	Epoch() int64
}

// MoveCompleter is implemented by stores in which a partition's leader hands it to a
// move's target (the Raft controller's client as a Mover, metatest's Store).
type MoveCompleter interface {
	// CompleteMoveGen hands the partition to the move's target for the move moveGen
	// (Partition.MoveGen as the leader saw it when it began handing off): the target
	// leads from endOffset on with the next leader epoch. Only the current leader may
	// complete; refused (ErrMoveRefused) when the pending move is another one or none.
	CompleteMoveGen(ctx context.Context, id TopicID, partition int32, endOffset int64, moveGen uint64) error
}

// Mover is implemented by stores that support graceful partition moves (the Raft
// controller's client). The current leader of a partition completes a move to the target
// the controller recorded, telling the offset where the new leader's log starts.
type Mover interface {
	MoveCompleter
	// MovePartition starts moving a partition to target (an active broker).
	MovePartition(ctx context.Context, id TopicID, partition int32, target int32) error
	// CompleteMove hands the partition to the move's target: the target leads from
	// endOffset on with the next leader epoch. Only the current leader may complete.
	//
	// Deprecated: it completes whatever move is pending, so a retry of a completion of
	// a cancelled move can complete a later move with an old end offset (losing the
	// records acked after it). Use CompleteMoveGen with the Partition.MoveGen the end
	// offset was captured for.
	CompleteMove(ctx context.Context, id TopicID, partition int32, endOffset int64) error
	// CancelMove abandons a started move; the leader stays.
	CancelMove(ctx context.Context, id TopicID, partition int32) error
}

// MoveDone is one hand-off in BatchMover.CompleteMovesGen.
type MoveDone struct {
	Topic     TopicID
	Partition int32
	EndOffset int64
	MoveGen   uint64
}

// BatchMover is a Mover that completes many hand-offs of this broker in one round trip
// (the Raft controller: one log entry), so that moves requested together are not paced
// by one commit each. errs has one entry per item, each as CompleteMoveGen would
// return it; err (with errs nil) is a failure of the whole call: retry or stop, as for
// CompleteMoveGen.
type BatchMover interface {
	CompleteMovesGen(ctx context.Context, done []MoveDone) (errs []error, err error)
}

// Recoverer is implemented by stores whose controller fails partitions over: when a
// broker is fenced, each partition it led gets a new leader at once, marked Recovering
// (see Partition). The new leader seals and reads the fenced broker's WAL to its end and
// then reports where that WAL's part of the partition ends; only then does it serve.
type Recoverer interface {
	// CompleteRecovery ends the recovery of a partition this broker leads in
	// leaderEpoch (the Partition.LeaderEpoch of the takeover): the fenced broker's log
	// range ends at endOffset (>= the range's start) and this broker's own range starts there.
	// Refused with ErrRecoveryRefused when the partition is not recovering, another
	// broker leads it or the leader epoch is not the current one; with ErrFenced when
	// the caller's registration is over. A retry of a completion that was applied
	// although its answer was lost succeeds.
	CompleteRecovery(ctx context.Context, topic TopicID, partition int32, leaderEpoch int32, endOffset int64) error
}

// Recovered is one partition's completion in BatchRecoverer.CompleteRecoveries.
type Recovered struct {
	Topic       TopicID
	Partition   int32
	LeaderEpoch int32
	EndOffset   int64
}

// BatchRecoverer is a Recoverer that completes many recoveries in one round trip (the
// Raft controller: one log entry), so a failover of hundreds of partitions is not
// paced by one commit per partition. errs has one entry per item (nil: completed, or
// already completed exactly so), each as CompleteRecovery would return it; err (with
// errs nil) is a failure of the whole call (ErrFenced, the controllers unreachable):
// retry all or stop, as for CompleteRecovery.
type BatchRecoverer interface {
	CompleteRecoveries(ctx context.Context, done []Recovered) (errs []error, err error)
}

// Drainer is implemented by stores whose controller drains brokers (the Raft
// controller's client; metatest's BrokerStore). A broker that is asked to stop (SIGTERM)
// drains first: DrainBroker marks its registration draining and starts a graceful move
// of every partition it leads to other brokers; the broker keeps heartbeating and
// serving, completes each hand-off as for any move (CompleteMoveGen), and exits once
// View().PartitionsLedBy(its ID) is 0 (or its drain deadline passed: then its lease runs
// out and the rest fail over). Partitions recovering at the time move once recovered.
// A new registration is active again.
type Drainer interface {
	// DrainBroker drains this broker's current registration. Draining again is
	// harmless (moves partitions left behind again); ErrFenced when the registration
	// is over. On return the store's View shows the broker draining.
	DrainBroker(ctx context.Context) error
	// Draining reports whether the store's View shows this broker's current
	// registration draining.
	Draining() bool
}

// Leaser is implemented by stores that hold a broker lease: a broker acks writes only
// while LeaseValid, and reports peers its gossip suspects so they are fenced sooner.
//
// A broker whose store is a Leaser is one of a cluster: partitions fail over to it, so
// it refuses to start unless the store is a Registrar, a Recoverer and a MoveCompleter
// too (and a ControllerAuth when it enforces ACLs).
type Leaser interface {
	Epocher
	// LeaseValid reports whether the broker's lease, measured on its own clock from the
	// send time of its last acknowledged heartbeat, still holds at now.
	LeaseValid(now time.Time) bool
	// ReportSuspect tells the controller that broker id looks dead.
	ReportSuspect(ctx context.Context, id int32) error
	// Fenced returns a channel closed once the controller has answered that the
	// current registration is over (fenced, or replaced by another registration). The
	// store does not register again by itself: the broker must restart its storage
	// (a new WAL for the new epoch) and register anew.
	Fenced() <-chan struct{}
	// SinceLeaseAck is how long before now the lease was last renewed; ok is false
	// before the first renewal (for the broker's logs).
	SinceLeaseAck(now time.Time) (d time.Duration, ok bool)
}

// ControllerAuth is implemented by stores reached over the controllers' API (the Raft
// controller's client): a broker that enforces ACLs asks before it starts whether that
// API refuses unauthenticated callers; ACLs are worthless if anyone may change them
// there.
type ControllerAuth interface {
	APIAuthRequired(ctx context.Context) (bool, error)
}
