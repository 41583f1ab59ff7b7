package objread

import (
	"bytes"
	"context"
	"errors"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReadEveryOffset reads every offset of three partitions of one object (many small
// blocks; one block; batches larger than a block) with unlimited, minimal and moderate
// maxBytes.
func TestReadEveryOffset(t *testing.T) {
	f := newFixture(t)
	parts := []*tpart{
		newPart(1, 0, 1000, 200, 5, 40), // ~15 blocks of 4 KiB
		newPart(1, 3, 0, 3, 2, 10),      // one block
		newPart(2, 1, 50, 4, 1, 5000),   // a batch per block, each larger than BlockSize
	}
	size := f.put("o/every.obj", 4096, parts...)
	r := f.reader(noReadahead())
	for _, p := range parts {
		objs := []ObjectRef{ref("o/every.obj", size, p)}
		for off := p.first(); off <= p.last(); off++ {
			i := p.holding(t, off)
			if n := checkRead(t, p, off, read(t, r, p, off, 1<<30, objs)); n != len(p.batches)-i {
				t.Fatalf("%d/%d unlimited read at %d: %d batches, want %d", p.topic[0], p.part, off, n, len(p.batches)-i)
			}
			if n := checkRead(t, p, off, read(t, r, p, off, 1, objs)); n != 1 {
				t.Fatalf("read at %d with maxBytes 1: %d batches, want 1", off, n)
			}
			got := read(t, r, p, off, 5000, objs)
			if n := checkRead(t, p, off, got); n > 1 && len(got) > 5000 {
				t.Fatalf("read at %d: %d bytes in %d batches, maxBytes 5000", off, len(got), n)
			}
		}
	}
	// From a block boundary, a block's worth of maxBytes returns the whole block.
	p := parts[0]
	if n := checkRead(t, p, p.first(), read(t, r, p, p.first(), 4096, []ObjectRef{ref("o/every.obj", size, p)})); n < 5 {
		t.Fatalf("read of a 4 KiB block from its start: %d batches", n)
	}
}

// TestReadAcrossObjects splits a partition over three objects (each with another
// partition too) and reads across them, with an overlapping object whose ref starts
// later than its data, and with a gap in the manifest.
func TestReadAcrossObjects(t *testing.T) {
	f := newFixture(t)
	p := newPart(7, 2, 500, 90, 4, 100)
	other := newPart(8, 0, 0, 20, 3, 50)
	sa := f.put("o/a.obj", 2048, p.sub(0, 30), other)
	sb := f.put("o/b.obj", 2048, other, p.sub(30, 60))
	sc := f.put("o/c.obj", 2048, p.sub(60, 90))
	sb2 := f.put("o/b2.obj", 2048, p.sub(25, 60)) // holds 25..29 again
	a, b, c := ref("o/a.obj", sa, p.sub(0, 30)), ref("o/b.obj", sb, p.sub(30, 60)), ref("o/c.obj", sc, p.sub(60, 90))
	b2 := ref("o/b2.obj", sb2, p.sub(30, 60))
	r := f.reader(noReadahead())

	for _, objs := range [][]ObjectRef{{a, b, c}, {a, b2, c}} {
		for off := a.FirstOffset; off <= a.LastOffset; off++ {
			if n, want := checkRead(t, p, off, read(t, r, p, off, 1<<30, objs)), 90-p.holding(t, off); n != want {
				t.Fatalf("read at %d across %s: %d batches, want %d", off, objs[1].Key, n, want)
			}
			got := read(t, r, p, off, 3000, objs)
			if n := checkRead(t, p, off, got); n > 1 && len(got) > 3000 {
				t.Fatalf("read at %d: %d bytes, maxBytes 3000", off, len(got))
			}
		}
	}
	// From a's last block, whole blocks of b that fit maxBytes.
	la, fb := f.blocks("o/a.obj", p)[len(f.blocks("o/a.obj", p))-1], f.blocks("o/b.obj", p)[0]
	got := read(t, r, p, la.FirstOffset, int(la.Length+fb.Length), []ObjectRef{a, b, c})
	if n := checkRead(t, p, la.FirstOffset, got); n != la.Batches+fb.Batches {
		t.Fatalf("read of a's last block and b's first: %d batches, want %d+%d", n, la.Batches, fb.Batches)
	}
	// A gap in the manifest: the read stops at the end of a.
	if n := checkRead(t, p, a.FirstOffset, read(t, r, p, a.FirstOffset, 1<<30, []ObjectRef{a, c})); n != 30 {
		t.Fatalf("read across a gap: %d batches, want 30", n)
	}
	// An object whose data goes past its ref holds a divergent tail (a leader's batches
	// the manifest did not take): only the ref's range is served from it.
	div := newPart(7, 2, 500, 35, 4, 101)
	long := &tpart{p.topic, p.part, append(append([]tbatch(nil), p.batches[:30]...), div.batches[30:]...)}
	along := ref("o/a-long.obj", f.put("o/a-long.obj", 2048, long), p.sub(0, 30))
	for _, objs := range [][]ObjectRef{{along, b, c}, {along}} {
		want := 90
		if len(objs) == 1 {
			want = 30
		}
		if n := checkRead(t, p, along.FirstOffset, read(t, r, p, along.FirstOffset, 1<<30, objs)); n != want {
			t.Fatalf("read from an object longer than its ref: %d batches, want %d", n, want)
		}
	}
	// b2 holds offsets before its ref: they are not served from it.
	if _, err := r.Read(context.Background(), p.topic, p.part, p.batches[27].base, 1<<30, []ObjectRef{b2}); !errors.Is(err, ErrNotInObject) {
		t.Fatalf("read below the ref's range: %v, want ErrNotInObject", err)
	}
}

func TestNotInObject(t *testing.T) {
	p := newPart(1, 0, 100, 10, 3, 20)
	_, r, objs := onePart(t, "o/n.obj", 1024, p)
	size := objs[0].Size
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		topic     [16]byte
		partition int32
		offset    int64
		objs      []ObjectRef
	}{
		{"below", p.topic, p.part, p.first() - 1, objs},
		{"above", p.topic, p.part, p.last() + 1, objs},
		{"no objects", p.topic, p.part, p.first(), nil},
		{"other partition", p.topic, p.part + 1, p.first(), objs},
		{"other topic", [16]byte{9}, p.part, p.first(), objs},
		// the manifest claims more than the object holds
		{"past the data", p.topic, p.part, p.last() + 1, []ObjectRef{{Key: "o/n.obj", Size: size, FirstOffset: p.first(), LastOffset: p.last() + 10}}},
	} {
		if _, err := r.Read(ctx, c.topic, c.partition, c.offset, 1000, c.objs); !errors.Is(err, ErrNotInObject) {
			t.Errorf("%s: %v, want ErrNotInObject", c.name, err)
		}
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	f := newFixture(t)
	p := newPart(3, 1, 0, 60, 4, 200)
	sa := f.put("o/ta.obj", 1024, p.sub(0, 30))
	sb := f.put("o/tb.obj", 1024, p.sub(20, 60)) // overlaps a: its ref starts at batch 30
	a := ref("o/ta.obj", sa, p.sub(0, 30))
	b := ref("o/tb.obj", sb, p.sub(30, 60))
	r := f.reader(noReadahead())
	ctx := context.Background()
	objs := []ObjectRef{a, b}

	for _, bt := range p.batches {
		for _, ts := range []int64{bt.maxTS - 1, bt.maxTS, bt.maxTS + 1} {
			off, maxTS, ok, err := r.OffsetForTimestamp(ctx, p.topic, p.part, ts, objs)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if ts <= p.batches[len(p.batches)-1].maxTS {
					t.Fatalf("ts %d: not found", ts)
				}
				continue
			}
			// No batch before off has a timestamp >= ts, and the block found has.
			for _, x := range p.batches {
				if x.last < off && x.maxTS >= ts {
					t.Fatalf("ts %d: answer %d, but batch at %d has max timestamp %d", ts, off, x.base, x.maxTS)
				}
			}
			if maxTS < ts || off < a.FirstOffset {
				t.Fatalf("ts %d: offset %d max timestamp %d", ts, off, maxTS)
			}
		}
	}
	if _, _, ok, err := r.OffsetForTimestamp(ctx, p.topic, p.part, 1<<62, objs); ok || err != nil {
		t.Fatalf("ts beyond all: ok %v err %v", ok, err)
	}
	// Clamped to the ref: tb holds batches 20.. but its ref starts at batch 30.
	off, _, ok, err := r.OffsetForTimestamp(ctx, p.topic, p.part, p.batches[21].maxTS, []ObjectRef{b})
	if err != nil || !ok || off != b.FirstOffset {
		t.Fatalf("clamped: %d %v %v, want %d", off, ok, err, b.FirstOffset)
	}
	if got := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeBlock)); got != 0 {
		t.Fatalf("OffsetForTimestamp issued %v block GETs", got)
	}
	if got := f.cs.count(); got != 2 {
		t.Fatalf("%d GETs for two indexes", got)
	}
}

