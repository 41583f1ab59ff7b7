package objread

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// makeBatch builds a real, uncompressed record batch v2 (correct CRC) of nrec records
// with values of valSize bytes, offsets from base and timestamps from baseTs.
func makeBatch(base int64, nrec, valSize int, baseTs int64) []byte {
	const hdr = 61
	var recs []byte
	val := bytes.Repeat([]byte{byte(base)}, valSize)
	for i := range nrec {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, int64(i)) // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // key: null
		body = binary.AppendVarint(body, int64(valSize))
		body = append(body, val...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, hdr, hdr+len(recs))
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(hdr-12+len(recs)))
	binary.BigEndian.PutUint32(b[12:], 3) // leader epoch
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(nrec-1))
	binary.BigEndian.PutUint64(b[27:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[35:], uint64(baseTs+int64(nrec)-1))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(nrec))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

type tbatch struct {
	base, last, maxTS int64
	data              []byte
}

// tpart is a partition's batches, as a test writes them into objects.
type tpart struct {
	topic   [16]byte
	part    int32
	batches []tbatch
}

// newPart makes n batches from offset first: batch i has 1+i%recs records of
// valSize+(i%7)*13 bytes each, so sizes differ; timestamps rise with offsets.
func newPart(topic byte, part int32, first int64, n, recs, valSize int) *tpart {
	p := &tpart{topic: [16]byte{topic, 0x5e}, part: part}
	off := first
	for i := range n {
		nrec := 1 + i%recs
		ts := 1_000_000 + 10*off
		p.batches = append(p.batches, tbatch{off, off + int64(nrec) - 1, ts + int64(nrec) - 1, makeBatch(off, nrec, valSize+(i%7)*13, ts)})
		off += int64(nrec)
	}
	return p
}

// sub is the partition with batches [i, j) only.
func (p *tpart) sub(i, j int) *tpart { return &tpart{p.topic, p.part, p.batches[i:j]} }

func (p *tpart) first() int64 { return p.batches[0].base }
func (p *tpart) last() int64  { return p.batches[len(p.batches)-1].last }

func (p *tpart) bytes() int {
	n := 0
	for _, b := range p.batches {
		n += len(b.data)
	}
	return n
}

// holding is the index of the batch that holds offset.
func (p *tpart) holding(t testing.TB, offset int64) int {
	for i, b := range p.batches {
		if b.base <= offset && offset <= b.last {
			return i
		}
	}
	t.Fatalf("no batch holds offset %d", offset)
	return -1
}

// checkRead verifies that got is whole batches of p, in order, from the one holding
// offset, and returns how many.
func checkRead(t testing.TB, p *tpart, offset int64, got []byte) int {
	t.Helper()
	i, pos, n := p.holding(t, offset), 0, 0
	for pos < len(got) {
		if i+n >= len(p.batches) {
			t.Fatalf("read at %d: %d bytes past the partition's last batch", offset, len(got)-pos)
		}
		want := p.batches[i+n].data
		if len(got)-pos < len(want) || !bytes.Equal(got[pos:pos+len(want)], want) {
			t.Fatalf("read at %d: batch %d (offset %d) differs", offset, n, p.batches[i+n].base)
		}
		pos += len(want)
		n++
	}
	if n == 0 {
		t.Fatalf("read at %d returned no batch", offset)
	}
	return n
}

// countingStore wraps a store, counts GetRange calls and lets a test hook them.
type countingStore struct {
	objectstore.Store
	mu   sync.Mutex
	gets int
	keys map[string]int
	hook func(ctx context.Context, key string, off, n int64) error // nil: none
}

func (s *countingStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.gets++
	s.keys[key]++
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, key, off, n); err != nil {
			return nil, err
		}
	}
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *countingStore) setHook(h func(ctx context.Context, key string, off, n int64) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// fixture is a localfs store with a counting wrapper.
type fixture struct {
	t  testing.TB
	fs *localfs.Store
	cs *countingStore
}

func newFixture(t testing.TB) *fixture {
	fs, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, fs: fs, cs: &countingStore{Store: fs, keys: map[string]int{}}}
}

// put writes an object of parts (in order) with the given block size and returns its
// size.
func (f *fixture) put(key string, blockSize int, parts ...*tpart) int64 {
	f.t.Helper()
	var buf bytes.Buffer
	w := objfmt.NewWriter(&buf, objfmt.Options{BlockSize: blockSize})
	for _, p := range parts {
		for _, b := range p.batches {
			if err := w.Add(p.topic, p.part, b.base, b.last, b.maxTS, b.data); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	sum, err := w.Close()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.fs.Put(context.Background(), key, bytes.NewReader(buf.Bytes()), sum.Size); err != nil {
		f.t.Fatal(err)
	}
	return sum.Size
}

// blocks returns the index entries of p's blocks in object key, read independently of
// the Reader.
func (f *fixture) blocks(key string, p *tpart) []objfmt.Block {
	f.t.Helper()
	obj, err := objectstore.ReadRange(context.Background(), f.fs, key, 0, -1)
	if err != nil {
		f.t.Fatal(err)
	}
	_, idx, err := objfmt.ReadIndex(bytes.NewReader(obj), int64(len(obj)))
	if err != nil {
		f.t.Fatal(err)
	}
	pi, ok := idx.Partition(p.topic, p.part)
	if !ok {
		f.t.Fatalf("%s has no partition %d/%d", key, p.topic[0], p.part)
	}
	return pi.AllBlocks()
}

// reader opens a Reader on the counting store; it is closed when the test ends.
func (f *fixture) reader(cfg Config) *Reader {
	f.t.Helper()
	r, err := New(f.cs, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { r.Close() })
	return r
}

func ref(key string, size int64, p *tpart) ObjectRef {
	return ObjectRef{Key: key, Size: size, FirstOffset: p.first(), LastOffset: p.last()}
}

// onePart is the common setup: a fixture with partition p alone in object key, and a
// Reader without readahead.
func onePart(t testing.TB, key string, blockSize int, p *tpart) (*fixture, *Reader, []ObjectRef) {
	t.Helper()
	f := newFixture(t)
	size := f.put(key, blockSize, p)
	return f, f.reader(noReadahead()), []ObjectRef{ref(key, size, p)}
}

// read is Read with a background context that fails the test on error.
func read(t testing.TB, r *Reader, p *tpart, offset int64, maxBytes int, objs []ObjectRef) []byte {
	t.Helper()
	b, err := r.Read(context.Background(), p.topic, p.part, offset, maxBytes, objs)
	if err != nil {
		t.Fatalf("Read at %d: %v", offset, err)
	}
	return b
}

// waitTimeout bounds a wait for the Reader's goroutines: generous, since nothing is
// asserted about how long they take.
const waitTimeout = 10 * time.Second

// noReadahead is the default config without readahead, for tests that count GETs.
func noReadahead() Config {
	c := DefaultConfig()
	c.ReadaheadBytes = 0
	return c
}
