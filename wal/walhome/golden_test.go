package walhome_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
	"github.com/weir-io/weir/wal/waltest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares the file name in dir on fs with testdata/golden (rewritten by go test
// ./wal/walhome/ -run Golden -update), and returns the golden bytes.
func golden(t *testing.T, fs wal.FS, dir, name, golden string) []byte {
	t.Helper()
	got, err := wal.ReadUncached(fs, filepath.Join(dir, name), 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n%s\ngolden %s:\n%s", name, got, golden, want)
	}
	return want
}

// INDEX (format 2) and PROXYEND (format 1): today's writers write the golden files byte
// for byte, and the readers read them (and INDEX format 1, without proxied partitions).
func TestGoldenDirIndex(t *testing.T) {
	fs := waltest.NewMemFS()
	const dir = "/wal/broker-1/epoch-00000000000000000002"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := metadata.TopicID{0xaa, 1}, metadata.TopicID{0xbb, 2}
	var idx walhome.DirIndex
	idx.Note(b, 0, 7)
	idx.Note(a, 3, 40)
	idx.Note(a, 3, 12) // lower: the highest offset stays
	idx.NoteProxied(b, 5)
	if err := walhome.WriteDirIndex(fs, dir, &idx); err != nil {
		t.Fatal(err)
	}
	golden(t, fs, dir, walhome.DirIndexFile, "index-v2.json")
	got, ok, err := walhome.ReadDirIndex(fs, dir)
	if err != nil || !ok || len(got.Partitions) != 2 || got.Partitions[0] != (walhome.DirIndexRef{Topic: a, Partition: 3, LastOffset: 40}) ||
		got.Partitions[1] != (walhome.DirIndexRef{Topic: b, Partition: 0, LastOffset: 7}) || len(got.Proxied) != 1 || got.Proxied[0] != (walhome.DirIndexProxied{Topic: b, Partition: 5}) {
		t.Fatalf("read back %+v %v %v", got, ok, err)
	}
	if err := walhome.WriteProxyEnds(fs, dir, walhome.ProxyEnds{Ends: []walhome.ProxyEndEntry{{Topic: b, Partition: 5, End: 99}}}); err != nil {
		t.Fatal(err)
	}
	golden(t, fs, dir, walhome.ProxyEndsFile, "proxyend-v1.json")
	if e, ok, err := walhome.ReadProxyEnds(fs, dir); err != nil || !ok || len(e.Ends) != 1 || e.Ends[0].End != 99 {
		t.Fatalf("PROXYEND read back %+v %v %v", e, ok, err)
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"format_version":1,"partitions":[]}`, true},
		{`{"format_version":3,"partitions":[]}`, false},
	} {
		f, _ := fs.OpenFile(filepath.Join(dir, walhome.DirIndexFile), os.O_RDWR|os.O_TRUNC, 0)
		f.WriteAt([]byte(c.body), 0)
		f.Close()
		if _, ok, err := walhome.ReadDirIndex(fs, dir); ok != c.ok || (err != nil) == c.ok {
			t.Fatalf("%s: %v %v", c.body, ok, err)
		}
	}
}
