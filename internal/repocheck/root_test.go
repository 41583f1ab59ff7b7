package repocheck

import (
	"os"
	"path/filepath"
	"testing"
)

// repoRoot is the directory holding go.mod, found upwards from the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repocheck: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// skipDir reports the directories the go tool ignores (testdata, names starting with
// "." or "_") and the ones that hold no source of ours (bin, data, node_modules).
func skipDir(name string) bool {
	switch name {
	case "testdata", "bin", "data", "node_modules", "vendor":
		return true
	}
	return len(name) > 0 && (name[0] == '.' || name[0] == '_')
}
