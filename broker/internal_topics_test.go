package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/recbatch"
)

// TestForgedOffsetCommitRefused replays issue 20's attack on a real broker: a client
// produces a forged commit record (the broker's own format: key the group, value its
// offsets) into the victim group's __consumer_offsets partition, moving its offset from
// 5 to 999999 if it were stored and restored at the next start. The produce is refused
// with INVALID_TOPIC_EXCEPTION, and after a restart the group's offset is still 5.
func TestForgedOffsetCommitRefused(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, nil)
	adm := b.admin(t)
	createTopic(t, adm, "t", 1, nil)
	const victim = "victim"
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(testCtx(t), victim, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	otp, idx, err := b.coordinatorPartition(testCtx(t), victim, false)
	if err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal([]group.Offset{{Topic: "t", Partition: 0, Offset: 999999, LeaderEpoch: -1, CommitTime: time.Now()}})
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = otp.Name
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = idx, recbatch.EncodeSingle([]byte(victim), value, time.Now().UnixMilli())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.client(t).SeedBrokers()[0].Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("forged commit: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}
	b.Close()

	b2 := startBroker(t, dir, nil)
	var got int64 = -2
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) { // restoring: retry
		fetched, err := b2.admin(t).FetchOffsets(testCtx(t), victim)
		if err == nil {
			if o, ok := fetched.Lookup("t", 0); ok && o.Err == nil {
				got = o.At
				break
			}
		}
	}
	if got != 5 {
		t.Fatalf("victim's offset after a restart: %d, want 5", got)
	}
}
