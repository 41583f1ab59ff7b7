package repocheck

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/testutil"
)

// fuzzLine is one recipe line of the Makefile's fuzz target:
// $(GO) test ./pkg/ -run '^$$' -fuzz FuzzX -fuzztime 20s.
var fuzzLine = regexp.MustCompile(`\btest\s+(\S+)\s.*-fuzz[= ]'?([^'\s]+)'?`)

// fuzzFunc is a fuzz test's declaration.
var fuzzFunc = regexp.MustCompile(`^func (Fuzz\w*)\(\w+ \*testing\.F\)`)

// makeFuzz is one package and -fuzz pattern the Makefile's fuzz target runs.
type makeFuzz struct {
	pkg     string // slash-separated, relative to the root, no "./"
	pattern *regexp.Regexp
	line    string
}

// TestMakeFuzzRunsEveryTarget fails when a func FuzzX in a *_test.go file has no line in
// the Makefile's fuzz target (make fuzz would never run it), or when a line there
// matches no fuzz test, or several (go test refuses to fuzz more than one at a time).
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	root := testutil.ModuleRoot(t)
	runs := readMakeFuzz(t, filepath.Join(root, "Makefile"))
	targets := findFuzzTargets(t, root) // package -> fuzz test names
	for _, pkg := range sortedKeys(targets) {
		for _, name := range targets[pkg] {
			found := false
			for _, r := range runs {
				found = found || (r.pkg == pkg && r.pattern.MatchString(name))
			}
			if !found {
				t.Errorf("%s in ./%s/ is not run by make fuzz: add to the Makefile's fuzz target\n\t$(GO) test ./%s/ -run '^$$' -fuzz %s -fuzztime 20s",
					name, pkg, pkg, name)
			}
		}
	}
	for _, r := range runs {
		var matched []string
		for _, name := range targets[r.pkg] {
			if r.pattern.MatchString(name) {
				matched = append(matched, name)
			}
		}
		if len(matched) != 1 {
			t.Errorf("Makefile fuzz line %q matches %d fuzz tests of ./%s/ %v: want exactly one", r.line, len(matched), r.pkg, matched)
		}
	}
	if len(runs) == 0 || len(targets) == 0 {
		t.Fatalf("found %d fuzz lines in the Makefile and fuzz tests in %d packages: is the parser still right?", len(runs), len(targets))
	}
}

// readMakeFuzz returns the recipe lines of the Makefile's fuzz target.
func readMakeFuzz(t *testing.T, path string) []makeFuzz {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []makeFuzz
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "fuzz:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "\t") {
			break // the recipe ends at the first line not starting with a tab
		}
		m := fuzzLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("Makefile fuzz target: cannot read %q", line)
			continue
		}
		// make turns $$ into $ before the shell sees the pattern.
		re, err := regexp.Compile(strings.ReplaceAll(m[2], "$$", "$"))
		if err != nil {
			t.Errorf("Makefile fuzz line %q: %v", line, err)
			continue
		}
		pkg := strings.TrimSuffix(strings.TrimPrefix(m[1], "./"), "/")
		runs = append(runs, makeFuzz{pkg: pkg, pattern: re, line: strings.TrimSpace(line)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs
}

// findFuzzTargets walks the tree for fuzz tests, by package directory.
func findFuzzTargets(t *testing.T, root string) map[string][]string {
	t.Helper()
	targets := map[string][]string{}
	walkFiles(t, root, "_test.go", func(rel string, data []byte) {
		pkg := path.Dir(rel)
		for _, line := range strings.Split(string(data), "\n") {
			if m := fuzzFunc.FindStringSubmatch(line); m != nil {
				targets[pkg] = append(targets[pkg], m[1])
			}
		}
	})
	return targets
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
