package tier

import "testing"

// TestObjectBufferReused: the next object is built in the previous one's memory (a
// fresh multi-MiB buffer is zeroed and faulted in while its goroutine holds a CPU),
// unless that buffer was oversized.
func TestObjectBufferReused(t *testing.T) {
	tr := &Tier{cfg: Config{TargetObjectBytes: 8 << 20}}
	b := tr.objectBuffer(4 << 20)
	if cap(b) < 4<<20 || len(b) != 0 {
		t.Fatalf("buffer len %d cap %d", len(b), cap(b))
	}
	b = append(b, 1, 2, 3)
	tr.keepObjectBuffer(b)
	c := tr.objectBuffer(1 << 20)
	if len(c) != 0 || cap(c) != cap(b) || &c[:1][0] != &b[0] {
		t.Fatal("the kept buffer was not reused")
	}
	if d := tr.objectBuffer(1 << 20); cap(d) == cap(b) && cap(d) > 0 && &d[:1][0] == &b[0] {
		t.Fatal("one buffer handed out twice")
	}
	tr.keepObjectBuffer(make([]byte, 0, 64<<20))
	if tr.objBuf != nil {
		t.Fatal("an oversized buffer was kept")
	}
	tr.keepObjectBuffer(c)
	if e := tr.objectBuffer(16 << 20); cap(e) < 16<<20 {
		t.Fatalf("a buffer smaller than asked: %d", cap(e))
	}
}
