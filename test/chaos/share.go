package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share group mode (--share): an idempotent producer writes unique values to
// Topic-share (as many partitions as the load's) at ShareRate records/s, and
// ShareMembers franz-go share consumers (kgo.ShareGroup, one share group) consume it as
// a queue, accepting every record (franz-go accepts a poll's records at the next
// poll). Each delivery is kept with the record's delivery count.
//
// At the end the producer stops and the consumers go on until every acked record was
// delivered and the group's share-partition start offsets (DescribeShareGroupOffsets)
// reached every partition's end: every record was acknowledged (or archived), none is
// in flight. checkShare then counts a violation for an acked record never delivered, a
// delivered value no one sent, and a partition whose start offset stayed below its end
// (records never acknowledged). A record delivered more than once (delivery count > 1)
// is a redelivery: expected where a fault cut a consumer's acquisition or
// acknowledgement, counted and reported; deliveries at the delivery limit (5: the
// broker archives such a record if that delivery is not accepted) are counted too.

// shareTopic is the queue's topic; shareGroup its share group.
func (c *Config) shareTopic() string { return c.Topic + "-share" }
func (c *Config) shareGroup() string { return "chaos-" + c.Topic + "-share" }

// shareBrokerArgs turn share groups on for an own cluster, starting at the earliest
// offset (the consumers join while the producer already writes) with members that
// heartbeat often.
var shareBrokerArgs = []string{"--share-groups=true", "--share-auto-offset-reset=earliest", "--share-heartbeat-interval=500ms",
	"--share-record-lock-duration=10s"}

// shareDrainWait bounds the consumers' drain at the end.
const shareDrainWait = 90 * time.Second

// shareDeliveryLimit is the brokers' default group.share.delivery.count.limit.
const shareDeliveryLimit = 5

// ShareReport is what the share group's check found.
type ShareReport struct {
	Members int `json:"members"`
	Acked   int `json:"acked"`
	Failed  int `json:"failed"`
	// Delivered counts distinct values delivered; Deliveries every delivery.
	Delivered  int `json:"delivered"`
	Deliveries int `json:"deliveries"`
	// Redelivered counts the values delivered more than once, MaxDeliveryCount the
	// highest delivery count seen, AtLimit the deliveries at the delivery limit.
	Redelivered      int `json:"redelivered"`
	MaxDeliveryCount int `json:"max_delivery_count"`
	AtLimit          int `json:"at_limit"`
	// AckErrors counts the partitions of acknowledgements that failed (franz-go's
	// ShareAckCallback; the records come back after their lock).
	AckErrors int `json:"ack_errors"`
	// Drained: the time from the end of the load until every record was delivered and
	// acknowledged.
	Drained    Dur      `json:"drained"`
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

func (r *ShareReport) String() string {
	s := fmt.Sprintf("share group: %d members, %d records acked (%d failed), %d delivered (%d deliveries, %d redelivered, max delivery count %d, %d at the limit), %d acknowledgement errors, drained in %v, %d violations",
		r.Members, r.Acked, r.Failed, r.Delivered, r.Deliveries, r.Redelivered, r.MaxDeliveryCount, r.AtLimit, r.AckErrors, r.Drained, r.Violations)
	if len(r.Examples) > 0 {
		s += ": " + strings.Join(r.Examples, "; ")
	}
	return s
}

// shareLoad is the queue's producer and consumers.
type shareLoad struct {
	cfg  Config
	boot []string
	prod *kgo.Client
	cons []*kgo.Client

	mu        sync.Mutex
	acked     map[string]bool // value → acked (false: failed)
	delivered map[string][]int32
	ackErrors int

	stopProd, stopCons context.CancelFunc
	prodWG, consWG     sync.WaitGroup
	pending            sync.WaitGroup
	once               sync.Once
}

func startShare(ctx context.Context, cfg Config, boot []string) (*shareLoad, error) {
	s := &shareLoad{cfg: cfg, boot: boot, acked: map[string]bool{}, delivered: map[string][]int32{}}
	var err error
	s.prod, err = kgo.NewClient(append(clientOpts(boot), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(2*time.Minute))...)
	if err != nil {
		return nil, err
	}
	var cctx context.Context
	cctx, s.stopCons = context.WithCancel(ctx)
	for m := 0; m < cfg.ShareMembers; m++ {
		cl, err := kgo.NewClient(append(clientOpts(boot), kgo.ShareGroup(cfg.shareGroup()), kgo.ConsumeTopics(cfg.shareTopic()),
			kgo.ClientID(fmt.Sprintf("chaos-share-%d", m)), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, r := range rs {
					if r.Err != nil {
						s.ackErrors++
					}
				}
			}))...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.cons = append(s.cons, cl)
		s.consWG.Add(1)
		go s.consume(cctx, cl)
	}
	var pctx context.Context
	pctx, s.stopProd = context.WithCancel(ctx)
	s.prodWG.Add(1)
	go s.produce(pctx)
	return s, nil
}

func (s *shareLoad) produce(ctx context.Context) {
	defer s.prodWG.Done()
	paced(ctx, s.cfg.ShareRate, func(n int) {
		v := fmt.Sprintf("share-%d", n)
		s.pending.Add(1)
		s.prod.Produce(context.Background(), &kgo.Record{Topic: s.cfg.shareTopic(), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer s.pending.Done()
			s.mu.Lock()
			s.acked[v] = err == nil
			s.mu.Unlock()
		})
	})
}

