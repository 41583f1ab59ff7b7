package objread

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// flip changes one byte of a stored object file.
func (f *fixture) flip(key string, pos int64) {
	f.t.Helper()
	path := filepath.Join(f.fs.Dir(), "objects", filepath.FromSlash(key))
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	if pos < 0 {
		pos += int64(len(b))
	}
	b[pos] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func TestCorruptBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		at   func(objfmt.Block) int64
	}{
		{"records", func(b objfmt.Block) int64 { return b.Position + b.Length/2 }},
		// the leader epoch of the block's first batch: only the block CRC covers it
		{"leader epoch", func(b objfmt.Block) int64 { return b.Position + 12 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPart(1, 0, 0, 100, 4, 60)
			f, r, objs := onePart(t, "o/c.obj", 2048, p)
			blks := f.blocks("o/c.obj", p)
			bad := blks[2]
			f.flip("o/c.obj", c.at(bad))
			for attempt := range 2 {
				before := f.cs.count()
				_, err := r.Read(context.Background(), p.topic, p.part, bad.FirstOffset, 1<<20, objs)
				if !errors.Is(err, ErrCorrupt) || !errors.Is(err, objfmt.ErrCorrupt) || !strings.Contains(err.Error(), "o/c.obj") {
					t.Fatalf("attempt %d: %v, want ErrCorrupt naming the key", attempt, err)
				}
				if f.cs.count() == before {
					t.Fatalf("attempt %d: no GET: the corrupt block came from a cache", attempt)
				}
				if r.blocks.contains(blockKey{"o/c.obj", bad.Position}) {
					t.Fatal("corrupt block cached")
				}
			}
			// The blocks around it still read.
			for _, b := range []objfmt.Block{blks[0], blks[1], blks[3]} {
				checkRead(t, p, b.FirstOffset, read(t, r, p, b.FirstOffset, int(b.Length), objs))
			}
		})
	}
}

func TestCorruptIndex(t *testing.T) {
	for _, c := range []struct {
		name string
		pos  int64
	}{{"footer", -1}, {"index", -objfmt.FooterSize - 3}} {
		t.Run(c.name, func(t *testing.T) {
			p := newPart(1, 0, 0, 10, 2, 20)
			f, r, objs := onePart(t, "o/i.obj", 1024, p)
			f.flip("o/i.obj", c.pos)
			for range 2 {
				_, err := r.Read(context.Background(), p.topic, p.part, 0, 1000, objs)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%v, want ErrCorrupt", err)
				}
			}
			if r.indexes.len() != 0 || f.cs.count() != 2 {
				t.Fatalf("%d indexes cached, %d GETs: a corrupt index must not be cached", r.indexes.len(), f.cs.count())
			}
		})
	}
}

// TestTruncatedObject: the object is shorter than its index says (replaced under the
// same key): corruption, not a short answer.
func TestTruncatedObject(t *testing.T) {
	p := newPart(1, 0, 0, 40, 2, 100)
	f, r, objs := onePart(t, "o/t.obj", 1024, p)
	read(t, r, p, 0, 10, objs) // caches the index
	blks := f.blocks("o/t.obj", p)
	path := filepath.Join(f.fs.Dir(), "objects", "o", "t.obj")
	if err := os.Truncate(path, blks[1].Position+10); err != nil {
		t.Fatal(err)
	}
	for _, b := range []objfmt.Block{blks[1], blks[3]} { // cut short; beyond the end
		if _, err := r.Read(context.Background(), p.topic, p.part, b.FirstOffset, 1, objs); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("block at %d: %v, want ErrCorrupt", b.Position, err)
		}
	}
}

func TestStoreErrors(t *testing.T) {
	f := newFixture(t)
	p := newPart(1, 0, 0, 60, 3, 100)
	size := f.put("o/s.obj", 1024, p)
	fs := faulty.New(f.cs, 1)
	r, err := New(fs, noReadahead())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	objs := []ObjectRef{ref("o/s.obj", size, p)}
	blks := f.blocks("o/s.obj", p)

	for i, c := range []struct {
		fault faulty.Fault
		want  error
	}{
		{faulty.Unavailable, objectstore.ErrUnavailable}, // the index GET
		{faulty.Throttle, objectstore.ErrThrottled},      // a block GET (the index is cached)
		{faulty.BreakBody, objectstore.ErrUnavailable},   // a body broken off mid-block
	} {
		if i > 0 {
			read(t, r, p, blks[0].FirstOffset, 1, objs) // index cached; block 0 too
		}
		off := blks[i+1].FirstOffset
		fs.Inject(faulty.Rule{Ops: faulty.Get, Times: 1, Fault: c.fault, After: 100})
		_, err := r.Read(ctx, p.topic, p.part, off, 1, objs)
		if !errors.Is(err, c.want) || !objectstore.IsTransient(err) {
			t.Fatalf("%v: %v, want %v", c.fault, err, c.want)
		}
		// Errors are not cached: the next read succeeds.
		checkRead(t, p, off, read(t, r, p, off, 1, objs))
	}
	_, err = r.Read(ctx, p.topic, p.part, 0, 1, []ObjectRef{{Key: "o/missing.obj", Size: size, FirstOffset: 0, LastOffset: 10}})
	if !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
}
