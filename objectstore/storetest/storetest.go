// Package storetest is the conformance suite every objectstore.Store passes, so the
// stores are interchangeable: the same calls give the same results and the same
// sentinel errors on localfs, S3 (MinIO in the tests) and any wrapper.
//
// Choices the suite pins down (see the objectstore package doc):
//   - A range that runs past the end of an object is a short read (no error), like S3;
//     offset == size reads zero bytes; offset > size is ErrInvalidRange.
//   - Deleting a missing key succeeds.
//   - A Put whose body does not hold exactly size bytes fails and stores nothing.
//   - A context that has ended fails every operation with an error wrapping the
//     context's error, and a reader whose context ends fails its next reads.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/objectstore"
)

// Options tunes Run for slow stores.
type Options struct {
	// ManyKeys is the object count of the listing test; at least 1001 so that an S3
	// listing takes more than one page. Default 1100.
	ManyKeys int
	// LargeSize is the size of the large object. Default 20 MiB.
	LargeSize int
}

// Run runs the suite. newStore returns an empty store for one subtest (a fresh
// directory, or a fresh prefix in a bucket); it is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) objectstore.Store) {
	RunWith(t, Options{}, newStore)
}

// RunWith is Run with options.
func RunWith(t *testing.T, opts Options, newStore func(t *testing.T) objectstore.Store) {
	if opts.ManyKeys == 0 {
		opts.ManyKeys = 1100
	}
	if opts.LargeSize == 0 {
		opts.LargeSize = 20 << 20
	}
	tests := []struct {
		name string
		f    func(*testing.T, objectstore.Store)
	}{
		{"PutGet", testPutGet},
		{"Ranges", testRanges},
		{"Overwrite", testOverwrite},
		{"Empty", testEmpty},
		{"Large", func(t *testing.T, s objectstore.Store) { testLarge(t, s, opts.LargeSize) }},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"SizeMismatch", testSizeMismatch},
		{"NonSeekableBody", testNonSeekableBody},
		{"List", testList},
		{"ListMany", func(t *testing.T, s objectstore.Store) { testListMany(t, s, opts.ManyKeys) }},
		{"Concurrent", testConcurrent},
		{"ContextCanceled", testContextCanceled},
		{"CancelDuringPut", testCancelDuringPut},
		{"CancelDuringRead", testCancelDuringRead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.f(t, newStore(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Data returns n pseudo-random bytes determined by seed.
func Data(seed uint64, n int) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), byte(seed >> 32)})
	b := make([]byte, n)
	_, _ = r.Read(b)
	return b
}

