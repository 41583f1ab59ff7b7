// Package group implements the broker side of Kafka's classic consumer-group
// protocol (the pre-KIP-848 "generic" group coordinator): JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups and OffsetDelete.
//
// Behaviour follows Apache Kafka's coordinator (GroupMetadataManager /
// ClassicGroup in the group-coordinator module, and the older Scala
// GroupCoordinator) closely; deviations are documented where they occur.
//
// TxnOffsetCommit (offsets committed in a transaction, txn_offset_commit.go) is served
// when Config.Transactions is on; CompleteTxn ends a transaction's offsets.
//
// Committed offsets and each generation's membership and assignment are made
// durable through a Store (record.go) and replayed with Coordinator.Load when a
// coordinator takes a group's partition, so a group survives a move or failover
// of its coordinator without a rebalance, as in Kafka.
package group

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weir-io/weir/internal/clock"
)

// Config configures a Coordinator. Zero fields are NOT replaced by defaults;
// start from DefaultConfig.
type Config struct {
	// MinSessionTimeout is group.min.session.timeout.ms: JoinGroup requests
	// with a smaller session timeout get INVALID_SESSION_TIMEOUT. Default 6s.
	MinSessionTimeout time.Duration
	// MaxSessionTimeout is group.max.session.timeout.ms. Default 30m.
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: when the
	// first member joins an Empty group, the coordinator waits this long
	// (extended, up to the rebalance timeout, while new members keep
	// arriving) before completing the join phase. Default 3s; 0 disables it.
	InitialRebalanceDelay time.Duration
	// NewMemberJoinTimeout bounds how long a brand-new member may sit in a
	// pending JoinGroup before it is dropped (Kafka hard-codes 5 minutes).
	NewMemberJoinTimeout time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: commits with
	// longer metadata get OFFSET_METADATA_TOO_LARGE. Default 4096.
	OffsetMetadataMaxBytes int
	// OffsetsRetention is offsets.retention.minutes: how long an Empty group's
	// offsets are kept after it became Empty (expire.go). Default 7 days; 0 keeps
	// them for ever (offsets of deleted topics still go).
	OffsetsRetention time.Duration
	// Clock is the time source for timestamps and timers. Default: real time.
	Clock Clock
	// Status reports whether this coordinator serves a group (in a cluster: whether this
	// broker leads the group's __consumer_offsets partition and has restored it). Requests
	// for a group it does not own get NOT_COORDINATOR, so clients look the coordinator up
	// again; requests for a group whose partition is still Loading get
	// COORDINATOR_LOAD_IN_PROGRESS, so clients back off and retry: until the partition's
	// commits are replayed (Restore), "no committed offset" may be false and a commit
	// would be overwritten by an older restored one. Nil means every group is Owned.
	// It is never called with a coordinator lock held; it must answer quickly (it is
	// asked on every request).
	Status func(group string) OwnStatus
	// Loading reports whether any group partition this coordinator is gaining is still
	// being restored. ListGroups then answers COORDINATOR_LOAD_IN_PROGRESS (with the
	// groups it can list), as Kafka does: the list would be incomplete. Nil means never.
	Loading func() bool
	// Transactions turns TxnOffsetCommit on. Off (the default, until the transaction
	// coordinator is wired), it is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which a
	// client treats as fatal, as every transactional request is answered today.
	Transactions bool
	// ConsumerProtocol turns the KIP-848 consumer group protocol on: ConsumerGroupHeartbeat
	// and ConsumerGroupDescribe are served and advertised (consumer.go). On by default:
	// clients use it only when asked (group.protocol=consumer), so advertising it changes
	// nothing for the others; off, keys 68/69 are answered UNSUPPORTED_VERSION.
	ConsumerProtocol bool
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: a consumer group
	// member silent this long is removed. Default 45s.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms, told to
	// members in every heartbeat answer. Default 5s.
	ConsumerHeartbeatInterval time.Duration
	// MigrationPolicy is group.consumer.migration.policy: whether a classic group with
	// members converts to a consumer group when a consumer-protocol member joins it
	// (upgrade), and a consumer group back to classic when its last consumer-protocol
	// member leaves (downgrade); consumer_migrate.go. Default bidirectional. The zero
	// value is disabled.
	MigrationPolicy MigrationPolicy
}

