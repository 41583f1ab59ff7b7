package kafka

// AddOffsetsToTxn (key 25) and EndTxn (key 26), versions 0-4, served when transactions
// are on (txn.go). AddOffsetsToTxn: WRITE on the transactional id, READ on the group (as
// Kafka: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED); the group's
// __consumer_offsets partition joins the transaction, so its offsets (TxnOffsetCommit)
// commit or abort with it. EndTxn: WRITE on the transactional id; the answer comes once
// the outcome is durable at the coordinator (markers follow). EndTxn v5 (transactions v2,
// KIP-890 part 2) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 25, min: 0, max: 4, blocking: true, on: txnOn, handle: answer((*Server).handleAddOffsetsToTxn)})
	register(api{key: 26, min: 0, max: 4, blocking: true, on: txnOn, handle: answer((*Server).handleEndTxn)})
}

func (s *Server) handleAddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !acl.Allowed(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !acl.Allowed(ctx, acl.OpRead, acl.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	default:
		resp.ErrorCode = txnCode(s.txn.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), 25, req.Version)
	}
	return resp
}

func (s *Server) handleEndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !acl.Allowed(ctx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	resp.ErrorCode = txnCode(s.txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), 26, req.Version)
	return resp
}
