package kafka

// share_admin.go: share groups in the group admin keys, and the share group offsets
// admin keys (KIP-932), with --share-groups (the default).
//
//   - ListGroups (16): the share groups this broker coordinates are listed with type and
//     protocol type "share" and state Empty or Stable, filtered by the request's state
//     and type filters (v4+, v5+) and, without Describe on the cluster, by Describe on
//     each group. The coordinator finds its share groups in the index of each
//     __consumer_offsets partition it leads (broker/share group_index.go), so a group is
//     listed by a new coordinator before its members heartbeat.
//   - DescribeGroups (15): a share group is not a classic group: Dead before v6,
//     GROUP_ID_NOT_FOUND from v6, as Kafka (the group coordinator's answer for a name it
//     does not know).
//   - DeleteGroups (42): a share group known here is deleted by this file (Delete on the
//     group): NON_EMPTY_GROUP while it has members, else its membership record is
//     replaced by a deletion and the share-partition state of every topic it ever
//     subscribed is deleted (as Kafka's persister deleteState); other names go to the
//     group coordinator.
//   - AlterShareGroupOffsets (91, v0): sets each named partition's share-partition start
//     offset (its state is reset: nothing in flight, nothing acknowledged above it).
//     Read on the group and on each topic; the group must exist and have no members
//     (NON_EMPTY_GROUP); an offset below -1 is INVALID_REQUEST.
//   - DeleteShareGroupOffsets (92, v0): deletes the share-partition state of every
//     partition of each named topic (a member then starts it by share.auto.offset.reset).
//     Delete on the group, Read on each topic; the group must exist and be empty.
//
// A reset is an admin write to __share_group_state: the store gives it the next state
// epoch, so the leader of the data partition, whose next write then is refused, loads the
// reset state (broker/sharestate.go).

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: kmsg.AlterShareGroupOffsets.Int16(), min: 0, max: 0, on: shareOn, blocking: true,
		handle: answer(func(s *Server, ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
			return s.alterShareOffsets(ctx, req)
		})})
	register(api{key: kmsg.DeleteShareGroupOffsets.Int16(), min: 0, max: 0, on: shareOn, blocking: true,
		handle: answer(func(s *Server, ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
			return s.deleteShareOffsets(ctx, req)
		})})
}

// shareGroupAdmin runs a group admin request through the share groups before the group
// coordinator: ListGroups gets the share groups, DeleteGroups loses the share groups it
// names (deleted here). It returns the request and respond to give the coordinator.
func (s *Server) shareGroupAdmin(ctx context.Context, req kmsg.Request, respond func(kmsg.Response)) (kmsg.Request, func(kmsg.Response)) {
	if s.share == nil {
		return req, respond
	}
	switch r := req.(type) {
	case *kmsg.ListGroupsRequest:
		listed := s.listShareGroups(ctx, r)
		return req, func(resp kmsg.Response) {
			if lr, ok := resp.(*kmsg.ListGroupsResponse); ok {
				lr.Groups = append(lr.Groups, listed...)
			}
			respond(resp)
		}
	case *kmsg.DeleteGroupsRequest:
		cp := *r
		cp.Groups = nil
		var done []kmsg.DeleteGroupsResponseGroup
		for _, g := range r.Groups {
			dg, ok := s.deleteShareGroup(ctx, r.Version, g)
			if !ok {
				cp.Groups = append(cp.Groups, g)
				continue
			}
			done = append(done, dg)
		}
		return &cp, func(resp kmsg.Response) {
			if dr, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
				dr.Groups = append(dr.Groups, done...)
			}
			respond(resp)
		}
	}
	return req, respond
}

