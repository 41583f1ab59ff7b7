package kafka

// share.go: what the KIP-932 share group keys (share_*.go, describe_share_group_offsets.go)
// share: the service the broker gives them (broker/share's membership, sessions and
// share partitions) and the one place share errors become Kafka codes. The keys are
// served and advertised only with a Share service (--share-groups, on by default).

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

// Share is the share group service: nil turns the share keys off.
type Share struct {
	Groups   *share.Groups
	Sessions *share.Sessions
	Parts    *share.Manager
	// Configs are the groups' settings (share_config.go): the heartbeat interval
	// answered, the lock duration, where a new share partition starts, the isolation
	// level.
	Configs *share.Configs
	// ReadState returns a share partition's persisted state (DescribeShareGroupOffsets).
	ReadState func(ctx context.Context, k share.Key) (share.Snapshot, bool, error)
	// ResetState resets a share partition's persisted state to start at start (-1:
	// deleted), fencing its leader's older state (share_admin.go).
	ResetState func(ctx context.Context, k share.Key, start int64) error

	watchMu sync.Mutex
	watched map[*conn]struct{} // connections whose end releases their sessions (share_conn.go)
}

func shareOn(s *Server) bool { return s.share != nil }

// shareCode is the Kafka code of a share error.
func shareCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, share.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, share.ErrInvalidAck), errors.Is(err, share.ErrBadHeartbeat):
		return kerr.InvalidRequest.Code
	case errors.Is(err, share.ErrUnknownMember):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, share.ErrFencedEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, share.ErrGroupTooLarge):
		return kerr.GroupMaxSizeReached.Code
	case errors.Is(err, share.ErrNotShareGroup):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, share.ErrGroupNotEmpty):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, share.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, share.ErrSessionNotFound):
		return kerr.ShareSessionNotFound.Code
	case errors.Is(err, share.ErrSessionEpoch):
		return kerr.InvalidShareSessionEpoch.Code
	case errors.Is(err, share.ErrSessionLimit):
		return kerr.ShareSessionLimitReached.Code
	case errors.Is(err, share.ErrStaleLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, kerr.FencedStateEpoch) && errors.Is(err, share.ErrGroupStore):
		return kerr.NotCoordinator.Code // a newer coordinator has the group
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kafkaCode(err)
}

// shareCoordinator says whether this broker coordinates group g (leads its
// __consumer_offsets partition, loaded): the coordinator epoch (that partition's leader
// epoch, which fences the group's membership records), or the error to answer.
func (s *Server) shareCoordinator(ctx context.Context, g string) (int32, error) {
	c, err := s.shareCoord(ctx, g)
	return c.Epoch, err
}

// shareCoord is shareCoordinator with the __consumer_offsets partition.
func (s *Server) shareCoord(ctx context.Context, g string) (share.Coord, error) {
	t, idx, err := s.be.CoordinatorPartition(ctx, g, true)
	if err != nil {
		return share.Coord{}, kerr.CoordinatorNotAvailable
	}
	if _, err := s.be.Writer(t, idx, ""); err != nil {
		return share.Coord{}, kerr.NotCoordinator
	}
	return share.Coord{Partition: idx, Epoch: t.Partitions[idx].LeaderEpoch}, nil
}

// shareCoords are the __consumer_offsets partitions this broker coordinates (led and
// loaded here), with their epochs.
func (s *Server) shareCoords(ctx context.Context) []share.Coord {
	t, _, err := s.be.CoordinatorPartition(ctx, "", false)
	if err != nil || t == nil {
		return nil
	}
	var out []share.Coord
	for i := range t.Partitions {
		if _, err := s.be.Writer(t, int32(i), ""); err == nil {
			out = append(out, share.Coord{Partition: int32(i), Epoch: t.Partitions[i].LeaderEpoch})
		}
	}
	return out
}

// shareTopicInfo resolves a subscribed topic for the assignor.
func shareTopicInfo(view *metadata.View) func(string) (share.TopicInfo, bool) {
	return func(name string) (share.TopicInfo, bool) {
		t := view.Topics[name]
		if t == nil || strings.HasPrefix(name, "__") {
			return share.TopicInfo{}, false
		}
		return share.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}, true
	}
}

// shareMember checks a ShareFetch's or ShareAcknowledge's group and member: both given,
// Read on the group. It returns them, or the code to answer.
func shareMember(ctx context.Context, group, member *string) (string, string, int16) {
	if group == nil || member == nil || *group == "" || *member == "" {
		return "", "", kerr.InvalidRequest.Code
	}
	if !acl.Allowed(ctx, acl.OpRead, acl.ResourceGroup, *group) {
		return "", "", kerr.GroupAuthorizationFailed.Code
	}
	return *group, *member, 0
}
