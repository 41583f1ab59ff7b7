package kafka

// InitProducerId (key 22), versions 0-4.
//
// Hands idempotent producers a producer ID from the metadata store (never reused, also
// across restarts) with epoch 0. v3+ producers may pass their current ID and epoch to bump
// the epoch after an error (KIP-360); at the maximum epoch a new ID is issued. A
// transactional ID goes to the transaction coordinator (WRITE on it required), or is
// refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED when transactions are off (txn.go).

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 22, min: 0, max: 4, blocking: true, handle: answer((*Server).handleInitProducerID)})
}

func (s *Server) handleInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		// WRITE on the transactional id (Kafka's rule); without a coordinator every
		// transactional producer is refused so.
		if s.txn == nil || !acl.Allowed(ctx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp
		}
		pid, epoch, err := s.txn.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
		if err != nil {
			resp.ErrorCode = txnCode(err, 22, req.Version)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
		return resp
	}
	// An idempotent producer needs IdempotentWrite on the cluster or Write on some topic
	// (KIP-679).
	if !allowedCluster(ctx, acl.OpIdempotentWrite) && !acl.FromContext(ctx).AllowedAny(acl.OpWrite, acl.ResourceTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp
	}
	id, err := s.meta.AllocateProducerID(ctx)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		s.log.Warn("allocate producer id failed", "err", err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