// shareGroupHere returns share group id as its coordinator here sees it (nil: not a
// share group coordinated here) and the coordinator epoch.
func (s *Server) shareGroupHere(ctx context.Context, id string) (*share.Group, int32, error) {
	epoch, err := s.shareCoordinator(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	g, err := s.share.Groups.Describe(ctx, id, epoch, s.now())
	return g, epoch, err
}

func shareGroupState(g *share.Group) string {
	if len(g.Members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (s *Server) listShareGroups(ctx context.Context, r *kmsg.ListGroupsRequest) []kmsg.ListGroupsResponseGroup {
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	all := allowedCluster(ctx, acl.OpDescribe)
	var out []kmsg.ListGroupsResponseGroup
	// Every group of the __consumer_offsets partitions led here, loaded if need be
	// (after a move, before its members heartbeat); groups that fail to load are left
	// out of this answer.
	ids, err := s.share.Groups.Coordinated(ctx, s.shareCoords(ctx), s.now())
	if err != nil {
		s.log.Warn("listing share groups", "err", err)
	}
	// And those loaded here that no index names yet (groups from before the index,
	// until their next heartbeat).
	for _, id := range s.share.Groups.List() {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		if !all && !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceGroup, id) {
			continue
		}
		g, _, err := s.shareGroupHere(ctx, id)
		if err != nil || g == nil {
			continue
		}
		state := shareGroupState(g)
		if (r.Version >= 4 && !match(r.StatesFilter, state)) || (r.Version >= 5 && !match(r.TypesFilter, "share")) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "share", state, "share"
		out = append(out, lg)
	}
	return out
}

// deleteShareGroup deletes share group id if it is one coordinated here (ok false: it
// is not; the group coordinator answers for it).
func (s *Server) deleteShareGroup(ctx context.Context, version int16, id string) (kmsg.DeleteGroupsResponseGroup, bool) {
	dg := kmsg.NewDeleteGroupsResponseGroup()
	dg.Group = id
	if !acl.Allowed(ctx, acl.OpDelete, acl.ResourceGroup, id) {
		return dg, false // the group coordinator answers the denial
	}
	g, epoch, err := s.shareGroupHere(ctx, id)
	if err != nil || g == nil {
		return dg, false
	}
	topics, err := s.share.Groups.Delete(ctx, id, epoch, s.now())
	if err == nil {
		view := s.meta.View()
		for _, t := range topics {
			if mt := view.Topics[t]; mt != nil {
				for p := range mt.Partitions {
					if err = s.share.ResetState(ctx, share.Key{Group: id, Topic: mt.ID, Partition: int32(p)}, -1); err != nil {
						break
					}
				}
			}
		}
	}
	if dg.ErrorCode = shareCode(err); dg.ErrorCode != 0 && version >= 3 {
		msg := err.Error()
		dg.ErrorMessage = &msg
	}
	return dg, true
}

// shareAdminGroup checks an offsets admin request's group: it must be a share group
// coordinated here with no members. It returns the code to answer.
func (s *Server) shareAdminGroup(ctx context.Context, op acl.Operation, id string) int16 {
	if !acl.Allowed(ctx, op, acl.ResourceGroup, id) {
		return kerr.GroupAuthorizationFailed.Code
	}
	g, _, err := s.shareGroupHere(ctx, id)
	switch {
	case err != nil:
		return shareCode(err)
	case g == nil:
		return kerr.GroupIDNotFound.Code
	case len(g.Members) > 0:
		return kerr.NonEmptyGroup.Code
	}
	return 0
}

func (s *Server) alterShareOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if resp.ErrorCode = s.shareAdminGroup(ctx, acl.OpRead, req.GroupID); resp.ErrorCode != 0 {
		return resp
	}
	view := s.meta.View()
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := view.Topics[t.Topic]
		if mt != nil {
			rt.TopicID = mt.ID
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowedTopic(ctx, acl.OpRead, t.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case mt == nil || p.Partition < 0 || int(p.Partition) >= len(mt.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < -1:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				rp.ErrorCode = shareCode(s.share.ResetState(ctx, share.Key{Group: req.GroupID, Topic: mt.ID, Partition: p.Partition}, p.StartOffset))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (s *Server) deleteShareOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if resp.ErrorCode = s.shareAdminGroup(ctx, acl.OpDelete, req.GroupID); resp.ErrorCode != 0 {
		return resp
	}
	view := s.meta.View()
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		mt := view.Topics[t.Topic]
		switch {
		case !allowedTopic(ctx, acl.OpRead, t.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case mt == nil:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			rt.TopicID = mt.ID
			var errs []error
			for p := range mt.Partitions {
				errs = append(errs, s.share.ResetState(ctx, share.Key{Group: req.GroupID, Topic: mt.ID, Partition: int32(p)}, -1))
			}
			rt.ErrorCode = shareCode(errors.Join(errs...))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
