package kafka

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/metadata/metatest"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/wal"
)

// hintCluster is broker 1's front end in a cluster of brokers 1, 2 (zone a), 3 and 4
// (zone b), zone routing on, with topic "t" of 16 partitions placed round-robin; broker 4
// is then fenced, so its partitions are taken over and recovering (no serving leader).
// The backend refuses every partition with refuse (nil: served).
func hintCluster(t *testing.T, refuse func(index int32) error) (*Server, *metatest.Store) {
	t.Helper()
	meta := metatest.NewStore(1, 2, 3, 4)
	ctx := context.Background()
	for id, zone := range map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"} {
		if err := meta.RegisterBroker(ctx, metadata.Broker{ID: id, Host: "host-" + strconv.Itoa(int(id)), Port: 9000 + id, Rack: zone}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := meta.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 16, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if err := meta.Fence(4); err != nil {
		t.Fatal(err)
	}
	s, be := startServerWith(t, meta, func(c *Config) {
		c.ZoneRouting, c.Zone = true, "a"
		c.Routing = routing.Config{TagKeys: []string{"weir_az"}}
	})
	be.refuse = func(_ *metadata.Topic, index int32) error { return refuse(index) }
	return s, meta
}

// hintClient is a franz-go client of the front end with client.id id.
func hintClient(t *testing.T, s *Server, id string, opts ...kgo.Opt) *kgo.Broker {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.lns[0].Addr().String()), kgo.ClientID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// roundTrip sends req to b and returns its answer.
func roundTrip[R kmsg.Response](t *testing.T, b *kgo.Broker, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

// produceAll sends one batch to each of the first n partitions of "t".
func produceAll(t *testing.T, b *kgo.Broker, n int32) *kmsg.ProduceResponse {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for i := range n {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = i, kafkatest.Batch(-1, -1, -1, []byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return roundTrip[*kmsg.ProduceResponse](t, b, req)
}

// fetchAll fetches the first n partitions of topic t (by name and ID, whichever the
// version uses), without waiting.
func fetchAll(t *testing.T, b *kgo.Broker, tp *metadata.Topic, n int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tp.Name, tp.ID
	for i := range n {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = i, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return roundTrip[*kmsg.FetchResponse](t, b, req)
}

// metadataLeaders is what Metadata tells the client of b about "t": each partition's
// leader (-1 for LEADER_NOT_AVAILABLE) and epoch, and each broker's endpoint.
func metadataLeaders(t *testing.T, b *kgo.Broker) (leaders, epochs []int32, endpoints map[int32]string) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	name := "t"
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.MetadataResponse](t, b, req)
	endpoints = map[int32]string{}
	for _, br := range resp.Brokers {
		endpoints[br.NodeID] = fmt.Sprintf("%s:%d", br.Host, br.Port)
	}
	mt := resp.Topics[0]
	leaders, epochs = make([]int32, len(mt.Partitions)), make([]int32, len(mt.Partitions))
	for _, p := range mt.Partitions {
		leaders[p.Partition], epochs[p.Partition] = p.Leader, p.LeaderEpoch
	}
	return leaders, epochs, endpoints
}

// A partition refused for leadership names, in Produce (v10+) and Fetch (v16+), the
// leader and epoch Metadata names to the same client, and the answer lists exactly the
// endpoints of the leaders named: for a client of zone a a zone-a broker stands in for a
// zone-b leader (never the cross-zone leader Metadata hides from it), for a client of
// zone b the reverse, for a client of no zone the real leader; a recovering partition has
// no leader (-1) and adds no endpoint. Partitions served, and partitions refused for
// another reason, carry no hint.
func TestLeaderHintsAreWhatMetadataSays(t *testing.T) {
	const n = 16
	refuse := func(index int32) error {
		switch {
		case index == 0:
			return nil // served
		case index == 1:
			return metadata.ErrUnknownTopic // refused, not for leadership
		case index%2 == 0:
			return fmt.Errorf("moving away: %w", partlog.ErrNotLeader)
		default:
			return partlog.ErrFencedEpoch
		}
	}
	s, meta := hintCluster(t, refuse)
	view := meta.View()
	tp := view.Topics["t"]
	for _, client := range []string{"app", "app,weir_az=a", "app,weir_az=b"} {
		t.Run(client, func(t *testing.T) {
			b := hintClient(t, s, client)
			leaders, epochs, endpoints := metadataLeaders(t, b)
			hidden, none := 0, 0
			for i, l := range leaders {
				if l >= 0 && l != tp.Partitions[i].Leader {
					hidden++
				}
				if l < 0 {
					none++
				}
			}
			if none == 0 || (client != "app" && hidden == 0) {
				t.Fatalf("the cluster does not exercise the cases: %d partitions without a leader, %d with a stand-in (leaders %v)", none, hidden, leaders)
			}

			check := func(api string, p int32, code int16, leader, epoch int32) {
				t.Helper()
				want := refuse(p)
				switch {
				case want == nil || p == 1:
					if leader != -1 || epoch != -1 {
						t.Errorf("%s partition %d (code %d): hint %d@%d, want none", api, p, code, leader, epoch)
					}
					return
				case code != kafkaCode(want):
					t.Errorf("%s partition %d: code %d, want %d", api, p, code, kafkaCode(want))
				}
				if leader != leaders[p] || epoch != epochs[p] {
					t.Errorf("%s partition %d: hint %d@%d, Metadata says %d@%d", api, p, leader, epoch, leaders[p], epochs[p])
				}
			}
			wantNodes := map[int32]string{}
			for p := int32(2); p < n; p++ {
				if l := leaders[p]; l >= 0 {
					wantNodes[l] = endpoints[l]
				}
			}

			pr := produceAll(t, b, n)
			if pr.Version < 10 {
				t.Fatalf("produce v%d, want v10+", pr.Version)
			}
			for _, p := range pr.Topics[0].Partitions {
				check("produce", p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
			}
			gotNodes := map[int32]string{}
			for _, br := range pr.Brokers {
				if _, dup := gotNodes[br.NodeID]; dup {
					t.Errorf("produce: broker %d listed twice", br.NodeID)
				}
				gotNodes[br.NodeID] = fmt.Sprintf("%s:%d", br.Host, br.Port)
				if br.Rack == nil || *br.Rack == "" {
					t.Errorf("produce: broker %d without its rack", br.NodeID)
				}
			}
			if fmt.Sprint(gotNodes) != fmt.Sprint(wantNodes) {
				t.Errorf("produce lists endpoints %v, want %v", gotNodes, wantNodes)
			}

			fr := fetchAll(t, b, tp, n)
			if fr.Version < 16 {
				t.Fatalf("fetch v%d, want v16", fr.Version)
			}
			for _, p := range fr.Topics[0].Partitions {
				check("fetch", p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch)
			}
			gotNodes = map[int32]string{}
			for _, br := range fr.Brokers {
				gotNodes[br.NodeID] = fmt.Sprintf("%s:%d", br.Host, br.Port)
			}
			if fmt.Sprint(gotNodes) != fmt.Sprint(wantNodes) {
				t.Errorf("fetch lists endpoints %v, want %v", gotNodes, wantNodes)
			}
		})
	}
}

// The hint is computed from the view when the answer is sent: a partition that moved
// while its append was under way (the append then fails: it is not led here any more)
// names its new leader and epoch, not the view the request started with.
func TestLeaderHintFollowsTheCurrentView(t *testing.T) {
	s, meta := hintCluster(t, func(int32) error { return nil })
	be := s.be.(*fakeBackend)
	b := hintClient(t, s, "app")
	before := meta.View().Topics["t"].Partitions[0]
	target := int32(2)
	if before.Leader == target {
		target = 3
	}
	be.mu.Lock()
	be.appendErr = partlog.ErrNotLeader
	be.onApp = func() {
		if err := meta.BeginMove("t", 0, target); err != nil {
			t.Error(err)
		}
		if err := meta.CompleteMoveGen(context.Background(), meta.View().Topics["t"].ID, 0, 0, 0); err != nil {
			t.Error(err)
		}
	}
	be.mu.Unlock()
	p := produceAll(t, b, 1).Topics[0].Partitions[0]
	after := meta.View().Topics["t"].Partitions[0]
	if after.Leader != target || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("move: %+v -> %+v", before, after)
	}
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != target || p.CurrentLeader.LeaderEpoch != after.LeaderEpoch {
		t.Fatalf("code %d, hint %d@%d; want NOT_LEADER_OR_FOLLOWER naming the new leader %d@%d", p.ErrorCode, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch, target, after.LeaderEpoch)
	}
}

// Versions without the fields get no hint (Produce v9, Fetch v15: what Kafka 3.6 speaks),
// and a Fetch before v6 gets NOT_LEADER_OR_FOLLOWER for a storage error, which its
// clients may not know (v16: KAFKA_STORAGE_ERROR).
func TestLeaderHintVersions(t *testing.T) {
	s, meta := hintCluster(t, func(index int32) error {
		if index == 1 {
			return partlog.ErrStorage
		}
		return partlog.ErrNotLeader
	})
	tp := meta.View().Topics["t"]
	old := hintClient(t, s, "app", kgo.MaxVersions(kversion.V3_6_0()))
	pr := produceAll(t, old, 1)
	fr := fetchAll(t, old, tp, 1)
	if pr.Version != 9 || fr.Version != 15 {
		t.Fatalf("produce v%d, fetch v%d; want v9, v15", pr.Version, fr.Version)
	}
	if p := pr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 || len(pr.Brokers) != 0 {
		t.Errorf("produce v9: code %d, hint %d, %d brokers; want NOT_LEADER_OR_FOLLOWER and no hint", p.ErrorCode, p.CurrentLeader.LeaderID, len(pr.Brokers))
	}
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 || len(fr.Brokers) != 0 {
		t.Errorf("fetch v15: code %d, hint %d, %d brokers; want NOT_LEADER_OR_FOLLOWER and no hint", p.ErrorCode, p.CurrentLeader.LeaderID, len(fr.Brokers))
	}

	for _, c := range []struct {
		versions *kversion.Versions
		want     int16
	}{{kversion.V0_11_0(), kerr.NotLeaderForPartition.Code}, {nil, kerr.KafkaStorageError.Code}} {
		var opts []kgo.Opt
		if c.versions != nil {
			opts = append(opts, kgo.MaxVersions(c.versions))
		}
		fr := fetchAll(t, hintClient(t, s, "app", opts...), tp, 2)
		if p := fr.Topics[0].Partitions[1]; p.ErrorCode != c.want {
			t.Errorf("fetch v%d, storage error: code %d, want %d", fr.Version, p.ErrorCode, c.want)
		}
	}
}

// Every refusal a client meets while a partition fails over or moves is one that makes
// every client refresh its metadata and retry at once; none is UNKNOWN_SERVER_ERROR
// (librdkafka fails the message for good) or REQUEST_TIMED_OUT.
func TestFailoverRefusalsRefreshMetadata(t *testing.T) {
	for _, c := range []struct {
		what string
		err  error
		want int16
	}{
		{"not led here, loading, moving away, lease lapsed", partlog.ErrNotLeader, kerr.NotLeaderForPartition.Code},
		{"proxy cannot reach the leader", fmt.Errorf("%w: the partition's leader is unreachable", partlog.ErrNotLeader), kerr.NotLeaderForPartition.Code},
		{"broker shutting down or restarting on a new WAL", wal.ErrClosed, kerr.NotLeaderForPartition.Code},
		{"read of a closed WAL", fmt.Errorf("%w: %w", partlog.ErrStorage, wal.ErrClosed), kerr.NotLeaderForPartition.Code},
		{"broker fenced", fmt.Errorf("%w: broker 3 is not active", metadata.ErrFenced), kerr.NotLeaderForPartition.Code},
		{"client's epoch older than the leader's", partlog.ErrFencedEpoch, kerr.FencedLeaderEpoch.Code},
		{"client's epoch newer than this broker knows", partlog.ErrUnknownEpoch, kerr.UnknownLeaderEpoch.Code},
		{"topic not in this broker's view yet", metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	} {
		if got := kafkaCode(c.err); got != c.want {
			t.Errorf("%s (%v): code %d (%v), want %d (%v)", c.what, c.err, got, kerr.ErrorForCode(got), c.want, kerr.ErrorForCode(c.want))
		}
		if !kerr.IsRetriable(kerr.ErrorForCode(kafkaCode(c.err))) {
			t.Errorf("%s: %v is not retriable", c.what, kerr.ErrorForCode(kafkaCode(c.err)))
		}
	}
}