func put(t *testing.T, s objectstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s objectstore.Store, key string, off, n int64) []byte {
	t.Helper()
	b, err := objectstore.ReadRange(ctxT(t), s, key, off, n)
	if err != nil {
		t.Fatalf("get %s [%d,+%d): %v", key, off, n, err)
	}
	return b
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func equal(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes, want %d (first difference at %d)", what, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testPutGet(t *testing.T, s objectstore.Store) {
	data := Data(1, 1000)
	put(t, s, "a/b/obj1", data)
	equal(t, "whole", get(t, s, "a/b/obj1", 0, -1), data)
	info, err := s.Head(ctxT(t), "a/b/obj1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "a/b/obj1" || info.Size != 1000 {
		t.Fatalf("head: %+v", info)
	}
	if info.LastModified.IsZero() || time.Since(info.LastModified) > time.Hour || time.Until(info.LastModified) > time.Hour {
		t.Fatalf("head: last modified %v is not about now", info.LastModified)
	}
	// A key with every allowed special character.
	odd := "x/y-z_w.v=u,t@s~r!q*p'o(n)m"
	put(t, s, odd, data[:10])
	equal(t, "odd key", get(t, s, odd, 0, -1), data[:10])
}

func testRanges(t *testing.T, s objectstore.Store) {
	data := Data(2, 1000)
	put(t, s, "r", data)
	cases := []struct {
		off, n int64
		want   []byte
	}{
		{0, 1, data[:1]},          // first byte
		{400, 100, data[400:500]}, // middle
		{999, 1, data[999:]},      // last byte
		{999, -1, data[999:]},     // last byte, to the end
		{500, -1, data[500:]},     // to the end
		{0, 1000, data},           // exactly all
		{900, 500, data[900:]},    // past the end: short read
		{0, 5000, data},           // longer than the object
		{1000, -1, nil},           // at the end: empty
		{1000, 10, nil},           // at the end: empty
		{10, 0, nil},              // zero length
	}
	for _, c := range cases {
		got := get(t, s, "r", c.off, c.n)
		equal(t, fmt.Sprintf("range [%d,+%d)", c.off, c.n), got, c.want)
	}
	for _, c := range []struct{ off, n int64 }{{1001, -1}, {1001, 1}, {5000, 10}, {-1, 10}, {0, -2}, {2000, 0}} {
		_, err := objectstore.ReadRange(ctxT(t), s, "r", c.off, c.n)
		wantErr(t, fmt.Sprintf("range [%d,+%d)", c.off, c.n), err, objectstore.ErrInvalidRange)
	}
	// Reading a range in small pieces gives the same bytes.
	rc, err := s.GetRange(ctxT(t), "r", 100, 800)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 7)
	for {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	equal(t, "small reads", got, data[100:900])
}

func testOverwrite(t *testing.T, s objectstore.Store) {
	put(t, s, "o", Data(3, 5000))
	v2 := Data(4, 300)
	put(t, s, "o", v2)
	equal(t, "after overwrite", get(t, s, "o", 0, -1), v2)
	info, err := s.Head(ctxT(t), "o")
	if err != nil || info.Size != 300 {
		t.Fatalf("head after overwrite: %+v %v", info, err)
	}
	list, err := s.List(ctxT(t), "o")
	if err != nil || len(list) != 1 || list[0].Size != 300 {
		t.Fatalf("list after overwrite: %+v %v", list, err)
	}
}

func testEmpty(t *testing.T, s objectstore.Store) {
	put(t, s, "empty", nil)
	if b := get(t, s, "empty", 0, -1); len(b) != 0 {
		t.Fatalf("empty object read %d bytes", len(b))
	}
	if b := get(t, s, "empty", 0, 10); len(b) != 0 {
		t.Fatalf("empty object range read %d bytes", len(b))
	}
	info, err := s.Head(ctxT(t), "empty")
	if err != nil || info.Size != 0 {
		t.Fatalf("head: %+v %v", info, err)
	}
	_, err = objectstore.ReadRange(ctxT(t), s, "empty", 1, -1)
	wantErr(t, "offset 1 of an empty object", err, objectstore.ErrInvalidRange)
	list, err := s.List(ctxT(t), "")
	if err != nil || len(list) != 1 || list[0].Key != "empty" || list[0].Size != 0 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func testLarge(t *testing.T, s objectstore.Store, size int) {
	data := Data(5, size)
	put(t, s, "large/obj", data)
	equal(t, "whole", get(t, s, "large/obj", 0, -1), data)
	mid, n := int64(size/2-12345), int64(size/3)
	equal(t, "range across the middle", get(t, s, "large/obj", mid, n), data[mid:mid+n])
	equal(t, "tail", get(t, s, "large/obj", int64(size-100), -1), data[size-100:])
	info, err := s.Head(ctxT(t), "large/obj")
	if err != nil || info.Size != int64(size) {
		t.Fatalf("head: %+v %v", info, err)
	}
}

func testNotFound(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	_, err := s.GetRange(ctx, "missing", 0, -1)
	wantErr(t, "get", err, objectstore.ErrNotFound)
	_, err = s.GetRange(ctx, "missing/deeper/key", 10, 10)
	wantErr(t, "ranged get", err, objectstore.ErrNotFound)
	_, err = s.GetRange(ctx, "missing", 5, 0)
	wantErr(t, "zero-length get", err, objectstore.ErrNotFound)
	_, err = s.Head(ctx, "missing")
	wantErr(t, "head", err, objectstore.ErrNotFound)
	if err := s.Delete(ctx, "missing"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
	list, err := s.List(ctx, "missing")
	if err != nil || len(list) != 0 {
		t.Fatalf("list missing: %+v %v", list, err)
	}
	// A "directory" of another key is not an object.
	put(t, s, "dir/obj", []byte("x"))
	_, err = s.Head(ctx, "dir")
	wantErr(t, "head of a key's directory", err, objectstore.ErrNotFound)
	_, err = s.GetRange(ctx, "dir", 0, -1)
	wantErr(t, "get of a key's directory", err, objectstore.ErrNotFound)
	// A path through an object is not an object either.
	_, err = s.Head(ctx, "dir/obj/x")
	wantErr(t, "head below an object", err, objectstore.ErrNotFound)
	if err := s.Delete(ctx, "dir"); err != nil {
		t.Fatalf("delete of a key's directory: %v", err)
	}
	equal(t, "object after deleting its directory name", get(t, s, "dir/obj", 0, -1), []byte("x"))
}

func testDelete(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	put(t, s, "d/1", []byte("one"))
	put(t, s, "d/2", []byte("two"))
	if err := s.Delete(ctx, "d/1"); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetRange(ctx, "d/1", 0, -1)
	wantErr(t, "get after delete", err, objectstore.ErrNotFound)
	_, err = s.Head(ctx, "d/1")
	wantErr(t, "head after delete", err, objectstore.ErrNotFound)
	if err := s.Delete(ctx, "d/1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	list, err := s.List(ctx, "d/")
	if err != nil || len(list) != 1 || list[0].Key != "d/2" {
		t.Fatalf("list after delete: %+v %v", list, err)
	}
	// The key can be used again.
	put(t, s, "d/1", []byte("again"))
	equal(t, "put after delete", get(t, s, "d/1", 0, -1), []byte("again"))
}

func testInvalidKeys(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	for _, k := range []string{"", "/abs", "a/../b", "..", ".", "a/./b", "a//b", "a/", "../x", "a b", "a\\b", "a\x00b", "ü", "a?b", "a#b", "a%b", "a+b", strings.Repeat("a", 1025)} {
		err := s.Put(ctx, k, bytes.NewReader(nil), 0)
		wantErr(t, fmt.Sprintf("put %q", k), err, objectstore.ErrInvalidKey)
		_, err = s.GetRange(ctx, k, 0, -1)
		wantErr(t, fmt.Sprintf("get %q", k), err, objectstore.ErrInvalidKey)
		_, err = s.Head(ctx, k)
		wantErr(t, fmt.Sprintf("head %q", k), err, objectstore.ErrInvalidKey)
		err = s.Delete(ctx, k)
		wantErr(t, fmt.Sprintf("delete %q", k), err, objectstore.ErrInvalidKey)
	}
	for _, p := range []string{"/", "../", "a/../", "a//", "a b"} {
		_, err := s.List(ctx, p)
		wantErr(t, fmt.Sprintf("list %q", p), err, objectstore.ErrInvalidKey)
	}
	list, err := s.List(ctx, "")
	if err != nil || len(list) != 0 {
		t.Fatalf("invalid keys left objects: %+v %v", list, err)
	}
}

func testSizeMismatch(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	data := Data(6, 100)
	if err := s.Put(ctx, "short", bytes.NewReader(data), 101); err == nil {
		t.Fatal("put of a body shorter than size succeeded")
	}
	if err := s.Put(ctx, "long", bytes.NewReader(data), 99); err == nil {
		t.Fatal("put of a body longer than size succeeded")
	}
	if err := s.Put(ctx, "short", io.MultiReader(bytes.NewReader(data)), 101); err == nil {
		t.Fatal("put of a non-seekable body shorter than size succeeded")
	}
	if err := s.Put(ctx, "long", io.MultiReader(bytes.NewReader(data)), 99); err == nil {
		t.Fatal("put of a non-seekable body longer than size succeeded")
	}
	for _, k := range []string{"short", "long"} {
		_, err := s.Head(ctx, k)
		wantErr(t, "head after a failed put", err, objectstore.ErrNotFound)
	}
	// A failed overwrite leaves the old object.
	put(t, s, "keep", data)
	if err := s.Put(ctx, "keep", bytes.NewReader(data[:10]), 20); err == nil {
		t.Fatal("short overwrite succeeded")
	}
	equal(t, "object after a failed overwrite", get(t, s, "keep", 0, -1), data)
}

func testNonSeekableBody(t *testing.T, s objectstore.Store) {
	data := Data(7, 300000)
	// io.MultiReader hides the Seeker; the middle position checks Put reads from there.
	if err := s.Put(ctxT(t), "ns", io.MultiReader(bytes.NewReader(data[:1000]), bytes.NewReader(data[1000:])), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	equal(t, "non-seekable body", get(t, s, "ns", 0, -1), data)
	r := bytes.NewReader(data)
	if _, err := r.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctxT(t), "mid", r, int64(len(data)-1000)); err != nil {
		t.Fatal(err)
	}
	equal(t, "seekable body from its current position", get(t, s, "mid", 0, -1), data[1000:])
}

func testList(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	keys := []string{"list/a/1", "list/a/2", "list/ab", "list/b/1", "list/b/c/d", "list.x", "other"}
	for i, k := range keys {
		put(t, s, k, Data(uint64(i), i+1))
	}
	check := func(prefix string, want ...string) {
		t.Helper()
		list, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		var got []string
		for _, o := range list {
			got = append(got, o.Key)
			i := slices.Index(keys, o.Key)
			if i < 0 || o.Size != int64(i+1) {
				t.Fatalf("list %q: %+v: wrong size or key", prefix, o)
			}
			if o.LastModified.IsZero() {
				t.Fatalf("list %q: %+v: no modification time", prefix, o)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("list %q: got %q, want %q", prefix, got, want)
		}
	}
	check("", "list.x", "list/a/1", "list/a/2", "list/ab", "list/b/1", "list/b/c/d", "other")
	check("list", "list.x", "list/a/1", "list/a/2", "list/ab", "list/b/1", "list/b/c/d")
	check("list/", "list/a/1", "list/a/2", "list/ab", "list/b/1", "list/b/c/d")
	check("list/a", "list/a/1", "list/a/2", "list/ab")
	check("list/a/", "list/a/1", "list/a/2")
	check("list/b/c/", "list/b/c/d")
	check("list/a/1", "list/a/1")
	check("list/a/1/")
	check("list/c")
	check("nothing/here/")
}

func testListMany(t *testing.T, s objectstore.Store, n int) {
	ctx := ctxT(t)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("many/%05d", i)
	}
	work := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if err := s.Put(ctx, k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, k := range want {
		work <- k
		if len(errs) > 0 {
			break
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	put(t, s, "manz", []byte("not listed"))
	list, err := s.List(ctx, "many/")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(list))
	for i, o := range list {
		got[i] = o.Key
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d keys, want %d (first %q)", len(got), len(want), got[:min(3, len(got))])
	}
}

func testConcurrent(t *testing.T, s objectstore.Store) {
	ctx := ctxT(t)
	versions := [][]byte{Data(10, 64<<10), Data(11, 100<<10), Data(12, 32<<10)}
	put(t, s, "shared", versions[0])
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("own/%d", g)
			for i := 0; i < 10; i++ {
				data := Data(uint64(100*g+i), 1000+i*100)
				if err := s.Put(ctx, own, bytes.NewReader(data), int64(len(data))); err != nil {
					errs <- err
					return
				}
				got, err := objectstore.ReadRange(ctx, s, own, 0, -1)
				if err != nil || !bytes.Equal(got, data) {
					errs <- fmt.Errorf("%s: read back %d bytes, err %v", own, len(got), err)
					return
				}
				if g%2 == 0 { // writers of the shared key
					v := versions[(g+i)%len(versions)]
					if err := s.Put(ctx, "shared", bytes.NewReader(v), int64(len(v))); err != nil {
						errs <- err
						return
					}
				} else { // readers of the shared key: always one whole version
					got, err := objectstore.ReadRange(ctx, s, "shared", 0, -1)
					if err != nil {
						errs <- err
						return
					}
					if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, got) }) {
						errs <- fmt.Errorf("shared: read %d bytes that are no version put", len(got))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testContextCanceled(t *testing.T, s objectstore.Store) {
	put(t, s, "c", []byte("data"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, "c2", bytes.NewReader([]byte("x")), 1)
	wantErr(t, "put", err, context.Canceled)
	_, err = s.GetRange(ctx, "c", 0, -1)
	wantErr(t, "get", err, context.Canceled)
	_, err = s.Head(ctx, "c")
	wantErr(t, "head", err, context.Canceled)
	err = s.Delete(ctx, "c")
	wantErr(t, "delete", err, context.Canceled)
	_, err = s.List(ctx, "")
	wantErr(t, "list", err, context.Canceled)
	_, err = s.Head(ctxT(t), "c2")
	wantErr(t, "put with a cancelled context stored", err, objectstore.ErrNotFound)
	equal(t, "delete with a cancelled context deleted", get(t, s, "c", 0, -1), []byte("data"))
	// An expired deadline is reported as such.
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = s.Head(dctx, "c")
	wantErr(t, "head past deadline", err, context.DeadlineExceeded)
}

// cancelingReader serves data and cancels the context after the first `after` bytes.
type cancelingReader struct {
	data   []byte
	after  int
	cancel func()
	off    int
}

func (r *cancelingReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	if r.off >= r.after {
		r.cancel()
	}
	n := copy(p, r.data[r.off:min(len(r.data), r.off+4096)])
	r.off += n
	return n, nil
}

func testCancelDuringPut(t *testing.T, s objectstore.Store) {
	data := Data(8, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.Put(ctx, "cp", &cancelingReader{data: data, after: 100 << 10, cancel: cancel}, int64(len(data)))
	wantErr(t, "put cancelled midway", err, context.Canceled)
	_, err = s.Head(ctxT(t), "cp")
	wantErr(t, "head after a cancelled put", err, objectstore.ErrNotFound)
}

func testCancelDuringRead(t *testing.T, s objectstore.Store) {
	data := Data(9, 8<<20)
	put(t, s, "cr", data)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, err := s.GetRange(ctx, "cr", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	n, err := io.Copy(io.Discard, rc)
	wantErr(t, fmt.Sprintf("read after cancel (after %d more bytes)", n), err, context.Canceled)
}
