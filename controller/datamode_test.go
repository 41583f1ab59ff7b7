package controller

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// TestRaftDataPrivate: issue 20's finding was a world-readable Raft snapshot holding
// the SCRAM salts, StoredKeys and ServerKeys. A controller on a fresh data directory
// stores a SCRAM credential and snapshots it; then nothing under its data directory is
// reachable by other users: the directory, snapshots/ and each snapshot's directory are
// 0700, raft.db and the snapshot files 0600. A data directory
// left 0755 by an older version is warned about at the next start.
func TestRaftDataPrivate(t *testing.T) {
	// A data directory the controller makes itself (not the test's temporary one).
	fresh := func(c *Config) { c.DataDir = filepath.Join(c.DataDir, "controller") }
	tc := newTestCluster(t, 1, fresh)
	leader := tc.waitLeader()
	cl := tc.client(-1, nil)
	if _, err := cl.AlterScram(ctxT(t), []metadata.ScramAlteration{scramUpsert("alice", scramCred(metadata.ScramSHA512, 7))}); err != nil {
		t.Fatal(err)
	}
	if err := tc.ctrls[leader].r.Load().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tc.dirs[leader], "controller")
	var snapFiles int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == "." || rel == "snapshots":
			if st.Mode().Perm() != 0o700 {
				t.Errorf("%s: mode %v, want 0700", rel, st.Mode().Perm())
			}
		case rel == "raft.db":
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", rel, st.Mode().Perm())
			}
		case strings.HasPrefix(rel, "snapshots"+string(filepath.Separator)):
			want := os.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			} else {
				snapFiles++
			}
			if st.Mode().Perm() != want {
				t.Errorf("%s: mode %v, want %v", rel, st.Mode().Perm(), want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if snapFiles == 0 {
		t.Fatal("no snapshot was written")
	}

	// An older data directory, group- and world-readable: the restart warns.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	tc.stop(leader)
	tc.mutate = func(c *Config) { fresh(c); c.Logger = slog.New(slog.NewTextHandler(logs, nil)) }
	tc.restart(leader)
	if out := logs.String(); !strings.Contains(out, "data readable by other users") || !strings.Contains(out, dir) {
		t.Fatalf("no warning about the 0755 data directory; logs:\n%s", out)
	}
}