// TestUnknownSize: a ref of size 0 costs a HEAD, then reads; a wrong size is corruption.
func TestUnknownSize(t *testing.T) {
	p := newPart(1, 0, 0, 20, 3, 100)
	_, r, objs := onePart(t, "o/u.obj", 1024, p)
	size := objs[0].Size
	checkRead(t, p, 5, read(t, r, p, 5, 1<<20, []ObjectRef{{Key: "o/u.obj", FirstOffset: p.first(), LastOffset: p.last()}}))
	r.Forget("o/u.obj")
	_, err := r.Read(context.Background(), p.topic, p.part, 5, 1<<20, []ObjectRef{{Key: "o/u.obj", Size: size + 1, FirstOffset: p.first(), LastOffset: p.last()}})
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("o/u.obj")) {
		t.Fatalf("wrong size: %v, want ErrCorrupt naming the key", err)
	}
}

// The index of an object with many partitions does not fit the tail: two GETs.
func TestLargeIndex(t *testing.T) {
	f := newFixture(t)
	var parts []*tpart
	for i := range 3000 { // 3000 partitions of one block: a 200 KiB index
		parts = append(parts, newPart(byte(i/256), int32(i%256), int64(i), 1, 1, 10))
	}
	size := f.put("o/big-index.obj", 1024, parts...)
	r := f.reader(noReadahead())
	for _, i := range []int{0, 1234, 2999} {
		p := parts[i]
		checkRead(t, p, p.first(), read(t, r, p, p.first(), 1000, []ObjectRef{ref("o/big-index.obj", size, p)}))
	}
	if got := promtest.ToFloat64(r.m.requests.WithLabelValues(purposeIndex)); got != 2 {
		t.Fatalf("%v index GETs, want 2 (tail, then index)", got)
	}
}
