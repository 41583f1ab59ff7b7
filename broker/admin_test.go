package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type kadmOffset = kadm.OffsetResponse

func TestAdminTopicsAndConfigs(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin(t)
	ctx := testCtx(t)

	// validate-only creates nothing
	if resp, err := adm.ValidateCreateTopics(ctx, 3, 1, nil, "vo"); err != nil || resp["vo"].Err != nil {
		t.Fatalf("validate only: %v %v", err, resp["vo"].Err)
	}
	if td, _ := adm.ListTopics(ctx, "vo"); td["vo"].Err == nil {
		t.Fatal("validate-only created the topic")
	}
	retention := "3600000"
	createTopic(t, adm, "t1", 2, map[string]*string{"retention.ms": &retention})
	if resp, _ := adm.CreateTopics(ctx, 1, 1, nil, "t1"); resp["t1"].Err != kerr.TopicAlreadyExists {
		t.Fatalf("duplicate create: %v", resp["t1"].Err)
	}
	bad := "nope"
	if resp, _ := adm.CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": &bad}, "t2"); resp["t2"].Err != kerr.InvalidConfig {
		t.Fatalf("bad config: %v", resp["t2"].Err)
	}
	if resp, _ := adm.CreateTopics(ctx, 1, 1, nil, "bad/name"); resp["bad/name"].Err != kerr.InvalidTopicException {
		t.Fatalf("bad name: %v", resp["bad/name"].Err)
	}

	// describe and alter configs
	rc, err := adm.DescribeTopicConfigs(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cfg := range c.Configs {
		if cfg.Key == "retention.ms" {
			found = *cfg.Value == "3600000" && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	if !found {
		t.Fatal("retention.ms not described as set")
	}
	v := "LogAppendTime"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "message.timestamp.type", Value: &v}}, "t1"); err != nil {
		t.Fatal(err)
	}
	if got := b.meta.View().Topics["t1"].Configs["message.timestamp.type"]; got != "LogAppendTime" {
		t.Fatalf("alter configs: %q", got)
	}
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "no.such.key", Value: &v}}, "t1")
	if err == nil && resp[0].Err == nil {
		t.Fatal("unknown config key accepted")
	}

	// partitions grow, never shrink
	if _, err := adm.CreatePartitions(ctx, 3, "t1"); err != nil {
		t.Fatal(err)
	}
	if n := len(b.meta.View().Topics["t1"].Partitions); n != 5 {
		t.Fatalf("after CreatePartitions: %d partitions", n)
	}
	if r, _ := adm.UpdatePartitions(ctx, 2, "t1"); r["t1"].Err != kerr.InvalidPartitions {
		t.Fatalf("shrink: %v", r["t1"].Err)
	}
	// the new partition accepts records
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t1", Partition: 4, Value: []byte("x")}).First()
	if err != nil || r.Offset != 0 {
		t.Fatalf("produce to new partition: %v", err)
	}
	if r.Timestamp.UnixMilli() < 1700000000000 {
		t.Fatalf("LogAppendTime not applied: %v", r.Timestamp)
	}

	// cluster
	bs, err := adm.ListBrokers(ctx)
	if err != nil || len(bs) != 1 {
		t.Fatalf("brokers: %v %v", bs, err)
	}

	// delete, and re-create gets a fresh, empty topic
	if _, err := adm.DeleteTopics(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, adm, "t1", 1, nil)
	lo, err := adm.ListEndOffsets(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("t1", 0); o.Offset != 0 {
		t.Fatalf("re-created topic has end offset %d", o.Offset)
	}
}

func TestDeleteRecordsAndListOffsets(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin(t)
	ctx := testCtx(t)
	createTopic(t, adm, "dr", 1, nil)
	cl := b.client(t, kgo.DefaultProduceTopic("dr"))
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %+v", r)
	}
	so, _ := adm.ListStartOffsets(ctx, "dr")
	eo, _ := adm.ListEndOffsets(ctx, "dr")
	s, _ := so.Lookup("dr", 0)
	e, _ := eo.Lookup("dr", 0)
	if s.Offset != 4 || e.Offset != 10 {
		t.Fatalf("start %d end %d", s.Offset, e.Offset)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 50})
	dr, _ = adm.DeleteRecords(ctx, os)
	if r, _ := dr.Lookup("dr", 0); r.Err != kerr.OffsetOutOfRange {
		t.Fatalf("delete beyond hw: %v", r.Err)
	}
	// The log start survives a restart and reading below it is out of range.
	dir := b.dir
	b.Close()
	b2 := startBroker(t, dir, nil)
	so, _ = b2.admin(t).ListStartOffsets(testCtx(t), "dr")
	if s, _ := so.Lookup("dr", 0); s.Offset != 4 {
		t.Fatalf("log start after restart: %d", s.Offset)
	}
	cons := b2.client(t, kgo.ConsumeTopics("dr"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := consumeN(t, cons, 6)
	if got[0][0].Offset != 4 {
		t.Fatalf("first record after DeleteRecords at %d", got[0][0].Offset)
	}
}

// Reads naming a leader epoch the partition does not have are refused the way Kafka does,
// so clients refresh metadata instead of reading from a stale leader.
func TestCurrentLeaderEpochChecked(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	createTopic(t, b.admin(t), "ep", 1, nil)
	cl := b.client(t)
	for epoch, want := range map[int32]int16{-1: 0, 0: 0, 3: kerr.UnknownLeaderEpoch.Code} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "ep"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.Timestamp = epoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Fatalf("current leader epoch %d: %v, want %v", epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
}

// ListOffsets by timestamp finds the first batch at or after the time; OffsetForLeaderEpoch
// answers the current epoch with the log end.
func TestOffsetsByTimeAndEpoch(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	adm := b.admin(t)
	createTopic(t, adm, "ts", 1, nil)
	cl := b.client(t, kgo.DefaultProduceTopic("ts"))
	base := time.UnixMilli(1_800_000_000_000)
	for i := 0; i < 5; i++ {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for millis, want := range map[int64]int64{
		base.UnixMilli() - 1:                                   0,
		base.Add(2 * time.Minute).UnixMilli():                  2,
		base.Add(2*time.Minute + time.Millisecond).UnixMilli(): 3,
		base.Add(4 * time.Minute).UnixMilli():                  4,
		base.Add(10 * time.Minute).UnixMilli():                 -1,
	} {
		lo, err := adm.ListOffsetsAfterMilli(testCtx(t), millis, "ts")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := lo.Lookup("ts", 0)
		if want >= 0 && o.Offset != want {
			t.Fatalf("offset for time %d: %d, want %d", millis, o.Offset, want)
		}
		if want < 0 && o.Offset != 5 && o.Offset != -1 {
			t.Fatalf("offset for a time after every record: %d, want the end (5) or -1", o.Offset)
		}
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 5 {
		t.Fatalf("OffsetForLeaderEpoch(0): %+v", p)
	}
}
