package kafka

// Produce (key 0), versions 3-11.
//
// Each partition's data must be exactly one record batch v2 (Kafka's rule for v3+). The
// batch is validated (size against the topic's max.message.bytes, CRC32C, header sanity,
// no control batches, no transactional ones unless Config.Transactions), its records decoded and checked like Kafka's
// LogValidator does (recbatch.ValidateRecords: counts, offset deltas, lengths,
// timestamps; compressed batches decompressed within maxDecompressedBatch; keys present in
// a compacted topic), copied once into a WAL record and queued on the
// WAL. Offsets are assigned when the WAL's committer prepares the record, so offset order
// is log order, and the partition acknowledges only after the record's group has been
// fdatasync'ed. acks=0, 1 and all are therefore equally durable; acks=0 just sends no
// answer (and, like Kafka, closes the connection if a partition failed so the client
// notices). A retried idempotent batch is answered with the offset its original got, once
// that original is durable. From v10 a partition refused with NOT_LEADER_OR_FOLLOWER
// names its current leader and that leader's endpoint (KIP-951, leader_hint.go), as
// Metadata would name it to this client. With Config.VerifyTxnPartitions a producer's
// first transactional batch in a partition waits for its coordinator's word that the
// partition is in its transaction (KIP-890, txnverify.go).
//
// Produce runs on the connection's reader goroutine (not registered as blocking), so the
// batches of one connection reach the WAL in arrival order; the answer is sent from the
// WAL's callbacks. It may still wait there on purpose: backpressure delays the next
// request of a connection whose WAL is filling up, and auto-creating a topic asks the
// controller.

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/acl"
)

// maxDecompressedBatch bounds what one compressed batch may decompress to for the
// record check (recbatch.ValidateRecords): max.message.bytes bounds the compressed size
// only.
const maxDecompressedBatch = recbatch.MaxDecompressed

func init() {
	register(api{key: 0, min: 3, max: 11, handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		s.handleProduce(c, sl, req.(*kmsg.ProduceRequest))
	}})
}

func (s *Server) handleProduce(c *conn, sl *slot, req *kmsg.ProduceRequest) {
	// A transactional producer needs transactions on and WRITE on its transactional id
	// (Kafka's rule); its batches are then accepted as transactional (ProduceRules).
	if req.TransactionID != nil && (s.txn == nil || !s.session(c).Allowed(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID)) {
		sl.respond(produceError(req, kerr.TransactionalIDAuthorizationFailed.Code))
		return
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// Uploads behind and the WAL filling up: slow this connection down first (its next
	// request is read only after this one is queued), refuse at the limit.
	delay, walErr := s.be.Admit()
	if delay > 0 {
		resp.ThrottleMillis = int32(delay / time.Millisecond)
		select {
		case <-time.After(delay):
		case <-s.ctx.Done():
		}
	}
	view := s.meta.View()
	zone := s.clientZone(c, sl.clientID, view)
	ss := s.session(c) // nil: no authorizer

	// Each partition's answer is written by its own append callback (distinct elements);
	// the last callback's pending.Add orders those writes before the response is sent.
	var pending atomic.Int32
	pending.Store(1) // released after all partitions are queued
	var failed atomic.Bool
	finish := func() {
		if pending.Add(-1) != 0 {
			return
		}
		if req.Acks == 0 {
			if failed.Load() {
				sl.closeIt = true
			}
			sl.respond(nil)
			return
		}
		s.hintProduce(c, zone, resp) // KIP-951: where a refused partition's leader is now
		sl.respond(resp)
	}
	fail := func(out *kmsg.ProduceResponseTopicPartition, err error, withMessage bool) {
		out.ErrorCode = kafkaCode(err)
		if withMessage {
			out.ErrorMessage = errMessage(err)
		}
		failed.Store(true)
		s.metrics.produceErrs.WithLabelValues(kerr.ErrorForCode(out.ErrorCode).Error()).Inc()
	}

	for _, rt := range req.Topics {
		// Write on the topic covers idempotent batches too (KIP-679): no cluster
		// IdempotentWrite is needed. Checked before existence, so a denied client
		// cannot probe for topic names.
		writable := ss.Allowed(acl.OpWrite, acl.ResourceTopic, rt.Topic)
		t := view.Topics[rt.Topic]
		if t == nil && writable && s.cfg.AutoCreateTopics && metadata.ValidTopicName(rt.Topic) == nil &&
			(ss.Allowed(acl.OpCreate, acl.ResourceCluster, acl.ClusterName) || ss.Allowed(acl.OpCreate, acl.ResourceTopic, rt.Topic)) {
			t = s.autoCreate(c, rt.Topic)
			if t != nil {
				// Make sure the broker has the partitions before appending.
				s.be.Refresh()
			}
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		sp := resp.Topics[len(resp.Topics)-1].Partitions
		for i, rp := range rt.Partitions {
			out := &sp[i]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition = rp.Partition
			if c.tc != nil {
				c.tc.Records(routing.In, len(rp.Records))
			}
			if !writable {
				fail(out, errTopicAuthorization, false)
				continue
			}
			if err := refuseInternal("produce to", rt.Topic); err != nil {
				fail(out, err, true)
				continue
			}
			w, err := s.be.Writer(t, rp.Partition, zone)
			if err == nil && walErr != nil {
				fail(out, walErr, true)
				continue
			}
			if err != nil {
				fail(out, err, false)
				continue
			}
			maxBytes, _ := t.Config("max.message.bytes")
			mb, _ := strconv.Atoi(maxBytes)
			h, err := recbatch.ValidateProduceWith(rp.Records, recbatch.ProduceRules{MaxBytes: mb, Transactional: s.cfg.Transactions})
			if err == nil {
				err = recbatch.ValidateRecords(&h, rp.Records, recbatch.RecordRules{MaxDecompressed: maxDecompressedBatch, RequireKeys: t.Compacted()})
			}
			if err != nil {
				fail(out, err, true)
				continue
			}
			tsType, _ := t.Config("message.timestamp.type")
			pending.Add(1)
			appendIt := func(err error) {
				if err != nil {
					fail(out, err, true)
					finish()
					return
				}
				w.Append(&h, rp.Records, tsType == "LogAppendTime", func(r AppendResult) {
					if r.Err != nil {
						fail(out, r.Err, true)
					} else {
						out.BaseOffset = r.Base
						out.LogStartOffset = r.LogStart
						out.LogAppendTime = r.AppendTime
					}
					finish()
				})
			}
			switch {
			case s.gate == nil || !h.Transactional():
				appendIt(nil)
			case req.TransactionID == nil:
				// Kafka's rule: a transactional batch comes with the transactional id
				// whose coordinator is asked.
				appendIt(kerr.TransactionalIDAuthorizationFailed)
			default:
				// KIP-890: the producer's first batch here waits for its coordinator
				// (txnverify.go); the reader goes on meanwhile.
				s.gate.admit(s.ctx, *req.TransactionID, t, rp.Partition, h.ProducerID, h.ProducerEpoch, w, appendIt)
			}
		}
	}
	finish()
}

// autoCreate creates a topic with the broker's defaults; a concurrent creation is fine.
func (s *Server) autoCreate(c *conn, name string) *metadata.Topic {
	_, err := s.meta.CreateTopic(c.ctx, metadata.TopicSpec{Name: name, Partitions: s.cfg.DefaultPartitions, ReplicationFactor: -1}, false)
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		s.log.Warn("auto-create topic failed", "topic", name, "err", err)
		return nil
	}
	return s.meta.View().Topics[name]
}

func produceError(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
