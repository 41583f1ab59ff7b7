package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// TestInternalTopicsRefuseClients mounts issue 20's attack over TLS: mallory holds ALL
// on every topic (`*`) but no group ACL, and tries to forge a commit into
// __consumer_offsets, drop its records, add partitions to it (moving groups off their
// offsets), delete it and change its configs. Each is
// refused with INVALID_TOPIC_EXCEPTION, for the super user too, while the same requests
// on an ordinary topic succeed (so the refusal is not an ACL's).
func TestInternalTopicsRefuseClients(t *testing.T) {
	e := startACLServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.meta.CreateTopic(ctx, metadata.TopicSpec{Name: "__consumer_offsets", Partitions: 2, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:mallory").Topics("*").Operations(kadm.OpAll))

	// A forged commit: key and value shaped like a group offset record.
	forged := recbatch.EncodeSingle([]byte("\x00\x01\x00\x05victim\x00\x01t\x00\x00\x00\x00"), []byte("\x00\x03\x00\x00\x00\x00\x00\x0f\x42\x3f"), time.Now().UnixMilli())
	attack := func(cl *kgo.Client, topic string) map[string]int16 {
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = -1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = topic
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = append([]byte(nil), forged...)
		pt.Partitions = append(pt.Partitions, pp)
		produce.Topics = append(produce.Topics, pt)

		delRecs := kmsg.NewPtrDeleteRecordsRequest()
		drt := kmsg.NewDeleteRecordsRequestTopic()
		drt.Topic = topic
		drp := kmsg.NewDeleteRecordsRequestTopicPartition()
		drp.Offset = -1
		drt.Partitions = append(drt.Partitions, drp)
		delRecs.Topics = append(delRecs.Topics, drt)

		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = resourceTopic, topic
		ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "retention.ms", kmsg.StringPtr("1")
		ar.Configs = append(ar.Configs, ac)
		alter.Resources = append(alter.Resources, ar)

		parts := kmsg.NewPtrCreatePartitionsRequest()
		parts.ValidateOnly = true
		ct := kmsg.NewCreatePartitionsRequestTopic()
		ct.Topic, ct.Count = topic, 4
		parts.Topics = append(parts.Topics, ct)

		del := kmsg.NewPtrDeleteTopicsRequest()
		del.TopicNames = []string{topic}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)

		return map[string]int16{
			"Produce":                 request(t, cl, produce).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode,
			"DeleteRecords":           request(t, cl, delRecs).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode,
			"IncrementalAlterConfigs": request(t, cl, alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode,
			"CreatePartitions":        request(t, cl, parts).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode,
			"DeleteTopics":            request(t, cl, del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode,
		}
	}
	for _, user := range []string{"mallory", "admin"} {
		for op, code := range attack(e.client(t, user), "__consumer_offsets") {
			if code != kerr.InvalidTopicException.Code {
				t.Errorf("%s's %s on __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", user, op, kerr.ErrorForCode(code))
			}
		}
	}
	if e.meta.View().Topics["__consumer_offsets"] == nil {
		t.Fatal("__consumer_offsets was deleted")
	}
	// The same requests on an ordinary topic pass: mallory's ACLs allow them.
	for op, code := range attack(e.client(t, "mallory"), "t-del") {
		if code != 0 {
			t.Errorf("mallory's %s on t-del: %v, want success", op, kerr.ErrorForCode(code))
		}
	}
}
