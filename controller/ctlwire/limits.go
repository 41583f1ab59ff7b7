package ctlwire

import "time"

// Limits both sides keep: a controller refuses more, a client sends no more (it splits
// a batch into several requests).
const (
	// MaxMovesPerRequest bounds one POST /v1/partitions/complete-moves (one Raft entry).
	MaxMovesPerRequest = 4096
	// MaxRecoveriesPerRequest bounds one POST /v1/partitions/complete-recoveries (and so
	// one Raft entry): about 100 bytes of JSON per item.
	MaxRecoveriesPerRequest = 4096
	// MaxLoadReport bounds the partitions one heartbeat reports (the hottest first): a
	// report must never make a heartbeat too large to be accepted.
	MaxLoadReport = 4096
	// MaxACLsPerRequest bounds one ACL change (the body limit bounds it too).
	MaxACLsPerRequest = 1000
	// DefaultProducerIDBlock is the block a client fetches when it runs out of IDs (and
	// what a request for 0 gets).
	DefaultProducerIDBlock = 1000
	// MaxProducerIDBlock bounds one allocation.
	MaxProducerIDBlock = 1 << 20
)

// MinHeartbeatInterval is the shortest heartbeat interval a broker client uses (its
// HeartbeatInterval is raised to it). The controller's Config.Validate refuses settings
// whose granted lease is below twice this, and a client refuses a granted lease below
// twice its own interval (RegisterBroker fails), so a broker always has at least two
// heartbeats per lease.
const MinHeartbeatInterval = 100 * time.Millisecond
