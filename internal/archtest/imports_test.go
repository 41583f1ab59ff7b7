package archtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/testutil"
)

// TestImportsFollowDesign: every package of the module imports only what docs/DESIGN.md's
// "## Import rules" allow it (its tests also the test helpers and what their column
// lists), every package has a row, and every row and pattern names a package that
// exists. `go list` reads the imports from the source (no build, no network).
func TestImportsFollowDesign(t *testing.T) {
	root := testutil.ModuleRoot(t)
	f, err := os.Open(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listPackages(t, root)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, msg := range rules.Check(pkgs) {
		t.Error(msg)
	}
}

// listPackages runs go list on the module: each package's imports of the module's
// packages, relative to the module, from its files and from its test files.
func listPackages(t *testing.T, root string) []Package {
	const sep = "\t"
	cmd := exec.Command("go", "list", "-f",
		`{{.Module.Path}}`+sep+`{{.ImportPath}}`+sep+`{{join .Imports " "}}`+sep+`{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			t.Skipf("no go command to list the packages with: %v", err)
		}
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), sep)
		if len(f) != 4 {
			t.Fatalf("go list line %q", line)
		}
		mod := f[0]
		rel := func(s string) []string {
			var out []string
			for _, p := range strings.Fields(s) {
				if r, ok := strings.CutPrefix(p, mod+"/"); ok && !strings.Contains(r, "/vendor/") {
					out = append(out, r)
				}
			}
			return out
		}
		path := strings.TrimPrefix(strings.TrimPrefix(f[1], mod), "/")
		if path == "" {
			path = "."
		}
		pkgs = append(pkgs, Package{Path: path, Imports: rel(f[2]), TestImports: rel(f[3])})
	}
	return pkgs
}
