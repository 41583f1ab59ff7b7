package broker

import (
	"bytes"
	"testing"

	"github.com/weir-io/weir/wal"
)

// recentWrites keeps the newest batches within its limit, answers only a read of a kept
// batch's exact size, and falls back to the WAL otherwise.
func TestRecentWrites(t *testing.T) {
	r := newRecentWrites(10)
	r.add(100, []byte("aaaa"))
	r.add(200, []byte("bbbb"))
	r.add(200, []byte("xxxx")) // the same position again: kept once, the first bytes
	r.add(300, []byte("cccc")) // 12 bytes > 10: 100 goes
	r.add(400, make([]byte, 11))
	got := make([]byte, 4)
	if r.readAt(got, 100) {
		t.Fatal("the oldest batch still kept past the limit")
	}
	if !r.readAt(got, 200) || string(got) != "bbbb" || !r.readAt(got, 300) || string(got) != "cccc" {
		t.Fatalf("kept batches: %q", got)
	}
	if r.readAt(make([]byte, 3), 300) || r.readAt(make([]byte, 11), 400) {
		t.Fatal("a read of another size, or a batch larger than the limit, answered from memory")
	}
	if r.bytes != 8 || len(r.data) != 2 {
		t.Fatalf("%d bytes in %d batches, want 8 in 2", r.bytes, len(r.data))
	}
	var none *recentWrites
	none.add(1, []byte("a"))
	if none.readAt(got, 1) || newRecentWrites(0).readAt(got, 1) {
		t.Fatal("a nil or empty holder answered")
	}
	// The reader falls back to the WAL for what is not kept.
	rr := recentReader{Reader: fakeReader{}, recent: r}
	if err := rr.ReadAt(got, 300); err != nil || string(got) != "cccc" {
		t.Fatalf("kept: %q %v", got, err)
	}
	if err := rr.ReadAt(got, 999); err != nil || !bytes.Equal(got, []byte("wal!")) {
		t.Fatalf("not kept: %q %v, want the WAL's bytes", got, err)
	}
}

type fakeReader struct{}

func (fakeReader) ReadAt(p []byte, _ wal.Pos) error { copy(p, "wal!"); return nil }
