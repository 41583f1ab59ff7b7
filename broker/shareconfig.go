package broker

import (
	"flag"
	"time"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/share"
)

// ShareConfig configures share groups (KIP-932, queues); on by default
// (--share-groups=false neither serves nor advertises their keys).
type ShareConfig struct {
	// Enabled serves and advertises ShareGroupHeartbeat, ShareGroupDescribe,
	// ShareFetch, ShareAcknowledge, DescribeShareGroupOffsets, AlterShareGroupOffsets
	// and DeleteShareGroupOffsets, and lists and deletes share groups in ListGroups and
	// DeleteGroups.
	Enabled bool
	// LockDuration: group.share.record.lock.duration.ms.
	LockDuration time.Duration
	// DeliveryLimit: group.share.delivery.count.limit.
	DeliveryLimit int
	// MaxInFlight: group.share.partition.max.record.locks.
	MaxInFlight int
	// SessionTimeout, HeartbeatInterval: group.share.session.timeout.ms,
	// group.share.heartbeat.interval.ms.
	SessionTimeout, HeartbeatInterval time.Duration
	// AutoOffsetReset: share.auto.offset.reset, "latest" (Kafka's default) or
	// "earliest", where a group's share partition starts.
	AutoOffsetReset string
	// StatePartitions: partitions of __share_group_state (the same on every broker).
	StatePartitions int
	// MaxSessions bounds the share sessions per broker.
	MaxSessions int
}

// DefaultShareConfig is Kafka 4.2's defaults, on.
func DefaultShareConfig() ShareConfig {
	return ShareConfig{Enabled: true, LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 2000,
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, AutoOffsetReset: "latest",
		StatePartitions: 16, MaxSessions: 2000}
}

func (c *ShareConfig) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "share-groups", c.Enabled, "serve share groups (KIP-932 queues: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets; share groups in ListGroups and DeleteGroups); false neither serves nor advertises them")
	fs.DurationVar(&c.LockDuration, "share-record-lock-duration", c.LockDuration, "how long a share group member holds records it fetched before they are released to others (group.share.record.lock.duration.ms)")
	fs.IntVar(&c.DeliveryLimit, "share-delivery-count-limit", c.DeliveryLimit, "deliveries of a record to share group members before it is archived (group.share.delivery.count.limit)")
	fs.IntVar(&c.MaxInFlight, "share-partition-max-record-locks", c.MaxInFlight, "records in flight per share partition (group.share.partition.max.record.locks)")
	fs.DurationVar(&c.SessionTimeout, "share-session-timeout", c.SessionTimeout, "a share group member silent this long is removed (group.share.session.timeout.ms)")
	fs.DurationVar(&c.HeartbeatInterval, "share-heartbeat-interval", c.HeartbeatInterval, "how often share group members heartbeat (group.share.heartbeat.interval.ms)")
	fs.StringVar(&c.AutoOffsetReset, "share-auto-offset-reset", c.AutoOffsetReset, "where a share group starts reading a partition: latest or earliest (share.auto.offset.reset)")
	fs.IntVar(&c.StatePartitions, "share-state-partitions", c.StatePartitions, "partitions of __share_group_state, where share-partition states are kept; the same on every broker")
}

// newShare builds the front end's share service.
func (b *Broker) newShare() *kafka.Share {
	c := b.cfg.Share
	lim := share.Limits{LockDuration: c.LockDuration, DeliveryLimit: int16(c.DeliveryLimit), MaxInFlight: c.MaxInFlight}
	b.shareStates = shareStates{served: map[int32]*partlog.Partition{}, values: map[int32]map[string][]byte{}, fence: map[string]int32{},
		kick: make(chan struct{}, 1), loaded: make(chan struct{})}
	return &kafka.Share{
		Groups:                  share.NewGroups(share.GroupConfig{SessionTimeout: c.SessionTimeout, HeartbeatInterval: c.HeartbeatInterval}, sharePersister{b}),
		Sessions:                share.NewSessions(c.MaxSessions),
		Parts:                   share.NewManager(lim, sharePersister{b}),
		HeartbeatInterval:       c.HeartbeatInterval,
		AutoOffsetResetEarliest: c.AutoOffsetReset == "earliest",
		ReadState:               sharePersister{b}.readOnly,
		ResetState:              sharePersister{b}.reset,
	}
}
