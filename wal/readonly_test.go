package wal

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// A reader sees exactly the records the owner synced, across segments, while the owner
// keeps appending, and reads their payloads back by position.
func TestReadOnlyFollowsOwner(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.SegmentSize = MinSegmentSize
	w, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	var pos []Pos
	for i := 0; i < 300; i++ {
		p, err := w.AppendSync(context.Background(), 7, []byte(fmt.Sprintf("record-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	r, err := OpenReadOnly(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []Pos
	end, err := r.Scan(func(typ byte, payload []byte, p Pos) error {
		if typ != 7 || !bytes.Equal(payload, []byte(fmt.Sprintf("record-%04d", len(seen)))) {
			t.Fatalf("record %d: type %d payload %q", len(seen), typ, payload)
		}
		seen = append(seen, p)
		return nil
	})
	if err != nil || len(seen) != 300 || end != w.End() {
		t.Fatalf("scan: %d records, end %d (owner %d), err %v", len(seen), end, w.End(), err)
	}
	for i, p := range seen {
		if p != pos[i] {
			t.Fatalf("record %d at %d, owner says %d", i, p, pos[i])
		}
	}
	// The owner appends more, in new segments; the reader finds them by position.
	p, err := w.AppendSync(context.Background(), 7, bytes.Repeat([]byte("z"), 2000))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2000)
	if err := r.ReadAt(buf, p); err != nil || buf[1999] != 'z' {
		t.Fatalf("read new record: %v", err)
	}
	if err := r.ReadAt(buf[:5], seen[10]); err != nil || string(buf[:5]) != "recor" {
		t.Fatalf("read old record: %v %q", err, buf[:5])
	}
}
