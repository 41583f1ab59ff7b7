package kafka

// Fetch (key 1), versions 4-16.
//
// Reads synced batches (below the high watermark) of each partition from the tail cache,
// or from the WAL for evicted ones, bounded by partition max bytes and the response's max
// bytes; the first batch found is returned whole even when larger (KIP-74), so a consumer
// never gets stuck on a big batch. When less than min bytes is available the fetch waits up
// to max wait, woken by high-watermark advances of its partitions. Incremental fetch
// sessions (KIP-227, fetch_session.go) decide what a fetch reads (the request's
// partitions, or every partition of its session, so a long poll wakes for any of them)
// and which partitions its answer carries; each partition is resolved, authorized and
// read the same either way. v13+ name topics by ID. isolation_level 1 (read_committed) reads nothing at or
// above the last stable offset (the first offset of the oldest open transaction, else the
// high watermark) and lists the aborted transactions that overlap what it returns
// ({producer ID, first offset}: the consumer drops that producer's batches from there to
// the abort marker); read_uncommitted reads to the high watermark, markers included
// (clients skip control batches). Both answer the last stable offset. From v16 a partition
// refused with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its current leader and
// that leader's endpoint (KIP-951, leader_hint.go); before v6 KAFKA_STORAGE_ERROR is
// answered as NOT_LEADER_OR_FOLLOWER (finishFetch).
//
// Registered as blocking: a cold partition's first read may wait on object storage, and a
// long poll waits for data, on the fetch's own goroutine; the connection keeps reading.

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 1, min: 4, max: 16, blocking: true, handle: func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		s.handleFetch(c, sl, req.(*kmsg.FetchRequest))
	}})
}

type fetchTarget struct {
	r         Reader
	req       *kmsg.FetchRequestTopicPartition
	out       *kmsg.FetchResponseTopicPartition
	committed bool // isolation level read_committed
}

func (s *Server) handleFetch(c *conn, sl *slot, req *kmsg.FetchRequest) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	fc, parts, err := s.sessions.begin(req)
	if err != nil {
		resp.ErrorCode = kafkaCode(err)
		sl.respond(resp)
		return
	}
	view := s.meta.View()
	if req.Version >= 11 && req.Rack != "" {
		rack := req.Rack
		c.rack.Store(&rack)
	}
	zone := s.clientZone(c, sl.clientID, view)
	// A consumer of another zone is pointed at its zone's read replica (KIP-392).
	redirect := zone != "" && zone != s.cfg.Zone && req.ReplicaID < 0 && req.Version >= 11
	ss := s.session(c) // nil: no authorizer
	var targets []fetchTarget
	// One answer partition per part, in one array: targets point into it.
	outs := make([]kmsg.FetchResponseTopicPartition, len(parts))
	var t *metadata.Topic
	readable, start := false, 0
	for i := range parts {
		fp := &parts[i]
		if i == 0 || fp.group != parts[i-1].group {
			start = i
			if req.Version >= 13 {
				t = view.TopicByID(fp.id)
			} else {
				t = view.Topics[fp.topic]
			}
			name := fp.topic
			if t != nil {
				name = t.Name
			}
			readable = ss.Allowed(acl.OpRead, acl.ResourceTopic, name)
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = fp.topic, fp.id
			resp.Topics = append(resp.Topics, st)
		}
		if i+1 == len(parts) || parts[i+1].group != fp.group { // the group's last part
			resp.Topics[len(resp.Topics)-1].Partitions = outs[start : i+1 : i+1]
		}
		out := &outs[i]
		*out = kmsg.NewFetchResponseTopicPartition()
		out.Partition = fp.req.Partition
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
		// Empty, never null: librdkafka fails to parse a null record set ("invalid
		// MessageSetSize -1") and never sees the partition's error code, so it keeps
		// fetching from a broker that answers NOT_LEADER instead of refreshing.
		out.RecordBatches = []byte{}
		if t == nil && req.Version >= 13 {
			out.ErrorCode = kerr.UnknownTopicID.Code
			continue
		}
		if !readable {
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			continue
		}
		r, err := s.be.Reader(t, fp.req.Partition, -1, zone) // the epoch is checked by each read
		switch {
		case err != nil:
			out.ErrorCode = kafkaCode(err)
		case redirect && s.preferReplica(view, zone, t, fp.req.Partition, r, out):
			// no records here: the client reads from out.PreferredReadReplica
		default:
			targets = append(targets, fetchTarget{r: r, req: &fp.req, out: out, committed: req.IsolationLevel == 1})
		}
	}

	maxBytes := s.clampFetch(req, parts)
	// Register for wake-ups before the first read so an append between the read and the
	// wait cannot be missed.
	wake := make(chan struct{}, 1)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if wait > 0 {
		for _, t := range targets {
			t.r.Wait(wake)
		}
	}
	if got, errs := s.fillFetch(c.ctx, targets, maxBytes, wait <= 0); got >= int(req.MinBytes) || errs || wait <= 0 || len(targets) == 0 {
		unwait(targets, wake)
		s.finishFetch(c, sl, resp, targets, zone, &fc, parts)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-wake:
			unwait(targets, wake) // drop stale registrations before registering again
		case <-timer.C:
			unwait(targets, wake)
			s.fillFetch(c.ctx, targets, maxBytes, true)
			s.finishFetch(c, sl, resp, targets, zone, &fc, parts)
			return
		case <-c.ctx.Done():
			unwait(targets, wake)
			sl.respond(resp) // never written; frees the slot
			return
		}
		for _, t := range targets {
			t.r.Wait(wake)
		}
		if got, errs := s.fillFetch(c.ctx, targets, maxBytes, false); got >= int(req.MinBytes) || errs {
			unwait(targets, wake)
			s.finishFetch(c, sl, resp, targets, zone, &fc, parts)
			return
		}
	}
}

