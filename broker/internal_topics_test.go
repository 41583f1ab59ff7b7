package broker

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
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
	testutil.EventuallyNoError(t, time.Minute, "the victim's offsets after a restart", func() error {
		fetched, err := b2.admin(t).FetchOffsets(testCtx(t), victim)
		if err != nil {
			return err // restoring: retry
		}
		o, ok := fetched.Lookup("t", 0)
		if !ok {
			return errors.New("no offset for t/0")
		}
		if o.Err != nil {
			return o.Err
		}
		got = o.At
		return nil
	})
	if got != 5 {
		t.Fatalf("victim's offset after a restart: %d, want 5", got)
	}
}