func (s *shareLoad) consume(ctx context.Context, cl *kgo.Client) {
	defer s.consWG.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		s.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			s.delivered[v] = append(s.delivered[v], r.DeliveryCount())
		})
		s.mu.Unlock()
	}
}

// finish stops the producer, waits for its produces, lets the consumers drain the
// queue (every acked record delivered, the start offsets at the ends) and checks.
func (s *shareLoad) finish(ctx context.Context) (*ShareReport, error) {
	s.stopProd()
	s.prodWG.Wait()
	done := make(chan struct{})
	go func() { s.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		return nil, fmt.Errorf("chaos: share producer: produces neither acked nor failed 3m after the load stopped")
	}
	start := time.Now()
	ends, err := endOffsets(ctx, s.boot, s.cfg.shareTopic())
	if err != nil {
		return nil, err
	}
	var behind map[int32]int64
	for {
		s.mu.Lock()
		missing := 0
		for v, ok := range s.acked {
			if ok && len(s.delivered[v]) == 0 {
				missing++
			}
		}
		s.mu.Unlock()
		behind, err = shareBehind(ctx, s.boot, s.cfg.shareGroup(), s.cfg.shareTopic(), ends)
		if missing == 0 && err == nil && len(behind) == 0 {
			break
		}
		if time.Since(start) > shareDrainWait {
			if err != nil {
				return nil, err
			}
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second): // the consumers poll and accept meanwhile
		}
	}
	drained := time.Since(start)
	s.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := checkShare(s.acked, s.delivered, behind, ends)
	r.Members, r.AckErrors, r.Drained = s.cfg.ShareMembers, s.ackErrors, Dur(drained)
	return r, nil
}

// close stops and closes every client (once).
func (s *shareLoad) close() {
	s.once.Do(func() {
		if s.stopProd != nil {
			s.stopProd()
			s.prodWG.Wait()
		}
		if s.stopCons != nil {
			s.stopCons()
		}
		for _, cl := range s.cons {
			cl.Close()
		}
		s.consWG.Wait()
		if s.prod != nil {
			s.prod.Close()
		}
	})
}

// endOffsets lists topic's partition ends.
func endOffsets(ctx context.Context, boot []string, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && err == nil {
			err = fmt.Errorf("chaos: end of %s/%d: %w", topic, o.Partition, o.Err)
		}
		ends[o.Partition] = o.Offset
	})
	return ends, err
}

// shareBehind asks DescribeShareGroupOffsets for the group's start offset of every
// partition and returns those below their end (partition → start).
func shareBehind(ctx context.Context, boot []string, group, topic string, ends map[int32]int64) (map[int32]int64, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rt := kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: topic}
	for p := range ends {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{rt}
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return nil, fmt.Errorf("chaos: DescribeShareGroupOffsets %s: %w", group, err)
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("chaos: DescribeShareGroupOffsets %s: %d groups", group, len(resp.Groups))
	}
	if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("chaos: DescribeShareGroupOffsets %s: %w", group, err)
	}
	behind := map[int32]int64{}
	seen := map[int32]bool{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("chaos: DescribeShareGroupOffsets %s/%d: %w", topic, p.Partition, err)
			}
			seen[p.Partition] = true
			if p.StartOffset < ends[p.Partition] {
				behind[p.Partition] = p.StartOffset
			}
		}
	}
	for p, end := range ends {
		if !seen[p] && end > 0 {
			behind[p] = -1 // no state: nothing acknowledged
		}
	}
	return behind, nil
}

// checkShare compares the produced records (value → acked) with the deliveries (value
// → the delivery counts, in order) and the partitions whose start offset stayed below
// their end.
func checkShare(acked map[string]bool, delivered map[string][]int32, behind, ends map[int32]int64) *ShareReport {
	r := &ShareReport{}
	violate := func(format string, a ...any) {
		r.Violations++
		if len(r.Examples) < maxTxnExamples {
			r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
		}
	}
	var lost []string
	for v, ok := range acked {
		if !ok {
			r.Failed++
			continue
		}
		r.Acked++
		if len(delivered[v]) == 0 {
			lost = append(lost, v)
		}
	}
	sort.Strings(lost)
	for _, v := range lost {
		violate("%s acked but never delivered", v)
	}
	var foreign []string
	for v, dcs := range delivered {
		if _, ok := acked[v]; !ok {
			foreign = append(foreign, v)
		}
		r.Delivered++
		r.Deliveries += len(dcs)
		redelivered := len(dcs) > 1
		for _, dc := range dcs {
			r.MaxDeliveryCount = max(r.MaxDeliveryCount, int(dc))
			redelivered = redelivered || dc > 1
			if dc >= shareDeliveryLimit {
				r.AtLimit++
			}
		}
		if redelivered {
			r.Redelivered++
		}
	}
	sort.Strings(foreign)
	for _, v := range foreign {
		violate("%s delivered but never sent", v)
	}
	ps := make([]int32, 0, len(behind))
	for p := range behind {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		violate("partition %d: share group start offset %d below the end %d: records never acknowledged", p, behind[p], ends[p])
	}
	return r
}
