package repocheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/testutil"
)

// sleepsToComment lists the test files (slash-separated, relative to the root) that
// still hold a time.Sleep without a comment, written before this check: they are being
// fixed on other branches. Only shrink it: a file whose sleeps are all commented must
// leave the list (the test says so), and no file may join it.
const sleepsToComment = `
`

// TestSleepsSayWhy fails when a time.Sleep in a *_test.go file has no comment on its line
// or on the line above. A test waits for something with internal/testutil's Eventually
// (a fixed sleep is too short on a loaded machine and wasted on an idle one); a sleep is
// for letting time pass on purpose (longer than a lease: nothing may happen meanwhile;
// the pace of a load generator; a fake store's delay), and its comment says which.
func TestSleepsSayWhy(t *testing.T) {
	root := testutil.ModuleRoot(t)
	todo := strings.Fields(sleepsToComment)
	var seen []string // the listed files that still have an uncommented sleep
	walkFiles(t, root, "_test.go", func(rel string, data []byte) {
		if !bytes.Contains(data, []byte(".Sleep(")) {
			return // nothing to parse
		}
		bad := uncommentedSleeps(t, rel, data)
		if len(bad) == 0 {
			return
		}
		if slices.Contains(todo, rel) {
			seen = append(seen, rel)
			return
		}
		for _, line := range bad {
			t.Errorf("%s:%d: time.Sleep without a comment: wait with testutil.Eventually for what it waits for, "+
				"or say on its line or the line above why time must pass (e.g. // on purpose: longer than the lease)", rel, line)
		}
	})
	for _, rel := range todo {
		if !slices.Contains(seen, rel) {
			t.Errorf("%s has no uncommented time.Sleep left: remove it from sleepsToComment", rel)
		}
	}
}

// uncommentedSleeps returns the lines of the calls to time.Sleep in the Go source data
// that have no comment on the same line, or on the line above as a line of its own.
func uncommentedSleeps(t *testing.T, rel string, data []byte) []int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, data, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", rel, err)
		return nil
	}
	commented := map[int]bool{} // lines that hold a comment
	ownLine := map[int]bool{}   // lines that start with one
	lines := strings.Split(string(data), "\n")
	for _, g := range f.Comments {
		for _, c := range g.List {
			start, end := fset.Position(c.Pos()), fset.Position(c.End())
			for l := start.Line; l <= end.Line; l++ {
				commented[l] = true
			}
			if strings.TrimSpace(lines[start.Line-1][:start.Column-1]) == "" {
				for l := start.Line; l <= end.Line; l++ {
					ownLine[l] = true
				}
			}
		}
	}
	var bad []int
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && isTimeSleep(call.Fun) {
			if l := fset.Position(call.Pos()).Line; !commented[l] && !ownLine[l-1] {
				bad = append(bad, l)
			}
		}
		return true
	})
	return bad
}

// isTimeSleep reports whether fun is time.Sleep (the package imported under its name).
func isTimeSleep(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "time" && sel.Sel.Name == "Sleep"
}

// TestUncommentedSleeps checks the check on sources of its own.
func TestUncommentedSleeps(t *testing.T) {
	src := func(body string) []byte {
		return []byte(fmt.Sprintf("package p\n\nimport \"time\"\n\nfunc f() {\n%s\n}\n", body))
	}
	for _, c := range []struct {
		body string
		want []int
	}{
		{"\ttime.Sleep(time.Second)", []int{6}},
		{"\ttime.Sleep(time.Second) // on purpose: the lease runs out", nil},
		{"\t// on purpose: the lease runs out\n\ttime.Sleep(time.Second)", nil},
		{"\t/* on purpose */ time.Sleep(time.Second)", nil},
		{"\tx := 1 // a comment about x\n\ttime.Sleep(time.Duration(x))", []int{7}},
		{"\t// a comment\n\n\ttime.Sleep(time.Second)", []int{8}},
		{"\tgo func() { time.Sleep(time.Second) }()", []int{6}},
		{"\t_ = \"time.Sleep(time.Second)\"", nil},
		{"\tvar d time.Duration\n\t_ = d.Sleep", nil},
	} {
		if got := uncommentedSleeps(t, "p.go", src(c.body)); !slices.Equal(got, c.want) {
			t.Errorf("%q: uncommented sleeps on lines %v, want %v", c.body, got, c.want)
		}
	}
}