// clampFetch cuts the fetch's sizes to --fetch-max-bytes (a client asking for 2 GiB gets
// at most the limit, and nothing is sized from the request's numbers) and returns the
// answer's byte limit.
func (s *Server) clampFetch(req *kmsg.FetchRequest, parts []fetchPart) int {
	limit := s.lim.cfg.FetchMaxBytes
	clamped := false
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = min(52428800, limit) // the clients' fetch.max.bytes default
	} else if maxBytes > limit {
		maxBytes, clamped = limit, true
	}
	for i := range parts {
		if p := &parts[i].req; p.PartitionMaxBytes > limit {
			p.PartitionMaxBytes, clamped = limit, true
		}
	}
	if clamped {
		s.lim.fetchClamped.Inc()
	}
	return int(maxBytes)
}

// fillFetch (re)computes every target's answer; it reports the record bytes found and
// whether any partition has an error (which answers the fetch at once).
//
// Partitions are read in waves so that those served from object storage (tens of ms a
// GET) are read concurrently, while the answer stays what reading them one after another
// would allow: a wave takes the partitions from the first unread one on, each given the
// budget left if all before it filled their limits, until max bytes is spoken for. Cold
// partitions of a wave are read concurrently (at most maxColdReads at once), the others
// inline. The results are then taken in request order against the real budget: a
// partition gets at most min(partition max, max bytes - what the partitions before it
// got), cut at a batch boundary, except that the first partition with data keeps one
// whole batch however large (KIP-74); so every read of a wave asks for at least one
// batch while nothing is taken yet. If the wave left budget unused, the next wave reads
// on; partitions past the budget are asked with limit 0 (their offsets and errors).
// Unless final (the poll's last read), an error a long poll may wait out
// (kcode.WaitsOut: a read replica behind the offset) answers nothing yet, not the error.
func (s *Server) fillFetch(ctx context.Context, targets []fetchTarget, maxBytes int, final bool) (int, bool) {
	total, errs := 0, false
	res := make([]fetchRead, len(targets))
	for i := 0; i < len(targets); {
		j, reserved := i, total
		if total >= maxBytes {
			j = len(targets) // the rest get limit 0: one wave
		}
		for j < len(targets) && reserved < maxBytes {
			res[j].limit = partitionLimit(targets[j], maxBytes-reserved)
			reserved += res[j].limit
			j++
		}
		readWave(ctx, targets[i:j], res[i:j], total == 0)
		for k := i; k < j; k++ {
			t, r := targets[k], &res[k]
			out := t.out
			out.RecordBatches = []byte{} // see handleFetch: never null
			out.ErrorCode = 0
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = r.hw, r.lso, r.logStart
			out.AbortedTransactions = nil
			if r.err != nil && !final && kcode.WaitsOut(r.err) {
				continue // nothing yet: the long poll waits (partlog.ErrReplicaBehind)
			}
			if r.err != nil {
				out.ErrorCode = kafkaCode(r.err)
				errs = true
				continue
			}
			buf := r.data
			if room := partitionLimit(t, maxBytes-total); len(buf) > room && total > 0 {
				buf = wholeBatches(buf, room)
			}
			if len(buf) > 0 {
				out.RecordBatches = buf
			}
			if t.committed {
				out.AbortedTransactions = abortedIn(r.aborted, buf)
			}
			total += len(buf)
		}
		i = j
	}
	return total, errs
}

// maxColdReads bounds the partitions of one fetch read from object storage at once;
// objread bounds the GETs of the whole broker.
const maxColdReads = 8

// fetchRead is one partition's read in fillFetch.
type fetchRead struct {
	limit             int
	data              []byte
	hw, lso, logStart int64
	aborted           []metadata.AbortedTxn // read_committed
	err               error
}

// coldReader is a Reader that can tell whether a read at offset is likely to go to
// object storage (slow: worth reading concurrently with other partitions).
type coldReader interface {
	Cold(offset int64) bool
}

