package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot returns the directory holding go.mod, found upwards from the test's working
// directory (its package's): for tests that read the tree (the import rules, the docs'
// links, the Makefile).
func ModuleRoot(t testing.TB) string {
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
			t.Fatal("testutil: no go.mod above the test's directory")
		}
		dir = parent
	}
}
