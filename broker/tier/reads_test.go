package tier

import (
	"bytes"
	"context"
	"testing"

	"github.com/weir-io/weir/objectstore/objfmt"
)

// readRig has batches 0, 1 and 2 in objects only (one each, timestamps t0, t0+1 s,
// t0+2 s; uploaded from the tail cache, so they left the index) and batch 3 (t0+3 s)
// only in the index.
func readRig(t *testing.T) (*upRig, int64) {
	t.Helper()
	r := newRig(t, rigOpts{})
	t0 := rigEpoch.UnixMilli()
	objectsOneBatchEach(t, r, []int64{t0, t0 + 1000, t0 + 2000}, t0+3000)
	if from, end, refs := r.p.ObjectSpan(); from != 0 || end != 3 || len(refs) != 3 {
		t.Fatalf("object span [%d, %d) over %d objects, want [0, 3) over 3", from, end, len(refs))
	}
	return r, t0
}

// ReadObjectBatches yields, in order, exactly the batches only objects hold, from the
// log start on, each as acked.
func TestReadObjectBatchesBelowTheIndex(t *testing.T) {
	r, _ := readRig(t)
	ctx := context.Background()
	read := func() []int64 {
		t.Helper()
		var bases []int64
		err := r.tr.ReadObjectBatches(ctx, r.p, func(base int64, batch []byte) {
			if !bytes.Equal(batch, r.acked[base]) {
				t.Fatalf("batch %d read back differs from the one acked", base)
			}
			bases = append(bases, base)
		})
		if err != nil {
			t.Fatal(err)
		}
		return bases
	}
	if got := read(); len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("batches %v, want 0, 1, 2", got)
	}
	if err := r.meta.SetLogStartOffset(ctx, r.p.ID(), 0, 1); err != nil {
		t.Fatal(err)
	}
	v := r.meta.View()
	r.p.Apply(v.Topics["t"].Partitions[0], v, true)
	if got := read(); len(got) != 2 || got[0] != 1 {
		t.Fatalf("batches %v with log start 1, want 1, 2", got)
	}
}

// An object holding batches below the log start yields only those from the log start.
func TestReadObjectBatchesFromTheLogStartInsideAnObject(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.produce(t, 4)
	if _, err := r.tr.uploadOnce(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.meta.SetLogStartOffset(ctx, r.p.ID(), 0, 2); err != nil {
		t.Fatal(err)
	}
	v := r.meta.View()
	r.p.Apply(v.Topics["t"].Partitions[0], v, true)
	var bases []int64
	if err := r.tr.ReadObjectBatches(ctx, r.p, func(base int64, _ []byte) { bases = append(bases, base) }); err != nil {
		t.Fatal(err)
	}
	if len(bases) != 2 || bases[0] != 2 || bases[1] != 3 {
		t.Fatalf("batches %v from one object of 0..3 with log start 2, want 2, 3", bases)
	}
}

// Batches an object holds that the index still serves (their WAL segment not trimmed
// yet) are not among those only objects hold.
func TestReadObjectBatchesStopsAtTheIndex(t *testing.T) {
	r := newRig(t, rigOpts{wal: smallSegments})
	r.produceWAL(t, 200)
	uploadAll(t, r)
	r.tr.Trim()
	from, end, _ := r.p.ObjectSpan()
	if from != 0 || end <= 0 || end >= 200 {
		t.Fatalf("object span [%d, %d): want the trimmed part of 200 batches", from, end)
	}
	var n int64
	err := r.tr.ReadObjectBatches(context.Background(), r.p, func(base int64, batch []byte) {
		if base != n || !bytes.Equal(batch, r.acked[base]) {
			t.Fatalf("batch %d read where %d was due, or not as acked", base, n)
		}
		n++
	})
	if err != nil || n != end {
		t.Fatalf("%d batches read (%v), want the %d below the index", n, err, end)
	}
}

// Read serves an offset below the index from the manifest slice that starts at the
// object holding it (as Partition.Read hands it out): whole batches from that one on.
func TestReadFromObjects(t *testing.T) {
	r, _ := readRig(t)
	_, _, refs := r.p.ObjectSpan()
	data, err := r.tr.Read(context.Background(), r.p, 1, 1<<20, refs[1:])
	if err != nil {
		t.Fatal(err)
	}
	batches, err := objfmt.SplitBatches(data)
	if err != nil || len(batches) == 0 {
		t.Fatalf("%d batches, %v", len(batches), err)
	}
	if batches[0].BaseOffset != 1 || !bytes.Equal(batches[0].Data, r.acked[1]) {
		t.Fatalf("first batch read at offset 1: base %d", batches[0].BaseOffset)
	}
	for _, b := range batches {
		if b.BaseOffset == 0 {
			t.Fatal("a batch before the offset asked was returned")
		}
	}
}

// OffsetForTime finds the first batch at or after a timestamp in the objects (through
// their indexes), then in the partition's index, never below the log start.
func TestOffsetForTimeAcrossObjectsAndIndex(t *testing.T) {
	r, t0 := readRig(t)
	ctx := context.Background()
	for _, c := range []struct {
		ts, off, batchTS int64
		ok               bool
	}{
		{t0 - 1, 0, t0, true},
		{t0, 0, t0, true},
		{t0 + 1, 1, t0 + 1000, true},
		{t0 + 2000, 2, t0 + 2000, true},
		{t0 + 2001, 3, t0 + 3000, true}, // in the index only
		{t0 + 3001, 0, 0, false},
	} {
		off, ts, ok := r.tr.OffsetForTime(ctx, r.p, c.ts)
		if ok != c.ok || (ok && (off != c.off || ts != c.batchTS)) {
			t.Errorf("offset for t0%+d ms: %d (batch at t0%+d) %v, want %d (t0%+d) %v", c.ts-t0, off, ts-t0, ok, c.off, c.batchTS-t0, c.ok)
		}
	}
	if err := r.meta.SetLogStartOffset(ctx, r.p.ID(), 0, 1); err != nil {
		t.Fatal(err)
	}
	v := r.meta.View()
	r.p.Apply(v.Topics["t"].Partitions[0], v, true)
	if off, _, ok := r.tr.OffsetForTime(ctx, r.p, t0); !ok || off != 1 {
		t.Fatalf("offset for t0 with log start 1: %d %v, want 1", off, ok)
	}
}
