package kafka

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCreateTopicsReplicationFactor: a create asking for any replication factor of 1 or
// more (or -1, the default) succeeds, and every answer says 1: the CreateTopics
// response (with a message saying why when more was asked) and Metadata's replicas and
// ISR (the leader alone). 0 and below -1 are refused as Kafka refuses them.
func TestCreateTopicsReplicationFactor(t *testing.T) {
	s, _ := startServer(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.lns[0].Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b := cl.SeedBrokers()[0] // the front end itself (the store advertises another port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func(topic string, rf int16) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 2, rf
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
		return resp.Topics[0]
	}
	for _, tc := range []struct {
		topic string
		rf    int16
		note  bool
	}{{"rf3", 3, true}, {"rf1", 1, false}, {"rfdefault", -1, false}} {
		r := create(tc.topic, tc.rf)
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if r.ErrorCode != 0 || r.ReplicationFactor != 1 || r.NumPartitions != 2 {
			t.Fatalf("create %s (rf %d) answered code %d, rf %d, %d partitions; want 0, 1, 2", tc.topic, tc.rf, r.ErrorCode, r.ReplicationFactor, r.NumPartitions)
		}
		if got := strings.Contains(msg, "recorded as 1"); got != tc.note {
			t.Fatalf("create %s (rf %d) message %q: a note %v, want %v", tc.topic, tc.rf, msg, got, tc.note)
		}
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(tc.topic)
		mreq.Topics = append(mreq.Topics, mt)
		md, err := mreq.RequestWith(ctx, b)
		if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 2 {
			t.Fatalf("metadata of %s: %v %+v", tc.topic, err, md)
		}
		for _, p := range md.Topics[0].Partitions {
			if want := []int32{p.Leader}; !reflect.DeepEqual(p.Replicas, want) || !reflect.DeepEqual(p.ISR, want) {
				t.Fatalf("%s/%d: replicas %v isr %v, want %v", tc.topic, p.Partition, p.Replicas, p.ISR, want)
			}
		}
	}
	for _, rf := range []int16{0, -2} {
		if r := create("bad-rf", rf); r.ErrorCode != kerr.InvalidReplicationFactor.Code {
			t.Fatalf("create with rf %d: code %d, want INVALID_REPLICATION_FACTOR", rf, r.ErrorCode)
		}
	}
}
