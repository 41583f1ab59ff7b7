package kafka

// FindCoordinator (key 10), versions 0-6.
//
// A group's coordinator is the leader of its __consumer_offsets partition, a
// transactional id's the leader of its __transaction_state partition (each topic is
// created on first use). With transactions off (txn.go) transaction coordinator lookups
// get COORDINATOR_NOT_AVAILABLE with a message saying so. v4+ batch several keys in one
// request.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 10, min: 0, max: 6, blocking: true, handle: answer((*Server).handleFindCoordinator)})
}

func (s *Server) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	lname := listenerNameFrom(ctx) // on a named (or zone) listener: the coordinator's listener of that name
	answer := func(key string) (metadata.Broker, int16, *string) {
		fail := func(code int16, msg string) (metadata.Broker, int16, *string) {
			return metadata.Broker{ID: -1, Port: -1}, code, &msg
		}
		if req.CoordinatorType != 0 {
			if !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceTransactionalID, key) {
				return fail(kerr.TransactionalIDAuthorizationFailed.Code, "Describe on the transactional id is not allowed")
			}
			if s.txn == nil {
				return fail(kerr.CoordinatorNotAvailable.Code, "transactions are off on this cluster")
			}
			if key == "" {
				return fail(kerr.InvalidRequest.Code, "transactional id must not be empty")
			}
			t, idx, err := s.txn.Partition(ctx, key, true)
			if err != nil {
				return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
			}
			return s.coordinatorBroker(t.Partitions[idx].Leader, fail)
		}
		// Before the coordinator is looked up: that may create __consumer_offsets.
		if !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceGroup, key) {
			return fail(kerr.GroupAuthorizationFailed.Code, "Describe on the group is not allowed")
		}
		if key == "" {
			return fail(kerr.InvalidGroupID.Code, "group id must not be empty")
		}
		t, idx, err := s.be.CoordinatorPartition(ctx, key, true)
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
		}
		return s.coordinatorBroker(t.Partitions[idx].Leader, fail)
	}
	if req.Version <= 3 {
		br, code, msg := answer(req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID = br.ID
		resp.Host, resp.Port = br.Endpoint(lname)
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var br metadata.Broker
		br, c.ErrorCode, c.ErrorMessage = answer(key)
		c.NodeID = br.ID
		c.Host, c.Port = br.Endpoint(lname)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// coordinatorBroker is the answer naming broker id, the leader of a coordinator's
// partition, or COORDINATOR_NOT_AVAILABLE when it is not an active broker.
func (s *Server) coordinatorBroker(id int32, fail func(int16, string) (metadata.Broker, int16, *string)) (metadata.Broker, int16, *string) {
	br, ok := s.meta.View().Broker(id)
	if !ok || !br.Active() {
		return fail(kerr.CoordinatorNotAvailable.Code, "the coordinator's broker is not available")
	}
	return br, 0, nil
}
