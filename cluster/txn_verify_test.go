package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
)

// txnLateBatchRefused: KIP-890 part 1 against a cluster, with raw requests. A
// transactional batch for a partition never added to the producer's transaction, and a
// late batch of the same producer epoch after its transaction was aborted, are refused
// with INVALID_TXN_STATE by the partition's leader (its coordinator, on another broker or
// the same, says the partition is not in an ongoing transaction), and the partition's
// last stable offset is not held: read_committed's latest offset is the high watermark.
func txnLateBatchRefused(t *testing.T, c *Cluster) {
	cl := newClient(t, c)
	adm := kadm.NewClient(cl)
	if err := createTopic(t, adm, 1, "latetx"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	id := "late-tx"
	var pid int64
	var epoch int16
	testutil.EventuallyNoError(t, 30*time.Second, "InitProducerId", func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = &id, 60000, -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
		}
		return err
	})
	// produce answers the partition's code, retrying the retriable ones as a producer
	// would (the new topic's leader is not known everywhere at once).
	produceOnce := func(seq int32, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10000, &id
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "latetx"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kafkatest.TxnBatch(pid, epoch, seq, []byte(value))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("produce %q: %v", value, err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	produce := func(seq int32, value string) int16 {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			code := produceOnce(seq, value)
			if !kerr.IsRetriable(kerr.ErrorForCode(code)) || time.Now().After(deadline) {
				return code
			}
			time.Sleep(100 * time.Millisecond) // a retriable answer: as a producer's backoff
		}
	}
	stable := func(when string) {
		t.Helper()
		end, err := adm.ListEndOffsets(ctx, "latetx")
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.ListCommittedOffsets(ctx, "latetx")
		if err != nil {
			t.Fatal(err)
		}
		hw, _ := end.Lookup("latetx", 0)
		lso, _ := committed.Lookup("latetx", 0)
		if hw.Err != nil || lso.Err != nil || hw.Offset != lso.Offset {
			t.Fatalf("%s: read_committed latest %d (%v), high watermark %d (%v): a transaction holds the partition", when, lso.Offset, lso.Err, hw.Offset, hw.Err)
		}
	}

	// Never added: the producer has no transaction at all.
	if code := produce(0, "never-added"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a batch for a partition never added: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	stable("after the batch never added")

	// Added, written, aborted; then a late batch of the same epoch.
	retry := func(what string, f func() (int16, error)) {
		t.Helper()
		testutil.EventuallyNoError(t, 30*time.Second, what, func() error {
			code, err := f()
			if err == nil && code != 0 {
				err = fmt.Errorf("%s: %w", what, kerr.ErrorForCode(code))
			}
			return err
		})
	}
	retry("AddPartitionsToTxn", func() (int16, error) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "latetx", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
	if code := produce(0, "in-txn"); code != 0 {
		t.Fatalf("a batch of the ongoing transaction: %v", kerr.ErrorForCode(code))
	}
	retry("EndTxn abort", func() (int16, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, false
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	// The abort's marker is written before EndTxn answers (bounded: wait for it).
	testutil.EventuallyNoError(t, 30*time.Second, "the abort marker", func() error {
		end, err := adm.ListEndOffsets(context.Background(), "latetx")
		if err != nil {
			return err
		}
		if o, _ := end.Lookup("latetx", 0); o.Offset < 2 {
			return fmt.Errorf("high watermark %d", o.Offset)
		}
		return nil
	})
	if code := produce(1, "late"); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a late batch after the abort: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	stable("after the late batch")
	if got := consumeIsolated(t, c, "latetx", kgo.ReadUncommitted(), 1); len(got) != 1 || got[0] != "in-txn" {
		t.Fatalf("records in latetx: %q, want only the aborted in-txn", got)
	}
}
