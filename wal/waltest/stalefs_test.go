package waltest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"testing"
)

func readAll(t *testing.T, f interface {
	ReadAt([]byte, int64) (int, error)
	Stat() (os.FileInfo, error)
}) []byte {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) || err != nil && err != io.EOF {
		t.Fatalf("read %d of %d: %v", n, len(b), err)
	}
	return b
}

// Two hosts over one server: writes reach the other host only after Sync (or Close),
// and only through an open made after that; a descriptor held across keeps its size and
// the pages it read, while pages it never read come fresh from the server.
func TestStaleFSCloseToOpen(t *testing.T) {
	server := NewMemFS()
	server.MkdirAll("/d", 0o755)
	a, b := NewStaleFS(server), NewStaleFS(server)

	wa, err := a.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	a.SyncDir("/d")
	wa.WriteAt(bytes.Repeat([]byte{1}, 2*PageSize), 0)
	if got := readAll(t, wa); !bytes.Equal(got, bytes.Repeat([]byte{1}, 2*PageSize)) {
		t.Fatal("the writer does not read its own unwritten data")
	}
	rb, err := b.OpenFile("/d/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rb); len(got) != 0 {
		t.Fatalf("another host sees %d bytes not yet written back", len(got))
	}
	if err := wa.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rb); len(got) != 0 {
		t.Fatalf("a descriptor opened before the sync sees %d bytes: its size is cached", len(got))
	}
	rb2, _ := b.OpenFile("/d/f", os.O_RDONLY, 0)
	p := make([]byte, 1)
	rb2.ReadAt(p, 0) // caches page 0 only
	if p[0] != 1 {
		t.Fatal("a fresh open does not see synced data")
	}

	// Overwrite both pages in place (same size) on host a.
	wa.WriteAt(bytes.Repeat([]byte{2}, 2*PageSize), 0)
	wa.Sync()
	rb2.ReadAt(p, 0)
	q := make([]byte, 1)
	rb2.ReadAt(q, PageSize)
	if p[0] != 1 || q[0] != 2 {
		t.Fatalf("held descriptor: page 0 = %d (want the cached 1), page 1 = %d (never read: want 2)", p[0], q[0])
	}
	rb3, _ := b.OpenFile("/d/f", os.O_RDONLY, 0)
	rb2.ReadAt(p, 0)
	if p[0] != 2 {
		t.Fatal("an open did not revalidate the host's cache of the file")
	}
	for _, f := range []interface{ Close() error }{wa, rb, rb2, rb3} {
		f.Close()
	}

	// Close writes back and commits, as an NFS close does.
	wa, _ = a.OpenFile("/d/f", os.O_RDWR, 0)
	wa.WriteAt([]byte{3}, 0)
	wa.Close()
	crash := server.CrashClone()
	f, err := crash.OpenFile("/d/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.ReadAt(p, 0)
	if p[0] != 3 {
		t.Fatal("close did not write back and commit")
	}
}

// With stale listings on, a host keeps its first listing of a directory, plus its own
// changes; lookups by name still reach the server.
func TestStaleFSStaleDirs(t *testing.T) {
	server := NewMemFS()
	server.MkdirAll("/d", 0o755)
	a, b := NewStaleFS(server), NewStaleFS(server)
	b.SetStaleDirs(true)
	names := func() []string {
		ents, err := b.ReadDir("/d")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	f, _ := a.OpenFile("/d/one", os.O_CREATE|os.O_RDWR, 0o644)
	f.Close()
	if got := names(); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("first listing %v", got)
	}
	f, _ = a.OpenFile("/d/two", os.O_CREATE|os.O_RDWR, 0o644)
	f.Close()
	if got := names(); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("stale listing shows %v", got)
	}
	if f, err := b.OpenFile("/d/two", os.O_RDONLY, 0); err != nil {
		t.Fatalf("lookup by name: %v", err)
	} else {
		f.Close()
	}
	f, _ = b.OpenFile("/d/three", os.O_CREATE|os.O_RDWR, 0o644)
	f.Close()
	if err := b.HardLink("/d/three", "/d/four"); err != nil {
		t.Fatal(err)
	}
	if err := b.HardLink("/d/three", "/d/one"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("hard link over an existing name: %v", err)
	}
	if got := names(); !slices.Equal(got, []string{"four", "one", "three"}) {
		t.Fatalf("own changes: listing %v", got)
	}
	b.SetStaleDirs(false)
	if got := names(); !slices.Equal(got, []string{"four", "one", "three", "two"}) {
		t.Fatalf("fresh listing %v", got)
	}
}
