package ctlwire

import (
	"net/url"
	"strings"
)

// The controller API: HTTP/1.1 + JSON. Any controller accepts any request (the
// controller package's api.go says who serves what). Errors are APIError bodies whose
// codes map 1:1 to the metadata sentinels (errors.go); an error matching several
// sentinels (an object refused for a fenced epoch is object_rejected and fenced) lists
// the others in "also".
//
//	POST   /v1/brokers/register          RegisterRequest         -> LeaseResponse | 409 duplicate_broker
//	POST   /v1/brokers/heartbeat         HeartbeatRequest        -> LeaseResponse | 409 fenced
//	POST   /v1/brokers/lease-vote        (controller to controller: the controller's LeaseVoteRequest)
//	POST   /v1/brokers/suspect           SuspectRequest          -> VersionResponse
//	POST   /v1/brokers/drain             DrainRequest            -> DrainResponse | 409 fenced
//	POST   /v1/brokers/undrain           DrainRequest            -> VersionResponse | 409 fenced
//	POST   /v1/brokers/decommission      DecommissionRequest     -> VersionResponse | 404 unknown_broker, 409 broker_state
//	POST   /v1/topics                    CreateTopicRequest      -> TopicResponse
//	DELETE /v1/topics/{name}                                     -> TopicResponse
//	POST   /v1/topics/{name}/partitions  CreatePartitionsRequest -> VersionResponse
//	POST   /v1/topics/{name}/configs     AlterConfigsRequest     -> VersionResponse
//	POST   /v1/partitions/log-start      LogStartRequest         -> VersionResponse
//	POST   /v1/partitions/move           MoveRequest             -> VersionResponse
//	POST   /v1/partitions/complete-move  CompleteMoveRequest     -> VersionResponse
//	POST   /v1/partitions/cancel-move    MoveRequest             -> VersionResponse
//	POST   /v1/partitions/complete-recovery CompleteRecoveryRequest -> VersionResponse | 409 recovery_refused, fenced
//	POST   /v1/partitions/complete-recoveries CompleteRecoveriesRequest -> CompleteRecoveriesResponse | 409 fenced
//	POST   /v1/partitions/complete-moves CompleteMovesRequest   -> CompleteMovesResponse | 409 fenced
//	POST   /v1/producer-ids              ProducerIDsRequest      -> ProducerIDsResponse
//	POST   /v1/objects/prepare           PrepareObjectRequest    -> ObjectResponse | 409 object_rejected
//	POST   /v1/objects/commit            CommitObjectRequest     -> ObjectResponse | 409 object_rejected
//	POST   /v1/objects/replace           ReplaceRangesRequest    -> ObjectResponse | 409 object_rejected, fenced
//	POST   /v1/objects/delete            DeleteObjectsRequest    -> DeleteObjectsResponse | 409 object_rejected
//	POST   /v1/scram                     ScramRequest            -> ScramResponse (results per user)
//	POST   /v1/acls                      CreateACLsRequest       -> VersionResponse | 400 acl_rejected
//	POST   /v1/acls/delete               DeleteACLsRequest       -> DeleteACLsResponse | 400 acl_rejected
//	GET    /v1/acls                      (local state)           -> ACLsResponse
//	GET    /v1/metadata?after=V&wait=D[&delta=1]   long poll   -> ViewJSON (a delta from V with delta=1, view.go) | 204 (no change in D)
//	GET    /v1/metadata?consistent=1     leader, after a barrier -> ViewJSON
//	GET    /v1/status                                            -> Status
//	GET    /v1/balancer                  leader                  -> BalancerStatus
const (
	PathRegister           = "/v1/brokers/register"
	PathHeartbeat          = "/v1/brokers/heartbeat"
	PathLeaseVote          = "/v1/brokers/lease-vote"
	PathSuspect            = "/v1/brokers/suspect"
	PathDrain              = "/v1/brokers/drain"
	PathUndrain            = "/v1/brokers/undrain"
	PathDecommission       = "/v1/brokers/decommission"
	PathTopics             = "/v1/topics"
	PathTopic              = "/v1/topics/{name}"
	PathTopicPartitions    = "/v1/topics/{name}/partitions"
	PathTopicConfigs       = "/v1/topics/{name}/configs"
	PathLogStart           = "/v1/partitions/log-start"
	PathMove               = "/v1/partitions/move"
	PathCompleteMove       = "/v1/partitions/complete-move"
	PathCancelMove         = "/v1/partitions/cancel-move"
	PathCompleteRecovery   = "/v1/partitions/complete-recovery"
	PathCompleteRecoveries = "/v1/partitions/complete-recoveries"
	PathCompleteMoves      = "/v1/partitions/complete-moves"
	PathProducerIDs        = "/v1/producer-ids"
	PathPrepareObject      = "/v1/objects/prepare"
	PathCommitObject       = "/v1/objects/commit"
	PathDeleteObjects      = "/v1/objects/delete"
	PathReplaceRanges      = "/v1/objects/replace"
	PathScram              = "/v1/scram"
	PathACLs               = "/v1/acls"
	PathDeleteACLs         = "/v1/acls/delete"
	PathMetadata           = "/v1/metadata"
	PathStatus             = "/v1/status"
	PathBalancer           = "/v1/balancer"
)

// TopicPath is one of the {name} paths (PathTopic, PathTopicPartitions,
// PathTopicConfigs) for topic name, escaped.
func TopicPath(pattern, name string) string {
	return strings.Replace(pattern, "{name}", url.PathEscape(name), 1)
}
