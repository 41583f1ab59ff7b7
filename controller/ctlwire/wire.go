package ctlwire

import (
	"github.com/weir-io/weir/metadata"
)

// The API's JSON bodies (paths.go has the route table). Topic IDs are JSON arrays of 16
// numbers (metadata.TopicID).

// RegisterRequest is the body of POST /v1/brokers/register. Incarnation identifies the
// registering process (random per Client): while the ID's active registration belongs
// to another incarnation whose lease is fresh, the registration is refused
// (409 duplicate_broker). "" matches only "". Listeners are the broker's per-zone
// Kafka listeners (at most metadata.MaxListeners, one per zone; absent from older
// brokers' requests).
type RegisterRequest struct {
	ID          int32               `json:"id"`
	Host        string              `json:"host"`
	Port        int32               `json:"port"`
	Rack        string              `json:"rack,omitempty"`
	Listeners   []metadata.Listener `json:"listeners,omitempty"`
	Incarnation string              `json:"incarnation,omitempty"`
}

// LeaseResponse answers register and heartbeat. LeaseTimeoutMs is the granted lease
// (Config.GrantedLease), counted by the broker from the send time of its request.
type LeaseResponse struct {
	Epoch          int64  `json:"epoch"`
	Version        uint64 `json:"version"`
	LeaseTimeoutMs int64  `json:"lease_timeout_ms"`
	// NodeID is the answering controller; Voters how many controllers there are (the
	// lease needs acknowledgements of a majority of them, leases.go).
	NodeID int32 `json:"node_id"`
	Voters int   `json:"voters"`
}

// HeartbeatRequest is the body of POST /v1/brokers/heartbeat. Incarnation (optional)
// tells a newly elected leader which process holds the registration. LoadReport marks a
// heartbeat that carries the broker's load report (every ClientConfig.LoadReportInterval):
// Load lists the partitions it leads that have traffic (at most 4096, the hottest);
// a partition it leads and leaves out has none. The leader keeps the rates in memory
// for the balancer; a heartbeat without LoadReport changes nothing there.
type HeartbeatRequest struct {
	ID          int32                    `json:"id"`
	Epoch       int64                    `json:"epoch"`
	Incarnation string                   `json:"incarnation,omitempty"`
	LoadReport  bool                     `json:"load_report,omitempty"`
	Load        []metadata.PartitionLoad `json:"load,omitempty"`
}

// DrainRequest is the body of POST /v1/brokers/drain: drain broker ID's registration
// Epoch (refused with 409 fenced unless it is the current, live one).
type DrainRequest struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// DrainResponse answers a drain: Started when this request turned the registration
// draining (false: it was draining already); Moves counts the moves it began,
// AlreadyMoving the broker's partitions moving already, Recovering those left to finish
// their recovery (the balancer moves them afterwards), NoTarget those left for want of
// an accepting broker, MovesCancelled the moves to the broker that were abandoned.
type DrainResponse struct {
	Version        uint64 `json:"version"`
	Started        bool   `json:"started"`
	Moves          int    `json:"moves"`
	AlreadyMoving  int    `json:"already_moving"`
	Recovering     int    `json:"recovering"`
	NoTarget       int    `json:"no_target"`
	MovesCancelled int    `json:"moves_cancelled"`
}

// DecommissionRequest is the body of POST /v1/brokers/decommission: retire broker ID, a
// fenced broker that leads nothing, for good (metadata.BrokerDecommissioned).
type DecommissionRequest struct {
	ID int32 `json:"id"`
}

// SuspectRequest is the body of POST /v1/brokers/suspect: Reporter's gossip suspects ID.
type SuspectRequest struct {
	ID       int32 `json:"id"`
	Reporter int32 `json:"reporter"`
}

// VersionResponse answers writes with nothing else to say.
type VersionResponse struct {
	Version uint64 `json:"version"`
}

// CreateTopicRequest is the body of POST /v1/topics. ID, when set, is the UUID to give
// the topic; a retry with the same ID of a create that succeeded succeeds again.
type CreateTopicRequest struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
	ValidateOnly      bool              `json:"validate_only,omitempty"`
	ID                metadata.TopicID  `json:"id"`
}

// TopicResponse answers create and delete.
type TopicResponse struct {
	Topic   *metadata.Topic `json:"topic"`
	Version uint64          `json:"version"`
}

