package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
)

// shareSeen counts each record value's deliveries to franz-go share consumers.
type shareSeen struct {
	mu    sync.Mutex
	count map[string]int
	dc    map[string]int32 // delivery count of the last delivery
	by    map[string]map[string]bool
}

func (s *shareSeen) n() (distinct, dup int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.count {
		distinct++
		if k > 1 {
			dup++
		}
	}
	return
}

// startShareConsumer runs a franz-go share consumer that accepts everything it polls
// (franz-go accepts the previous poll's records at the next poll).
func startShareConsumer(t *testing.T, c *Cluster, name, group, topic string, s *shareSeen) *kgo.Client {
	cl := newClient(t, c, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name))
	go func() {
		for {
			fs := cl.PollFetches(ctxFor(t, 120*time.Second))
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				s.mu.Lock()
				s.count[v]++
				s.dc[v] = r.DeliveryCount()
				if s.by[name] == nil {
					s.by[name] = map[string]bool{}
				}
				s.by[name][v] = true
				s.mu.Unlock()
			})
		}
	}()
	return cl
}

// rawShareMember joins group as member id over raw requests and acquires records of
// partition idx from its leader without acknowledging them (a consumer that dies holding
// records); it returns the acquired values and offsets.
func rawShareMember(t *testing.T, raw *kgo.Client, group, member, topic string, idx int32, leader int32, want int) (map[string]int64, [16]byte, int32) {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	testutil.Eventually(t, 30*time.Second, "raw member joins", func() bool {
		resp, err := hb.RequestWith(ctxFor(t, 10*time.Second), raw)
		return err == nil && resp.ErrorCode == 0
	})
	md, err := kadm.NewClient(raw).Metadata(ctxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	tid := md.Topics[topic].ID
	got := map[string]int64{}
	epoch := int32(0)
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("raw member %s acquires %d records", member, want), func() bool {
		f := kmsg.NewPtrShareFetchRequest()
		f.GroupID, f.MemberID, f.ShareSessionEpoch = &group, &member, epoch
		f.MaxWaitMillis, f.MaxRecords, f.MaxBytes = 500, int32(want-len(got)), 1<<20
		if epoch == 0 {
			tp := kmsg.NewShareFetchRequestTopicPartition()
			tp.Partition, tp.PartitionMaxBytes = idx, 1<<20
			f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: tid, Partitions: []kmsg.ShareFetchRequestTopicPartition{tp}}}
		}
		resp, err := f.RequestWith(ctxFor(t, 10*time.Second), raw.Broker(int(leader)))
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		epoch++
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				for _, v := range acquiredValues(t, rp) {
					got[v.value] = v.offset
				}
			}
		}
		return len(got) >= want
	})
	return got, tid, epoch
}

type offVal struct {
	value  string
	offset int64
}

// acquiredValues decodes the records of a ShareFetch partition that fall in its
// acquired ranges.
func acquiredValues(t *testing.T, rp kmsg.ShareFetchResponseTopicPartition) []offVal {
	var out []offVal
	for b := rp.Records; len(b) > 0; {
		h, err := recbatch.Parse(b)
		if err != nil || h.Size() > len(b) {
			t.Fatalf("undecodable batch in a share fetch: %v", err)
		}
		off := h.BaseOffset // produced batches: offset deltas 0, 1, 2, ...
		_ = recbatch.DecodeRecords(b[:h.Size()], func(_, value []byte) {
			for _, a := range rp.AcquiredRecords {
				if off >= a.FirstOffset && off <= a.LastOffset {
					out = append(out, offVal{string(value), off})
				}
			}
			off++
		})
		b = b[h.Size():]
	}
	return out
}

