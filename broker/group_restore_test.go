package broker

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
)

var errInjectedGet = errors.New("test: injected GET failure")

// failingGets fails every GetRange while failing is set, with an error objectstore.Retrying
// does not retry, so each attempt to restore from objects fails at once.
type failingGets struct {
	objectstore.Store
	failing atomic.Bool
	failed  atomic.Int64
}

func (s *failingGets) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if s.failing.Load() {
		s.failed.Add(1)
		return nil, errInjectedGet
	}
	return s.Store.GetRange(ctx, key, offset, length)
}

// A broker that gains an offsets partition (here: restarts, with the partition's commits
// in objects only) serves its groups only once every commit is restored: while object
// reads fail, OffsetFetch, OffsetCommit and ListGroups answer COORDINATOR_LOAD_IN_PROGRESS
// (not "no offset", which sends auto.offset.reset=latest consumers past unread records)
// and the restore is retried; once reads work, the committed offset is served.
func TestGroupsServedOnlyOnceRestored(t *testing.T) {
	dir := t.TempDir()
	inner, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &failingGets{Store: inner}
	b := tierBroker(t, dir, store, nil)
	adm := b.admin(t)
	createTopic(t, adm, "t", 1, nil)
	const grp = "g-restore"
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 123, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(testCtx(t), grp, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// Enough data after the commit that the WAL segment holding it is trimmed once uploaded.
	produceN(t, b.client(t), "t", 1, 600, 1000)
	otp, idx, err := b.coordinatorPartition(testCtx(t), grp, false)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the commit held by objects only", func() bool {
		p := b.parts.Get(otp.ID, idx)
		bs := p.Batches()
		return b.allUploaded() && (len(bs) == 0 || bs[0].Base > 0)
	})
	b.Close()

	store.failing.Store(true)
	b2 := tierBroker(t, dir, store, nil)
	cl := b2.client(t)
	direct := cl.SeedBrokers()[0] // no client-side retries: the broker's own answers
	// kgo sends the highest version both sides support (OffsetFetch v9: groups batched).
	fetch := func() kmsg.OffsetFetchResponseGroup {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = grp
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := direct.Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		groups := resp.(*kmsg.OffsetFetchResponse).Groups
		if len(groups) != 1 {
			t.Fatalf("OffsetFetch answered %d groups, want 1", len(groups))
		}
		return groups[0]
	}
	offset := func(g kmsg.OffsetFetchResponseGroup) int64 {
		t.Helper()
		if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch answer %+v: want one partition", g)
		}
		return g.Topics[0].Partitions[0].Offset
	}
	commit := func(offset int64) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = grp, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.LeaderEpoch = offset, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := direct.Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	listGroups := func() int16 {
		t.Helper()
		resp, err := direct.Request(testCtx(t), kmsg.NewPtrListGroupsRequest())
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListGroupsResponse).ErrorCode
	}

	r := fetch()
	if r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch while the restore cannot read objects: error %v, offsets %+v; want COORDINATOR_LOAD_IN_PROGRESS",
			kerr.ErrorForCode(r.ErrorCode), r.Topics)
	}
	// The restore keeps trying rather than going on without the commits it cannot read.
	testutil.Eventually(t, 30*time.Second, "the restore retried", func() bool { return store.failed.Load() >= 3 })
	if code := fetch().ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch after failed restore attempts: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	// A commit now would be overwritten by the older restored one: refused, retriably.
	if code := commit(7); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetCommit while restoring: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	if code := listGroups(); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListGroups while restoring: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}

	store.failing.Store(false)
	testutil.Eventually(t, 30*time.Second, "the groups restored", func() bool { return fetch().ErrorCode == 0 })
	if got := offset(fetch()); got != 123 {
		t.Fatalf("committed offset once restored = %d, want 123", got)
	}
	if code := listGroups(); code != 0 {
		t.Fatalf("ListGroups once restored: %v", kerr.ErrorForCode(code))
	}
	if code := commit(200); code != 0 {
		t.Fatalf("OffsetCommit once restored: %v", kerr.ErrorForCode(code))
	}
	// A client with ordinary retries sees the new commit.
	got, err := kadm.NewClient(clientFor(t, b2.Broker, kgo.RetryTimeout(30*time.Second))).FetchOffsets(testCtx(t), grp)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("t", 0); !ok || o.At != 200 {
		t.Fatalf("committed offset after a new commit = %+v, %v; want 200", o, ok)
	}
}
