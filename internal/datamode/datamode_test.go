package datamode_test

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/datamode"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/wal"
)

// TestDataPrivate: the message data and the metadata a broker writes are private to
// its user: WAL segments (issue 20 found them 0644 in 0755 directories), local objects
// and metadata.json are 0600 in 0700 directories the broker made.
func TestDataPrivate(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()

	w, err := wal.Open(wal.DefaultConfig(filepath.Join(root, "wal", "broker-1")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendSync(ctx, 1, []byte("a secret message")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := localfs.Open(filepath.Join(root, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("a secret object")
	if err := store.Put(ctx, "topic/0/obj", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(root, "meta", "metadata.json"), Self: metadata.Broker{ID: 1, Host: "127.0.0.1", Port: 9092}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}

	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		want := datamode.FileMode
		if d.IsDir() {
			want = datamode.DirMode
		} else {
			files++
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", strings.TrimPrefix(p, root), st.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("only %d files written", files)
	}
}

// TestCheckWarnsLooseModes: Check names each existing path others may read, and logs it.
func TestCheckWarnsLooseModes(t *testing.T) {
	dir := t.TempDir()
	open, loose := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	for p, mode := range map[string]os.FileMode{open: 0o755, loose: 0o700} {
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // the umask may have narrowed it
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secret, 0o644)
	var logs bytes.Buffer
	got := datamode.Check(slog.New(slog.NewTextHandler(&logs, nil)), "test data", open, loose, secret, filepath.Join(dir, "missing"))
	if len(got) != 2 || got[0] != open || got[1] != secret {
		t.Fatalf("Check = %v, want [%s %s]", got, open, secret)
	}
	if strings.Count(logs.String(), "data readable by other users") != 2 {
		t.Fatalf("logs:\n%s", logs.String())
	}
}
