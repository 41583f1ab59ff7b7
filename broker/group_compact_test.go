package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore/localfs"
)

// A __consumer_offsets partition whose log grows is compacted: its log start rises past
// the superseded commits, so a restart loads only the groups' current state, and every
// group keeps its latest offsets across the compaction and the restart.
func TestGroupLogCompactedAndReloaded(t *testing.T) {
	dir := t.TempDir()
	store, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	small := func(c *Config) {
		c.OffsetsTopicPartitions = 1
		c.OffsetsCompactBytes = 4 << 10
		c.OffsetsCompactCheck = 50 * time.Millisecond
	}
	b := tierBroker(t, dir, store, small)
	adm := b.admin(t)
	createTopic(t, adm, "t", 4, nil)
	const groups, rounds = 5, 60
	for r := 0; r < rounds; r++ {
		for g := 0; g < groups; g++ {
			offs := kadm.Offsets{}
			for p := int32(0); p < 4; p++ {
				offs.Add(kadm.Offset{Topic: "t", Partition: p, At: int64(r*10 + g), LeaderEpoch: -1})
			}
			if resp, err := adm.CommitOffsets(testCtx(t), fmt.Sprintf("g%d", g), offs); err != nil || resp.Error() != nil {
				t.Fatalf("commit: %v %v", err, resp.Error())
			}
		}
	}
	otp, idx, err := b.coordinatorPartition(testCtx(t), "g0", false)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the offsets partition compacted", func() bool {
		return b.meta.View().Topics[otp.Name].Partitions[idx].LogStartOffset > 0
	})
	check := func(b *testBroker, when string) {
		t.Helper()
		adm := b.admin(t)
		for g := 0; g < groups; g++ {
			var got kadm.OffsetResponses
			testutil.Eventually(t, time.Minute, "offsets fetched "+when, func() bool {
				got, err = adm.FetchOffsets(testCtx(t), fmt.Sprintf("g%d", g))
				return err == nil && got.Error() == nil
			})
			for p := int32(0); p < 4; p++ {
				o, ok := got.Lookup("t", p)
				if want := int64((rounds-1)*10 + g); !ok || o.At != want {
					t.Fatalf("%s: g%d t/%d at %d (found %v), want %d", when, g, p, o.At, ok, want)
				}
			}
		}
	}
	check(b, "after the compaction")
	logStart := b.meta.View().Topics[otp.Name].Partitions[idx].LogStartOffset
	b.Close()

	b2 := tierBroker(t, dir, store, small)
	check(b2, "after a restart")
	p := b2.parts.Get(otp.ID, idx)
	if start, _ := p.Offsets(); start < logStart {
		t.Fatalf("log start after the restart: %v", p)
	}
}

// An Empty group's offsets expire --offsets-retention after the group became Empty, as
// Kafka's offsets.retention.minutes, and stay gone after a restart (the deletion is in
// the log). (Which offsets expire when: broker/group TestOffsetsExpire.)
func TestEmptyGroupOffsetsExpire(t *testing.T) {
	dir := t.TempDir()
	store, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mod := func(c *Config) {
		c.Group.OffsetsRetention = 2 * time.Second
		c.OffsetsRetentionCheck = 100 * time.Millisecond
	}
	b := tierBroker(t, dir, store, mod)
	adm := b.admin(t)
	createTopic(t, adm, "t", 1, nil)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 42, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(testCtx(t), "idle", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	fetched := func(b *testBroker, g string) (int64, bool) {
		t.Helper()
		var got kadm.OffsetResponses
		testutil.Eventually(t, time.Minute, "offsets fetched", func() bool {
			got, err = b.admin(t).FetchOffsets(testCtx(t), g)
			return err == nil && got.Error() == nil
		})
		o, ok := got.Lookup("t", 0)
		return o.At, ok && o.At >= 0
	}
	if at, ok := fetched(b, "idle"); !ok || at != 42 {
		t.Fatalf("offset %d (%v) right after the commit", at, ok)
	}
	testutil.Eventually(t, time.Minute, "the idle group's offset expired", func() bool {
		_, ok := fetched(b, "idle")
		return !ok
	})
	b.Close()
	b2 := tierBroker(t, dir, store, mod)
	if at, ok := fetched(b2, "idle"); ok {
		t.Fatalf("expired offset %d came back after a restart", at)
	}
}