// CreatePartitionsRequest is the body of POST /v1/topics/{name}/partitions.
type CreatePartitionsRequest struct {
	Total        int32 `json:"total"`
	ValidateOnly bool  `json:"validate_only,omitempty"`
}

// ConfigOpJSON is one incremental config op; Op is Kafka's: 0 set, 1 delete, 2 append,
// 3 subtract.
type ConfigOpJSON struct {
	Key   string `json:"key"`
	Op    int8   `json:"op"`
	Value string `json:"value,omitempty"`
}

// AlterConfigsRequest is the body of POST /v1/topics/{name}/configs.
type AlterConfigsRequest struct {
	Ops          []ConfigOpJSON `json:"ops"`
	ValidateOnly bool           `json:"validate_only,omitempty"`
}

// LogStartRequest is the body of POST /v1/partitions/log-start.
type LogStartRequest struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	Offset    int64            `json:"offset"`
}

// MoveRequest is the body of POST /v1/partitions/move and (Target ignored)
// /v1/partitions/cancel-move.
type MoveRequest struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	Target    int32            `json:"target"`
}

// CompleteMoveRequest is the body of POST /v1/partitions/complete-move. MoveGen, when
// set, is the move being completed (Partition.MoveGen); another pending move, or none,
// refuses it (move_refused).
type CompleteMoveRequest struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	From      int32            `json:"from"`
	FromEpoch int64            `json:"from_epoch,omitempty"`
	EndOffset int64            `json:"end_offset"`
	MoveGen   uint64           `json:"move_gen,omitempty"`
}

// CompleteRecoveryRequest is the body of POST /v1/partitions/complete-recovery: broker
// Leader, in its registration BrokerEpoch, recovered the partition it took over in
// LeaderEpoch; the fenced broker's log range ends at EndOffset.
type CompleteRecoveryRequest struct {
	TopicID     metadata.TopicID `json:"topic_id"`
	Partition   int32            `json:"partition"`
	Leader      int32            `json:"leader"`
	BrokerEpoch int64            `json:"broker_epoch"`
	LeaderEpoch int32            `json:"leader_epoch"`
	EndOffset   int64            `json:"end_offset"`
}

// CompleteRecoveriesRequest is the body of POST /v1/partitions/complete-recoveries:
// broker Leader, in its registration BrokerEpoch, recovered every listed partition (at
// most 4096); each is judged as a CompleteRecoveryRequest would be.
type CompleteRecoveriesRequest struct {
	Leader      int32              `json:"leader"`
	BrokerEpoch int64              `json:"broker_epoch"`
	Items       []RecoveryDoneItem `json:"items"`
}

// RecoveryDoneItem is one partition of a CompleteRecoveriesRequest (and of the Raft
// command that applies it: the JSON of both is this).
type RecoveryDoneItem struct {
	TopicID     metadata.TopicID `json:"topic_id"`
	Partition   int32            `json:"partition"`
	LeaderEpoch int32            `json:"leader_epoch"`
	EndOffset   int64            `json:"end_offset"`
}

// CompleteRecoveriesResponse answers it: the Version to wait for and, per item in
// order, nil (completed, or already completed so) or the error an item's own request
// would have got.
type CompleteRecoveriesResponse struct {
	Version uint64      `json:"version"`
	Errors  []*APIError `json:"errors"`
}

// CompleteMovesRequest is the body of POST /v1/partitions/complete-moves: broker From,
// in its registration FromEpoch, hands every listed partition (at most 4096) to its
// move's target; each is judged as a CompleteMoveRequest with that MoveGen would be.
type CompleteMovesRequest struct {
	From      int32          `json:"from"`
	FromEpoch int64          `json:"from_epoch"`
	Items     []MoveDoneItem `json:"items"`
}

// MoveDoneItem is one partition of a CompleteMovesRequest (and of the Raft command that
// applies it: the JSON of both is this).
type MoveDoneItem struct {
	TopicID   metadata.TopicID `json:"topic_id"`
	Partition int32            `json:"partition"`
	EndOffset int64            `json:"end_offset"`
	MoveGen   uint64           `json:"move_gen"`
}

// CompleteMovesResponse answers it: the Version to wait for and, per item in order, nil
// (handed off) or the error the item's own request would have got.
type CompleteMovesResponse struct {
	Version uint64      `json:"version"`
	Errors  []*APIError `json:"errors"`
}

