package broker

import (
	"flag"
	"fmt"
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
	// AutoOffsetReset: share.auto.offset.reset, "latest" (Kafka's default), "earliest" or
	// "by_duration:<ISO 8601>", where a group's share partition starts.
	AutoOffsetReset string
	// The bounds of the per-group configs (group.share.min/max.session.timeout.ms,
	// .heartbeat.interval.ms, .record.lock.duration.ms), each widened to hold the
	// broker's own value above.
	MinSessionTimeout, MaxSessionTimeout       time.Duration
	MinHeartbeatInterval, MaxHeartbeatInterval time.Duration
	MinLockDuration, MaxLockDuration           time.Duration
	// StatePartitions: partitions of __share_group_state (the same on every broker).
	StatePartitions int
	// MaxSessions bounds the share sessions per broker.
	MaxSessions int
}

// DefaultShareConfig is Kafka 4.2's defaults, on.
func DefaultShareConfig() ShareConfig {
	return ShareConfig{Enabled: true, LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 2000,
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, AutoOffsetReset: "latest",
		MinSessionTimeout: 45 * time.Second, MaxSessionTimeout: time.Minute,
		MinHeartbeatInterval: 5 * time.Second, MaxHeartbeatInterval: 15 * time.Second,
		MinLockDuration: 15 * time.Second, MaxLockDuration: time.Minute,
		StatePartitions: 16, MaxSessions: 2000}
}

// validate checks what the flags cannot: the reset strategy parses, the bounds are
// ordered.
func (c *ShareConfig) validate() error {
	if !c.Enabled {
		return nil
	}
	if _, err := share.ParseReset(c.AutoOffsetReset); c.AutoOffsetReset != "" && err != nil {
		return fmt.Errorf("broker: --share-auto-offset-reset: %w", err)
	}
	for _, b := range []struct {
		name     string
		min, max time.Duration
	}{{"session-timeout", c.MinSessionTimeout, c.MaxSessionTimeout}, {"heartbeat-interval", c.MinHeartbeatInterval, c.MaxHeartbeatInterval},
		{"record-lock-duration", c.MinLockDuration, c.MaxLockDuration}} {
		if b.min > 0 && b.max > 0 && b.min > b.max {
			return fmt.Errorf("broker: --share-min-%s %v is above --share-max-%s %v", b.name, b.min, b.name, b.max)
		}
	}
	return nil
}

// settings are the broker's share group settings: a group's without configs of its own.
func (c *ShareConfig) settings() share.Settings {
	reset, _ := share.ParseReset(c.AutoOffsetReset) // checked by validate
	return share.Settings{SessionTimeout: c.SessionTimeout, HeartbeatInterval: c.HeartbeatInterval, LockDuration: c.LockDuration,
		AutoOffsetReset: reset}
}

// shareConfigRefresh is how long a broker serves a group's configs before reading them
// again: a change made through another broker takes effect within it.
const shareConfigRefresh = 5 * time.Second

func (c *ShareConfig) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "share-groups", c.Enabled, "serve share groups (KIP-932 queues: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets; share groups in ListGroups and DeleteGroups); false neither serves nor advertises them")
	fs.DurationVar(&c.LockDuration, "share-record-lock-duration", c.LockDuration, "how long a share group member holds records it fetched before they are released to others (group.share.record.lock.duration.ms)")
	fs.IntVar(&c.DeliveryLimit, "share-delivery-count-limit", c.DeliveryLimit, "deliveries of a record to share group members before it is archived (group.share.delivery.count.limit)")
	fs.IntVar(&c.MaxInFlight, "share-partition-max-record-locks", c.MaxInFlight, "records in flight per share partition (group.share.partition.max.record.locks)")
	fs.DurationVar(&c.SessionTimeout, "share-session-timeout", c.SessionTimeout, "a share group member silent this long is removed (group.share.session.timeout.ms)")
	fs.DurationVar(&c.HeartbeatInterval, "share-heartbeat-interval", c.HeartbeatInterval, "how often share group members heartbeat (group.share.heartbeat.interval.ms)")
	fs.StringVar(&c.AutoOffsetReset, "share-auto-offset-reset", c.AutoOffsetReset, "where a share group starts reading a partition: latest, earliest or by_duration:PnDTnHnMn.nS (share.auto.offset.reset; a group's own config overrides it)")
	fs.DurationVar(&c.MinSessionTimeout, "share-min-session-timeout", c.MinSessionTimeout, "the least share.session.timeout.ms a share group may set (group.share.min.session.timeout.ms)")
	fs.DurationVar(&c.MaxSessionTimeout, "share-max-session-timeout", c.MaxSessionTimeout, "the most share.session.timeout.ms a share group may set (group.share.max.session.timeout.ms)")
	fs.DurationVar(&c.MinHeartbeatInterval, "share-min-heartbeat-interval", c.MinHeartbeatInterval, "the least share.heartbeat.interval.ms a share group may set (group.share.min.heartbeat.interval.ms)")
	fs.DurationVar(&c.MaxHeartbeatInterval, "share-max-heartbeat-interval", c.MaxHeartbeatInterval, "the most share.heartbeat.interval.ms a share group may set (group.share.max.heartbeat.interval.ms)")
	fs.DurationVar(&c.MinLockDuration, "share-min-record-lock-duration", c.MinLockDuration, "the least share.record.lock.duration.ms a share group may set (group.share.min.record.lock.duration.ms)")
	fs.DurationVar(&c.MaxLockDuration, "share-max-record-lock-duration", c.MaxLockDuration, "the most share.record.lock.duration.ms a share group may set (group.share.max.record.lock.duration.ms)")
	fs.IntVar(&c.StatePartitions, "share-state-partitions", c.StatePartitions, "partitions of __share_group_state, where share-partition states are kept; the same on every broker")
}

// newShare builds the front end's share service.
func (b *Broker) newShare() *kafka.Share {
	c := b.cfg.Share
	lim := share.Limits{LockDuration: c.LockDuration, DeliveryLimit: int16(c.DeliveryLimit), MaxInFlight: c.MaxInFlight}
	b.shareStates = shareStates{served: map[int32]*partlog.Partition{}, values: map[int32]map[string][]byte{}, fence: map[string]int32{},
		kick: make(chan struct{}, 1), loaded: make(chan struct{})}
	bounds := share.Bounds{MinSessionTimeout: c.MinSessionTimeout, MaxSessionTimeout: c.MaxSessionTimeout,
		MinHeartbeatInterval: c.MinHeartbeatInterval, MaxHeartbeatInterval: c.MaxHeartbeatInterval,
		MinLockDuration: c.MinLockDuration, MaxLockDuration: c.MaxLockDuration}
	configs := share.NewConfigs(c.settings(), bounds, sharePersister{b}, shareConfigRefresh)
	return &kafka.Share{
		Groups: share.NewGroups(share.GroupConfig{SessionTimeout: c.SessionTimeout, HeartbeatInterval: c.HeartbeatInterval, Configs: configs},
			sharePersister{b}),
		Sessions:   share.NewSessions(c.MaxSessions),
		Parts:      share.NewManager(lim, sharePersister{b}),
		Configs:    configs,
		ReadState:  sharePersister{b}.readOnly,
		ResetState: sharePersister{b}.reset,
	}
}
