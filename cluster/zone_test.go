package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// proxyProduce sends one batch to the broker at addr (which need not lead the
// partition) and returns its answer.
func proxyProduce(t *testing.T, addr, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxFor(t, 30*time.Second), cl.SeedBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// waitTopic waits until every partition of topic has an active leader in broker 0's view.
func waitTopic(t *testing.T, c *Cluster, topic string) *metadata.Topic {
	t.Helper()
	var tp *metadata.Topic
	testutil.Eventually(t, 30*time.Second, "every partition of "+topic+" led", func() bool {
		tp = c.Broker(0).Client.View().Topics[topic]
		if tp == nil {
			return false
		}
		for _, p := range tp.Partitions {
			if p.Leader < 0 || p.Recovering {
				return false
			}
		}
		return true
	})
	return tp
}

// A batch produced at a broker that does not lead the partition goes through it as a
// proxy: the leader links it from the proxy's WAL with its offsets, idempotence holds
// across the proxy (a retry gets the original offset, a gap in sequence is refused), and
// the records read back from the leader at the offsets the proxy acked.
func TestProxyProduce(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxFor(t, 30*time.Second), 3, 1, nil, "zoned"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "zoned")
	want := map[string]int64{}
	for _, mp := range tp.Partitions {
		proxy := -1
		for i := 0; i < 3; i++ {
			if int32(i+1) != mp.Leader {
				proxy = i
				break
			}
		}
		addr := c.KafkaAddrs()[proxy]
		pid := int64(1000 + mp.Index)
		for seq := int32(0); seq < 6; seq += 2 {
			v1, v2 := fmt.Sprintf("p%d-s%d", mp.Index, seq), fmt.Sprintf("p%d-s%d", mp.Index, seq+1)
			r := proxyProduce(t, addr, "zoned", mp.Index, kafkatest.Batch(pid, 0, seq, []byte(v1), []byte(v2)))
			if r.ErrorCode != 0 {
				t.Fatalf("partition %d seq %d through broker %d: %v", mp.Index, seq, proxy+1, kerr.ErrorForCode(r.ErrorCode))
			}
			if r.BaseOffset != int64(seq) {
				t.Fatalf("partition %d seq %d: base offset %d", mp.Index, seq, r.BaseOffset)
			}
			want[v1], want[v2] = r.BaseOffset, r.BaseOffset+1
		}
		// A retry of the last batch is answered with its original offset, once.
		r := proxyProduce(t, addr, "zoned", mp.Index, kafkatest.Batch(pid, 0, 4, []byte("dup-a"), []byte("dup-b")))
		if r.ErrorCode != 0 || r.BaseOffset != 4 {
			t.Fatalf("retry through the proxy: code %d base %d, want the original 4", r.ErrorCode, r.BaseOffset)
		}
		// A sequence gap is the leader's OUT_OF_ORDER_SEQUENCE_NUMBER, passed on.
		r = proxyProduce(t, addr, "zoned", mp.Index, kafkatest.Batch(pid, 0, 9, []byte("gap")))
		if r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
			t.Fatalf("sequence gap through the proxy: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		// The leader itself takes the next one: the proxy's batches are in its state.
		r = proxyProduce(t, c.KafkaAddrs()[mp.Leader-1], "zoned", mp.Index, kafkatest.Batch(pid, 0, 6, []byte(fmt.Sprintf("p%d-s6", mp.Index))))
		if r.ErrorCode != 0 || r.BaseOffset != 6 {
			t.Fatalf("direct produce after proxied ones: code %d base %d", r.ErrorCode, r.BaseOffset)
		}
		want[fmt.Sprintf("p%d-s6", mp.Index)] = 6
	}
	got := consumeAll(t, c, "zoned", len(want))
	for v, off := range want {
		r := got[v]
		if r == nil || r.Offset != off {
			t.Fatalf("%s: read %v, want offset %d", v, r, off)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d (a duplicate or a refused batch got in)", len(got), len(want))
	}
}

// Proxied batches stay in the log through failovers: the leader of a partition is
// killed (its successor loads the links from its WAL and reads the batches from the
// proxy's WAL), then a proxy is killed (its WAL is sealed; the leader keeps reading the
// linked batches there). The producer state travels with the links: the next sequence is
// accepted, a retry of an old one is answered with its original offset.
func TestProxiedDataSurvivesFailover(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxFor(t, 30*time.Second), 3, 1, nil, "zf"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "zf")
	want := map[string]int64{}
	proxyOf := map[int32]int32{}
	for _, mp := range tp.Partitions {
		proxy := mp.Leader%3 + 1 // the next broker
		proxyOf[mp.Index] = proxy
		for seq := int32(0); seq < 3; seq++ {
			v := fmt.Sprintf("p%d-s%d", mp.Index, seq)
			r := proxyProduce(t, c.KafkaAddrs()[proxy-1], "zf", mp.Index, kafkatest.Batch(int64(2000+mp.Index), 0, seq, []byte(v)))
			if r.ErrorCode != 0 {
				t.Fatalf("%s through broker %d: %v", v, proxy, kerr.ErrorForCode(r.ErrorCode))
			}
			want[v] = r.BaseOffset
		}
	}
	p0 := tp.Partitions[0]
	dead := []int32{p0.Leader}
	c.KillBroker(int(p0.Leader) - 1)
	// Kill the proxy of another partition too, unless it is the last broker standing.
	var p1 metadata.Partition
	for _, mp := range tp.Partitions {
		if mp.Leader != p0.Leader && proxyOf[mp.Index] != p0.Leader {
			p1 = mp
			break
		}
	}
	if px := proxyOf[p1.Index]; p1.Leader != 0 && px != p0.Leader {
		dead = append(dead, px)
		c.KillBroker(int(px) - 1)
	}
	testutil.Eventually(t, time.Minute, "partitions of the killed brokers served elsewhere", func() bool {
		i := c.LeaderIndex()
		return i >= 0 && allServed(c.Controller(i).View(), "zf", dead...)
	})
	got := consumeAll(t, c, "zf", len(want))
	for v, off := range want {
		if r := got[v]; r == nil || r.Offset != off {
			t.Fatalf("%s: read %v, want offset %d", v, r, off)
		}
	}
	var live string
	for i := 1; i <= 3; i++ {
		if i != int(dead[0]) && (len(dead) < 2 || i != int(dead[1])) {
			live = c.KafkaAddrs()[i-1]
		}
	}
	r := proxyProduce(t, live, "zf", 0, kafkatest.Batch(2000, 0, 2, []byte("retry")))
	if r.ErrorCode != 0 || r.BaseOffset != want["p0-s2"] {
		t.Fatalf("retry after failover: code %d base %d, want %d", r.ErrorCode, r.BaseOffset, want["p0-s2"])
	}
	r = proxyProduce(t, live, "zf", 0, kafkatest.Batch(2000, 0, 3, []byte("p0-s3")))
	if r.ErrorCode != 0 || r.BaseOffset != want["p0-s2"]+1 {
		t.Fatalf("next sequence after failover: code %d base %d", r.ErrorCode, r.BaseOffset)
	}
}

// A broker that does not lead a partition serves its reads as a read replica: it follows
// the leader's index and reads the bytes from the shared WALs itself. Records produced
// directly and through proxies read back at their offsets, new records arrive through
// the replica's long poll, ListOffsets and OffsetForLeaderEpoch agree with the leader's.
func TestReadReplica(t *testing.T) {
	c := startCluster(t, nil)
	cl := newClient(t, c)
	if _, err := kadm.NewClient(cl).CreateTopic(ctxFor(t, 30*time.Second), 1, 1, nil, "rr"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "rr")
	leader := tp.Partitions[0].Leader
	replica := leader%3 + 1
	other := replica%3 + 1
	want := []string{}
	for i := 0; i < 5; i++ {
		v := fmt.Sprintf("direct-%d", i)
		r := proxyProduce(t, c.KafkaAddrs()[leader-1], "rr", 0, kafkatest.Batch(-1, 0, 0, []byte(v)))
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		want = append(want, v)
		v = fmt.Sprintf("proxied-%d", i)
		r = proxyProduce(t, c.KafkaAddrs()[other-1], "rr", 0, kafkatest.Batch(-1, 0, 0, []byte(v)))
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		want = append(want, v)
	}
	// A client that only knows the replica: it fetches there.
	rc, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[replica-1]))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	fetchAt := func(offset int64) []string {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 2000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		req.ReplicaID = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "rr"
		ft.TopicID = tp.ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = offset
		fp.PartitionMaxBytes = 1 << 20
		fp.CurrentLeaderEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctxFor(t, 30*time.Second), rc.SeedBrokers()[0])
		if err != nil {
			t.Fatal(err)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch at the replica: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
		fp2, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: "rr"}, &rp, kgo.DefaultDecompressor(), nil)
		if fp2.Err != nil {
			t.Fatalf("decoding the replica's answer: %v", fp2.Err)
		}
		var out []string
		for _, r := range fp2.Records {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		return out
	}
	var got []string
	testutil.Eventually(t, 30*time.Second, "the replica serves every record", func() bool {
		got = fetchAt(0)
		return len(got) >= len(want)
	})
	for i, v := range want {
		if got[i] != fmt.Sprintf("%d:%s", i, v) {
			t.Fatalf("record %d at the replica: %s, want %d:%s", i, got[i], i, v)
		}
	}
	if c.Broker(int(replica)-1).Broker.Replicas() != 1 {
		t.Fatalf("broker %d follows %d partitions, want 1", replica, c.Broker(int(replica)-1).Broker.Replicas())
	}
	// A long poll at the replica is answered by a record produced at the leader.
	done := make(chan []string, 1)
	go func() { done <- fetchAt(int64(len(want))) }()
	time.Sleep(200 * time.Millisecond)
	if r := proxyProduce(t, c.KafkaAddrs()[leader-1], "rr", 0, kafkatest.Batch(-1, 0, 0, []byte("late"))); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if late := <-done; len(late) != 1 || late[0] != fmt.Sprintf("%d:late", len(want)) {
		t.Fatalf("long poll at the replica returned %v", late)
	}
	// ListOffsets at the replica and at the leader agree (once the replica caught up).
	end := int64(len(want) + 1)
	radm := kadm.NewClient(rc)
	testutil.Eventually(t, 10*time.Second, "the replica's end offset", func() bool {
		lo, err := radm.ListEndOffsets(ctxFor(t, 10*time.Second), "rr")
		o, _ := lo.Lookup("rr", 0)
		return err == nil && o.Err == nil && o.Offset == end
	})
}
