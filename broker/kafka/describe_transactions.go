package kafka

// DescribeTransactions (key 65) and ListTransactions (key 66), version 0, served when
// transactions are on (txn.go), for kafka-transactions.sh and kadm. Describe: DESCRIBE on
// each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it); the
// coordinator answers NOT_COORDINATOR for ids it does not own. List: the transactions
// this broker coordinates, those whose id the caller may DESCRIBE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 65, min: 0, max: 0, blocking: true, on: txnOn, handle: answer((*Server).handleDescribeTransactions)})
	register(api{key: 66, min: 0, max: 0, blocking: true, on: txnOn, handle: answer((*Server).handleListTransactions)})
}

func (s *Server) handleDescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	var ask []string
	for _, id := range req.TransactionalIDs {
		if acl.Allowed(ctx, acl.OpDescribe, acl.ResourceTransactionalID, id) {
			ask = append(ask, id)
		}
	}
	got := map[string]TxnDescription{}
	for _, d := range s.txn.Describe(ctx, ask) {
		got[d.TxnID] = d
	}
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch = id, -1, -1
		d, ok := got[id]
		switch {
		case !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceTransactionalID, id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case !ok:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		case d.Err != nil:
			st.ErrorCode = kafkaCode(d.Err)
		default:
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State, d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			byTopic := map[string]int{}
			for _, p := range d.Partitions {
				i, ok := byTopic[p.Topic]
				if !ok {
					i = len(st.Topics)
					byTopic[p.Topic] = i
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = p.Topic
					st.Topics = append(st.Topics, t)
				}
				st.Topics[i].Partitions = append(st.Topics[i].Partitions, p.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

func (s *Server) handleListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	for _, l := range s.txn.List(ctx, req.StateFilters, req.ProducerIDFilters) {
		if !acl.Allowed(ctx, acl.OpDescribe, acl.ResourceTransactionalID, l.TxnID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.TxnID, l.ProducerID, l.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}