// Two franz-go share consumers of one share group read a 3-partition topic: every
// record once, none twice; records a member acquired and never acknowledged (it died)
// come back to them when its lock runs out, with delivery count 2. Then, after a
// graceful move of a partition's leader, acknowledged records are not delivered again
// and unacknowledged ones are.
func TestShareGroupsWithFranzGo(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	c := startShareCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "queue", "sg"
	if err := createTopic(t, adm, 3, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produced := produceValues(t, prod, topic, 3, 100, "a")

	// A member that dies holding 20 records of partition 0.
	md, err := adm.Metadata(ctxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	leader0 := md.Topics[topic].Partitions[0].Leader
	held, _, _ := rawShareMember(t, raw, group, "zombie", topic, 0, leader0, 20)

	s := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	c1 := startShareConsumer(t, c, "c1", group, topic, s)
	c2 := startShareConsumer(t, c, "c2", group, topic, s)
	testutil.Eventually(t, 90*time.Second, "every record read by the share consumers", func() bool {
		n, _ := s.n()
		return n == len(produced)
	})
	// Auto-accepts are sent at the next poll; give them a moment to land, then check.
	time.Sleep(time.Second) // why: the consumers accept the last poll's records on their next poll
	n, dup := s.n()
	if n != len(produced) || dup != 0 {
		t.Fatalf("%d distinct records read of %d, %d read more than once", n, len(produced), dup)
	}
	s.mu.Lock()
	for v := range held {
		if s.dc[v] != 2 {
			t.Errorf("record %s held by the dead member delivered with count %d, want 2", v, s.dc[v])
		}
	}
	for v := range produced {
		if _, h := held[v]; !h && s.dc[v] != 1 {
			t.Errorf("record %s delivered with count %d, want 1", v, s.dc[v])
		}
	}
	both := len(s.by["c1"]) > 0 && len(s.by["c2"]) > 0
	s.mu.Unlock()
	if !both {
		t.Errorf("one consumer read everything: c1 %d, c2 %d", len(s.by["c1"]), len(s.by["c2"]))
	}

	// DescribeShareGroupOffsets: every partition's start offset is past its 100 records.
	testutil.Eventually(t, 30*time.Second, "start offsets at 100", func() bool {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0, 1, 2}}}
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		resp, err := req.RequestWith(ctxFor(t, 10*time.Second), raw)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			return false
		}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			if p.ErrorCode != 0 || p.StartOffset != 100 {
				t.Logf("partition %d: start %d code %d", p.Partition, p.StartOffset, p.ErrorCode)
				return false
			}
		}
		return true
	})

	// Phase 2: the state survives a graceful move of partition 0's leader. The
	// consumers leave first, so the new records go to the raw member.
	c1.Close()
	c2.Close()
	more := produceValues(t, prod, topic, 1, 40, "b") // partition 0 only
	held2, tid, next := rawShareMember(t, raw, group, "mover", topic, 0, leader0, 40)
	// The mover accepts the first 20 of what it holds, keeps the rest.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	g, m := group, "mover"
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &g, &m, next
	accepted := map[string]bool{}
	var minOff int64 = 1 << 62
	for _, o := range held2 {
		minOff = min(minOff, o)
	}
	for v, o := range held2 {
		if o < minOff+20 {
			accepted[v] = true
		}
	}
	at := kmsg.ShareAcknowledgeRequestTopic{TopicID: tid}
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: minOff, LastOffset: minOff + 19, AcknowledgeTypes: []int8{1}}}}}
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{at}
	resp, err := ack.RequestWith(ctxFor(t, 10*time.Second), raw.Broker(int(leader0)))
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledging: %v %+v", err, resp)
	}
	if len(more) != 40 || len(accepted) != 20 {
		t.Fatalf("produced %d, accepted %d", len(more), len(accepted))
	}
	tp := c.Broker(0).Client.View().Topics[topic]
	movePartition(t, c, 1, tp, 0, leader0%3+1)
	s.mu.Lock()
	s.count, s.dc = map[string]int{}, map[string]int32{}
	s.mu.Unlock()
	startShareConsumer(t, c, "c3", group, topic, s)
	testutil.Eventually(t, 90*time.Second, "the 20 unacknowledged records redelivered after the move", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := 0
		for v := range held2 {
			if !accepted[v] && s.count[v] > 0 {
				k++
			}
		}
		return k == 20
	})
	time.Sleep(time.Second) // why: a late redelivery of an accepted record would show by now
	s.mu.Lock()
	defer s.mu.Unlock()
	for v := range s.count {
		if accepted[v] || (len(v) > 0 && v[0] == 'a') {
			t.Errorf("record %s delivered again after the move (acknowledged before it)", v)
		}
	}
	for v := range held2 {
		if !accepted[v] && s.dc[v] != 2 {
			t.Errorf("unacknowledged record %s redelivered with count %d, want 2", v, s.dc[v])
		}
	}
}
