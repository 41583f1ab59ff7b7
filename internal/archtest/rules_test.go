package archtest

import (
	"slices"
	"strings"
	"testing"
)

const sample = `# x

## Import rules

Some words.

| package | may import | tests may also import | why |
|---|---|---|---|
| ` + "`*`" + ` | ` + "`internal/*`" + ` | | shared |
| ` + "`low`" + ` | — | | bottom |
| ` + "`low/lowtest`" + ` (test helper) | ` + "`low`" + ` | | fakes |
| ` + "`low/sub`" + ` | ` + "`low`" + ` | | |
| ` + "`internal/x`" + ` | — | | |
| ` + "`internal/xtest`" + ` (test helper) | — | | |
| ` + "`mid`" + ` | ` + "`low`" + ` | ` + "`top`" + ` | middle |
| ` + "`top`" + ` | ` + "`mid`, `low/*`" + ` | | top |

## Next
| not | a | rule | row |
`

// TestCheck: the checker's rules on a small table: allowed and forbidden imports, test
// helpers, p/* not reaching helpers, missing rows, stale rows and patterns.
func TestCheck(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.ByPackage) != 7 || rs.ByPackage["not"] != nil || !rs.ByPackage["low/lowtest"].TestHelper {
		t.Fatalf("parsed %d rules: %+v", len(rs.ByPackage), rs.ByPackage)
	}
	pkgs := []Package{
		{Path: "low", Imports: []string{"internal/x"}, TestImports: []string{"low", "low/lowtest", "internal/xtest"}},
		{Path: "low/lowtest", Imports: []string{"low"}},
		{Path: "low/sub", Imports: []string{"low"}},
		{Path: "internal/x"},
		{Path: "internal/xtest"},
		{Path: "mid", Imports: []string{"low", "top", "internal/xtest"}, TestImports: []string{"top", "low/lowtest"}},
		{Path: "top", Imports: []string{"mid", "low/sub", "low/lowtest"}, TestImports: []string{"mid"}},
		{Path: "new"},
	}
	got := rs.Check(pkgs)
	want := []string{
		"mid imports top, which DESIGN.md's import rules do not allow",
		"mid imports internal/xtest, which DESIGN.md's import rules do not allow",
		"top imports low/lowtest, which DESIGN.md's import rules do not allow",
		"new has no row in DESIGN.md's import rules: add one (what it may import, and why)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	got = rs.Check(pkgs[:5]) // mid and top gone
	for _, w := range []string{"rules name mid, which is not a package any more", "rules name top, which is not a package any more"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != 2 {
		t.Errorf("%d messages, want 2 (a stale row's own patterns are not reported):\n%s", len(got), strings.Join(got, "\n"))
	}
	rs.ByPackage["low"].TestsMay = []string{"gone/*"}
	if got := rs.Check(pkgs); !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "rule of low names gone/*, which matches no package") }) {
		t.Errorf("a pattern matching nothing not reported:\n%s", strings.Join(got, "\n"))
	}
}

// TestParseRefuses: malformed tables are errors, not silently fewer rules.
func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"no section":  "# x\n| a | b | c | d |\n",
		"no table":    "## Import rules\n\ntext\n\n## Next\n| a | b | c | d |\n",
		"short row":   "## Import rules\n| p | m | t | w |\n|---|---|---|---|\n| `a` | — |\n",
		"two names":   "## Import rules\n| p | m | t | w |\n|---|---|---|---|\n| `a`, `b` | — | | |\n",
		"duplicate":   "## Import rules\n| p | m | t | w |\n|---|---|---|---|\n| `a` | — | | |\n| `a` | — | | |\n",
		"no backtick": "## Import rules\n| p | m | t | w |\n|---|---|---|---|\n| a | — | | |\n",
	} {
		if _, err := Parse(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
