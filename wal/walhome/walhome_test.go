package walhome_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
	"github.com/weir-io/weir/wal/waltest"
)

const home = "/wal/broker-3"

// ownerConfig is how a broker opens its WAL of epoch e in home.
func ownerConfig(fs wal.FS, e int64) wal.Config {
	cfg := wal.DefaultConfig(walhome.EpochDir(home, e))
	cfg.FS = fs
	cfg.SegmentSize = 64 << 10
	cfg.Fence = true
	cfg.Owner = fmt.Sprintf("broker-3 epoch %d", e)
	cfg.EpochFence, cfg.Epoch = walhome.TokenPath(home), e
	return cfg
}

func openOwner(t *testing.T, fs wal.FS, e int64) *wal.WAL {
	t.Helper()
	w, err := wal.Open(ownerConfig(fs, e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func seal(t *testing.T, fs wal.FS, epoch int64) {
	t.Helper()
	if err := walhome.SealUpTo(fs, home, epoch, walhome.SealOptions{By: "broker-4 epoch 1"}); err != nil {
		t.Fatal(err)
	}
}

// (a) The owner registered epoch 3, stalled before wal.Open and was fenced; the taker
// seals up to 3 while epoch-3 does not exist. When the owner resumes, Open refuses: the
// taker fenced epoch 3 by name (and by the token), not only what its listing showed.
func TestSealUpToFencesAnEpochNotOpenedYet(t *testing.T) {
	fs := waltest.NewMemFS()
	w1 := openOwner(t, fs, 1)
	if _, err := w1.AppendSync(context.Background(), 1, []byte("epoch 1")); err != nil {
		t.Fatal(err)
	}
	w1.Close()
	seal(t, fs, 3)
	if _, err := wal.Open(ownerConfig(fs, 3)); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Open of the fenced epoch 3 after the taker sealed up to it: %v, want ErrFenced", err)
	}
	for _, e := range []int64{2, 3} { // every epoch up to 3 exists, sealed (empty)
		info, ok, err := wal.ReadSeal(fs, walhome.EpochDir(home, e))
		if err != nil || !ok || info.End != 0 || info.Segments != 0 {
			t.Fatalf("epoch %d: seal %+v %v %v", e, info, ok, err)
		}
	}
	openOwner(t, fs, 4) // the next registration writes
}

// (b) The taker's listing of the owner's home is stale and misses epoch-2, which holds
// acked records. SealUpTo seals epoch-2 by name, and Dirs (what the loader scans) has it:
// the acked records are read, not lost.
func TestSealUpToAndDirsDoNotTrustAStaleListing(t *testing.T) {
	server := waltest.NewMemFS()
	owner, taker := waltest.NewStaleFS(server), waltest.NewStaleFS(server)
	taker.SetStaleDirs(true)
	if err := server.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := walhome.List(taker, home); err != nil || len(d) != 0 { // cached: empty
		t.Fatalf("first listing: %v %v", d, err)
	}
	w := openOwner(t, owner, 2)
	var end wal.Pos
	for i := range 3 {
		pos, err := w.AppendSync(context.Background(), 1, []byte(fmt.Sprintf("acked %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		end = pos
	}
	if d, _ := walhome.List(taker, home); len(d) != 0 {
		t.Fatalf("the taker's listing is not stale (%v): the test shows nothing", d)
	}
	seal(t, taker, 2)
	info, ok, err := wal.ReadSeal(taker, walhome.EpochDir(home, 2))
	if err != nil || !ok || info.Records != 3 || info.End <= end {
		t.Fatalf("seal of epoch 2: %+v %v %v, want the 3 acked records", info, ok, err)
	}
	if _, err := w.AppendSync(context.Background(), 1, []byte("after the seal")); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("owner append after the seal: %v, want ErrFenced", err)
	}
	dirs, err := walhome.Dirs(taker, home, 2)
	if err != nil || len(dirs) != 2 || dirs[1].Epoch != 2 {
		t.Fatalf("Dirs up to 2: %v %v, want epochs 1 and 2", dirs, err)
	}
}

// The WAL directory GC removes FENCE and SEAL with the rest; an owner of that epoch that
// resumes afterwards must not get a writable directory back: the token refuses it, and
// the recreated directory is left fenced.
func TestRemovedEpochCannotBeReopened(t *testing.T) {
	fs := waltest.NewMemFS()
	w := openOwner(t, fs, 1)
	if _, err := w.AppendSync(context.Background(), 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	seal(t, fs, 1)
	if err := walhome.Remove(fs, home, walhome.Dir{Epoch: 1, Path: walhome.EpochDir(home, 1)}); err != nil {
		t.Fatal(err)
	}
	if d, _ := walhome.List(fs, home); len(d) != 0 {
		t.Fatalf("after Remove: %v", d)
	}
	if ef, err := walhome.ReadToken(fs, home); err != nil || !ef.Fenced(1) {
		t.Fatalf("Remove must keep the token: %+v %v", ef, err)
	}
	if _, err := wal.Open(ownerConfig(fs, 1)); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("Open of a collected epoch: %v, want ErrFenced", err)
	}
	if fi, ok, err := wal.ReadFence(fs, walhome.EpochDir(home, 1)); err != nil || !ok || !fi.Fenced {
		t.Fatalf("the recreated directory is not fenced: %+v %v %v", fi, ok, err)
	}
	if dirs, err := walhome.Dirs(fs, home, 0); err != nil || len(dirs) != 1 {
		t.Fatalf("Dirs: %v %v", dirs, err) // only the listed, recreated one
	}
	// The next SealUpTo seals the recreated directory again, so the GC can remove it.
	seal(t, fs, 2)
	if _, ok, err := wal.ReadSeal(fs, walhome.EpochDir(home, 1)); err != nil || !ok {
		t.Fatalf("recreated directory not sealed: %v %v", ok, err)
	}
	// An unsealed directory is never removed.
	openOwner(t, fs, 3)
	if err := walhome.Remove(fs, home, walhome.Dir{Epoch: 3, Path: walhome.EpochDir(home, 3)}); err == nil {
		t.Fatal("Remove of the live, unsealed epoch 3 succeeded")
	}
}

// A standalone broker's next epoch is above every directory and every fenced epoch.
func TestNextLocalEpoch(t *testing.T) {
	fs := waltest.NewMemFS()
	if n, err := walhome.NextLocalEpoch(fs, home); err != nil || n != 1 {
		t.Fatalf("empty home: %d %v", n, err)
	}
	openOwner(t, fs, 2).Close()
	if n, _ := walhome.NextLocalEpoch(fs, home); n != 3 {
		t.Fatalf("after epoch 2: %d", n)
	}
	seal(t, fs, 5)
	if err := walhome.Remove(fs, home, walhome.Dir{Epoch: 5, Path: walhome.EpochDir(home, 5)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := walhome.NextLocalEpoch(fs, home); n != 6 {
		t.Fatalf("after fencing 5 and collecting it: %d, want 6", n)
	}
}

func TestLayoutNames(t *testing.T) {
	if got := walhome.EpochDir("/r/broker-7", 12); got != "/r/broker-7/epoch-00000000000000000012" {
		t.Fatal(got)
	}
	if got := walhome.HomeDir("/r", 7); got != "/r/broker-7" {
		t.Fatal(got)
	}
	for name, want := range map[string]int32{"broker-7": 7, "broker-0": 0} {
		if id, ok := walhome.ParseHomeName(name); !ok || id != want {
			t.Fatalf("%s: %d %v", name, id, ok)
		}
	}
	for _, name := range []string{"broker-", "broker-x", "broker-07", "broker--1", "epoch-1"} {
		if _, ok := walhome.ParseHomeName(name); ok {
			t.Fatalf("%s parsed", name)
		}
	}
}

// The GC decision from a stale view: a topic the view does not know may be newer than
// the view (kept); only a tombstoned one is deleted. A partition beyond the view's count
// is kept too.
func TestPartitionNeededFromAStaleView(t *testing.T) {
	known, gone, unknown := metadata.TopicID{1}, metadata.TopicID{2}, metadata.TopicID{3}
	topic := &metadata.Topic{Name: "k", ID: known, Partitions: []metadata.Partition{{Index: 0, Leader: 1}}}
	v := metadata.NewView(7, "c", 1, nil, map[string]*metadata.Topic{"k": topic})
	v.SetTopicTombstones([]metadata.TopicID{gone})
	if !walhome.PartitionNeeded(v, unknown, 0, 10) {
		t.Fatal("a topic missing from the view and not tombstoned was taken as deleted")
	}
	if walhome.PartitionNeeded(v, gone, 0, 10) {
		t.Fatal("a tombstoned topic is still needed")
	}
	if !walhome.PartitionNeeded(v, known, 1, 10) {
		t.Fatal("a partition beyond the view's count was taken as deleted")
	}
	if !walhome.PartitionNeeded(v, known, 0, 10) {
		t.Fatal("a partition nothing of which is uploaded is not needed")
	}
}
