package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skipDir reports the directories the go tool ignores (testdata, names starting with
// "." or "_") and the ones that hold no source of ours (bin, data, node_modules).
func skipDir(name string) bool {
	switch name {
	case "testdata", "bin", "data", "node_modules", "vendor":
		return true
	}
	return len(name) > 0 && (name[0] == '.' || name[0] == '_')
}

// walkFiles calls fn with the slash-separated path (relative to root) and the contents of
// every file of the tree whose name ends in suffix, skipping what skipDir names.
func walkFiles(t *testing.T, root, suffix string, fn func(rel string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), suffix) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