// readWave reads targets into res: cold ones concurrently (at most maxColdReads at
// once), the others on this goroutine meanwhile. first asks every read for at least one
// batch.
func readWave(ctx context.Context, targets []fetchTarget, res []fetchRead, first bool) {
	read := func(k int) {
		t, r := targets[k], &res[k]
		if t.committed {
			var cr CommittedRead
			cr, r.err = t.r.ReadCommitted(ctx, t.req.FetchOffset, r.limit, first, t.req.CurrentLeaderEpoch)
			r.data, r.hw, r.lso, r.logStart, r.aborted = cr.Data, cr.HW, cr.LSO, cr.LogStart, cr.Aborted
			return
		}
		r.data, r.hw, r.logStart, r.err = t.r.Read(ctx, t.req.FetchOffset, r.limit, first, t.req.CurrentLeaderEpoch)
		r.lso = min(t.r.LastStable(), r.hw)
	}
	var cold []int
	if len(targets) > 1 {
		for k, t := range targets {
			if cr, ok := t.r.(coldReader); ok && (first || res[k].limit > 0) && cr.Cold(t.req.FetchOffset) {
				cold = append(cold, k)
			}
		}
	}
	if len(cold) < 2 { // one slow read gains nothing from a goroutine
		for k := range targets {
			read(k)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int32
	var panicked atomic.Pointer[any]
	for range min(maxColdReads, len(cold)) {
		wg.Go(func() {
			defer func() { // re-raised below, where the handler's containment sees it
				if p := recover(); p != nil {
					panicked.CompareAndSwap(nil, &p)
				}
			}()
			for n := int(next.Add(1)) - 1; n < len(cold); n = int(next.Add(1)) - 1 {
				read(cold[n])
			}
		})
	}
	for k, c := 0, 0; k < len(targets); k++ {
		if c < len(cold) && cold[c] == k {
			c++
			continue
		}
		read(k)
	}
	wg.Wait()
	if p := panicked.Load(); p != nil {
		panic(*p)
	}
}

// partitionLimit is what target t may get with left bytes of the response's budget left.
func partitionLimit(t fetchTarget, left int) int {
	return max(0, min(int(t.req.PartitionMaxBytes), left))
}

// abortedIn is the answer's aborted transactions for the batches b returned: of those
// the read found, the ones that begin at or before b's last offset (the budget may have
// cut b since). Never null for read_committed, as Kafka answers.
func abortedIn(aborted []metadata.AbortedTxn, b []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	last := recbatch.LastOffsetOf(b)
	for _, a := range aborted {
		if a.First <= last {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.First
			out = append(out, at)
		}
	}
	return out
}

// wholeBatches cuts record batches b to the whole batches within the first n bytes.
func wholeBatches(b []byte, n int) []byte {
	pos := 0
	for pos+12 <= len(b) {
		size := 12 + int(binary.BigEndian.Uint32(b[pos+8:]))
		if size < 12 || pos+size > n || pos+size > len(b) {
			break
		}
		pos += size
	}
	return b[:pos]
}

// finishFetch settles the fetch's session (fetch_session.go), accounts the bytes served
// and answers a client of zone: v16+ partitions
// refused for leadership carry a leader hint (KIP-951, leader_hint.go); before v6, whose
// clients may not know KAFKA_STORAGE_ERROR (they would take it for a fatal error), it is
// NOT_LEADER_OR_FOLLOWER, which every client retries after a metadata refresh, as Kafka
// answers them.
func (s *Server) finishFetch(c *conn, sl *slot, resp *kmsg.FetchResponse, targets []fetchTarget, zone string, fc *fetchSessionCtx, parts []fetchPart) {
	if err := s.sessions.finish(fc, parts, resp); err != nil {
		resp.Topics, resp.ErrorCode = nil, kafkaCode(err)
		sl.respond(resp)
		return
	}
	for _, t := range targets { // the read's partitions, also those an incremental answer left out (none has records)
		if n := len(t.out.RecordBatches); n > 0 {
			s.metrics.bytesOut.WithLabelValues(t.r.Topic()).Add(float64(n))
			if c.tc != nil {
				c.tc.Records(routing.Out, n)
			}
		}
	}
	if resp.Version <= 5 {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == kerr.KafkaStorageError.Code {
					p.ErrorCode = kerr.NotLeaderForPartition.Code
				}
			}
		}
	}
	s.hintFetch(c, zone, resp)
	sl.respond(resp)
}

// preferReplica points a consumer of zone at the zone's read replica of a partition led
// here (KIP-392): it reports whether out now names one (and carries the partition's
// offsets) instead of records.
func (s *Server) preferReplica(view *metadata.View, zone string, t *metadata.Topic, index int32, r Reader, out *kmsg.FetchResponseTopicPartition) bool {
	if len(t.Name) > 1 && t.Name[:2] == "__" {
		return false // internal topics have no read replicas
	}
	pref := s.zoneView(view).ReadReplica(zone, t.ID, index, t.Partitions[index].Leader)
	if pref < 0 || pref == s.cfg.NodeID {
		return false
	}
	logStart, hw, _ := r.LogInfo()
	out.PreferredReadReplica = pref
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw, min(r.LastStable(), hw), logStart
	return true
}

// unwait removes wake from the partitions' waiter lists so idle partitions do not
// accumulate stale channels from repeated long polls.
func unwait(targets []fetchTarget, wake chan struct{}) {
	for _, t := range targets {
		t.r.Unwait(wake)
	}
}
