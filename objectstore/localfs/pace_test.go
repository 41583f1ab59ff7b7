package localfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-io/weir/internal/sysfile"
)

// TestPacedCopyWritesBackInSteps: an object is handed to write-back in consecutive
// steps of about paceStep as it is written (not all at the end), and arrives intact.
func TestPacedCopyWritesBackInSteps(t *testing.T) {
	data := make([]byte, 5*paceStep+1234)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "obj"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var next int64
	steps := 0
	wb := func(g *os.File, off, n int64) error {
		if off != next || n < paceStep || n > paceStep+64<<10 {
			t.Errorf("write-back of [%d, +%d) after %d; want consecutive steps of about %d", off, n, next, paceStep)
		}
		if fi, _ := g.Stat(); fi.Size() < off+n {
			t.Errorf("write-back of [%d, +%d) beyond the %d bytes written", off, n, fi.Size())
		}
		next = off + n
		steps++
		return sysfile.WriteBack(g, off, n)
	}
	n, err := pacedCopy(f, bytes.NewReader(data), wb)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("pacedCopy: %d, %v", n, err)
	}
	if steps < 5 {
		t.Fatalf("%d write-back steps for %d bytes", steps, len(data))
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, data) {
		t.Fatal("copy differs")
	}
}

// A failing write-back (a file system without sync_file_range) is given up after the
// first try; the copy itself goes on.
func TestPacedCopyWithoutWriteBack(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 4*paceStep)
	f, err := os.Create(filepath.Join(t.TempDir(), "obj"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tries := 0
	n, err := pacedCopy(f, bytes.NewReader(data), func(*os.File, int64, int64) error { tries++; return os.ErrInvalid })
	if err != nil || n != int64(len(data)) || tries != 1 {
		t.Fatalf("pacedCopy: %d bytes, %v, %d write-back tries", n, err, tries)
	}
}