// MigrationPolicy is Kafka's ConsumerGroupMigrationPolicy.
type MigrationPolicy string

// The policies Kafka names.
const (
	MigrationDisabled      MigrationPolicy = "disabled"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationBidirectional MigrationPolicy = "bidirectional"
)

// ErrMigrationPolicy: a migration policy Kafka does not name.
var ErrMigrationPolicy = errors.New("group: unknown consumer migration policy (disabled, upgrade, downgrade, bidirectional)")

// ParseMigrationPolicy reads a policy as Kafka's config does (case-insensitive); the
// empty string is disabled.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	p := MigrationPolicy(strings.ToLower(strings.TrimSpace(s)))
	switch p {
	case "":
		return MigrationDisabled, nil
	case MigrationDisabled, MigrationUpgrade, MigrationDowngrade, MigrationBidirectional:
		return p, nil
	}
	return "", fmt.Errorf("%w: %q", ErrMigrationPolicy, s)
}

// String is the policy's name (the zero value: disabled).
func (p MigrationPolicy) String() string {
	if p == "" {
		return string(MigrationDisabled)
	}
	return string(p)
}

// Set makes *MigrationPolicy a flag.Value.
func (p *MigrationPolicy) Set(s string) error {
	v, err := ParseMigrationPolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func (p MigrationPolicy) upgrade() bool {
	return p == MigrationUpgrade || p == MigrationBidirectional
}

func (p MigrationPolicy) downgrade() bool {
	return p == MigrationDowngrade || p == MigrationBidirectional
}

// OwnStatus is a coordinator's relation to a group (Config.Status).
type OwnStatus int8

const (
	// NotOwned: another coordinator serves the group (NOT_COORDINATOR).
	NotOwned OwnStatus = iota
	// Loading: the group is this coordinator's, but its committed offsets are still
	// being restored (COORDINATOR_LOAD_IN_PROGRESS).
	Loading
	// Owned: the group is this coordinator's and fully restored.
	Owned
)

func (s OwnStatus) String() string {
	switch s {
	case NotOwned:
		return "NotOwned"
	case Loading:
		return "Loading"
	case Owned:
		return "Owned"
	}
	return fmt.Sprintf("OwnStatus(%d)", int8(s))
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:      6 * time.Second,
		MaxSessionTimeout:      30 * time.Minute,
		InitialRebalanceDelay:  3 * time.Second,
		NewMemberJoinTimeout:   5 * time.Minute,
		OffsetMetadataMaxBytes: 4096,
		OffsetsRetention:       7 * 24 * time.Hour,
		Clock:                  RealClock(),

		ConsumerProtocol:          true,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
		MigrationPolicy:           MigrationBidirectional,
	}
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	var errs []error
	if c.MinSessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("group: MinSessionTimeout must be > 0, got %v", c.MinSessionTimeout))
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("group: MaxSessionTimeout (%v) must be >= MinSessionTimeout (%v)", c.MaxSessionTimeout, c.MinSessionTimeout))
	}
	if c.InitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("group: InitialRebalanceDelay must be >= 0, got %v", c.InitialRebalanceDelay))
	}
	if c.NewMemberJoinTimeout <= 0 {
		errs = append(errs, fmt.Errorf("group: NewMemberJoinTimeout must be > 0, got %v", c.NewMemberJoinTimeout))
	}
	if c.OffsetsRetention < 0 {
		errs = append(errs, fmt.Errorf("group: OffsetsRetention must be >= 0, got %v", c.OffsetsRetention))
	}
	if c.OffsetMetadataMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("group: OffsetMetadataMaxBytes must be >= 0, got %d", c.OffsetMetadataMaxBytes))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("group: Clock must not be nil"))
	}
	if _, err := ParseMigrationPolicy(string(c.MigrationPolicy)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Clock and Timer are internal/clock's: the one clock both coordinators schedule by.
type (
	Clock = clock.Clock
	Timer = clock.Timer
)

// RealClock returns the time package's clock.
func RealClock() Clock { return clock.Real() }