// ProducerIDsRequest is the body of POST /v1/producer-ids.
type ProducerIDsRequest struct {
	Count int64 `json:"count"`
}

// ProducerIDsResponse: IDs First .. First+Count-1 are the caller's.
type ProducerIDsResponse struct {
	First   int64  `json:"first"`
	Count   int64  `json:"count"`
	Version uint64 `json:"version"`
}

// PrepareObjectRequest is the body of POST /v1/objects/prepare: broker Broker, in its
// current registration Epoch, wants a new object.
type PrepareObjectRequest struct {
	Broker int32 `json:"broker"`
	Epoch  int64 `json:"epoch"`
}

// ObjectResponse answers prepare and commit with the object as it is now.
type ObjectResponse struct {
	Object  metadata.Object `json:"object"`
	Version uint64          `json:"version"`
}

// CommitObjectRequest is the body of POST /v1/objects/commit.
type CommitObjectRequest struct {
	ID     uint64                    `json:"id"`
	Broker int32                     `json:"broker"`
	Epoch  int64                     `json:"epoch"`
	Size   int64                     `json:"size"`
	Ranges []metadata.PartitionRange `json:"ranges"`
}

// AppliedIn reports whether v shows req applied: the object committed by req's broker
// and epoch with its size, and each range in its partition's manifest (unless the topic
// was deleted since). A client asks after an ambiguous failure (an earlier attempt may
// have committed it).
func (req *CommitObjectRequest) AppliedIn(v *metadata.View) bool {
	o, ok := v.Object(req.ID)
	if !ok || o.State != metadata.ObjectCommitted || o.Broker != req.Broker || o.Epoch != req.Epoch || o.Size != req.Size {
		return false
	}
	for _, r := range req.Ranges {
		t := v.TopicByID(r.Topic)
		if t == nil || int(r.Partition) >= len(t.Partitions) || r.Partition < 0 {
			continue
		}
		want := r.ObjectRange(req.ID)
		found := false
		for _, have := range t.Partitions[r.Partition].Objects {
			if have.Equal(want) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ReplaceRangesRequest is the body of POST /v1/objects/replace: a log cleaner's commit
// (metadata.ObjectRules.Replace).
type ReplaceRangesRequest struct {
	ID      uint64                `json:"id"`
	Broker  int32                 `json:"broker"`
	Epoch   int64                 `json:"epoch"`
	Size    int64                 `json:"size"`
	Replace metadata.RangeReplace `json:"replace"`
}

// AppliedIn reports whether v shows req applied: the object committed by req's broker,
// epoch and size, and its range, compacted, in the partition's manifest.
func (req *ReplaceRangesRequest) AppliedIn(v *metadata.View) bool {
	o, ok := v.Object(req.ID)
	if !ok || o.State != metadata.ObjectCommitted || o.Broker != req.Broker || o.Epoch != req.Epoch || o.Size != req.Size {
		return false
	}
	r := req.Replace.Range
	t := v.TopicByID(r.Topic)
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return false
	}
	want := r.ObjectRange(req.ID)
	want.Compacted = true
	for _, have := range t.Partitions[r.Partition].Objects {
		if have.Equal(want) {
			return true
		}
	}
	return false
}

// DeleteObjectsRequest is the body of POST /v1/objects/delete.
type DeleteObjectsRequest struct {
	IDs []uint64 `json:"ids"`
}

// DeleteObjectsResponse: Deleted objects were removed by this call (IDs deleted before
// do not count).
type DeleteObjectsResponse struct {
	Deleted int    `json:"deleted"`
	Version uint64 `json:"version"`
}

// Status is the body of GET /v1/status.
type Status struct {
	ID                int32  `json:"id"`
	State             string `json:"state"`
	LeaderID          int32  `json:"leader_id"`
	LeaderAPI         string `json:"leader_api,omitempty"`
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	Version           uint64 `json:"version"`
	ClusterID         string `json:"cluster_id"`
	Peers             []Peer `json:"peers"`
	// AuthRequired: the API refuses unauthenticated callers (auth.go). Brokers that
	// enforce ACLs refuse to start against controllers without it.
	AuthRequired bool `json:"auth_required,omitempty"`
}

// Peer is one controller of the static quorum: its Raft address and its API address
// (the controller's Config.Peers, which Status lists).
type Peer struct {
	ID       int32  `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}
