// Package archtest keeps the packages' imports within the rules docs/DESIGN.md states
// in its "## Import rules" table (imports_test.go runs the check on the module).
//
// The table has one row per package of the module: the package, the Weir packages it
// may import, those its tests may import besides, and why. A package names a path
// relative to the module (`broker/kafka`); `p/*` is every package below p, test
// helpers excepted, which a list names one by one; a row whose package cell says
// "(test helper)" marks a package every package's tests may import; the row of package
// `*` lists what every package may import. Imports from outside the module are not
// restricted.
package archtest

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Heading is the heading of DESIGN.md's section whose first table holds the rules.
const Heading = "## Import rules"

// Rule is one row of the table.
type Rule struct {
	Package    string
	TestHelper bool     // any package's tests may import it
	May        []string // what the package may import: paths and p/* patterns
	TestsMay   []string // what its tests may import besides
	Line       int      // in the document, for messages
}

// Rules is the parsed table: one rule per package, and the rule of `*` (every package).
type Rules struct {
	ByPackage map[string]*Rule
	Every     *Rule
}

var backticked = regexp.MustCompile("`([^`]+)`")

// Parse reads the first table after Heading: rows of | package | may import | tests may
// also import | why |. Cells of packages are backticked; a cell without any (—, empty)
// lists nothing.
func Parse(r io.Reader) (*Rules, error) {
	rs := &Rules{ByPackage: map[string]*Rule{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line, inSection, inTable := 0, false, false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !inSection {
			inSection = text == Heading
			continue
		}
		if !strings.HasPrefix(text, "|") {
			if inTable {
				break // the table ended
			}
			if strings.HasPrefix(text, "## ") {
				break // the next section, with no table in this one
			}
			continue
		}
		if !inTable { // the header row
			inTable = true
			continue
		}
		cells := strings.Split(strings.Trim(text, "|"), "|")
		if strings.Trim(cells[0], " -:") == "" {
			continue // the separator row
		}
		if len(cells) < 4 {
			return nil, fmt.Errorf("DESIGN.md:%d: an import rule needs 4 cells (package, may import, tests may also import, why), got %d", line, len(cells))
		}
		pkgs := names(cells[0])
		if len(pkgs) != 1 {
			return nil, fmt.Errorf("DESIGN.md:%d: the package cell must name one package in backticks, got %q", line, cells[0])
		}
		rule := &Rule{Package: pkgs[0], TestHelper: strings.Contains(cells[0], "test helper"),
			May: names(cells[1]), TestsMay: names(cells[2]), Line: line}
		if rule.Package == "*" {
			if rs.Every != nil {
				return nil, fmt.Errorf("DESIGN.md:%d: a second row for `*` (the first at line %d)", line, rs.Every.Line)
			}
			rs.Every = rule
			continue
		}
		if prev := rs.ByPackage[rule.Package]; prev != nil {
			return nil, fmt.Errorf("DESIGN.md:%d: a second row for %s (the first at line %d)", line, rule.Package, prev.Line)
		}
		rs.ByPackage[rule.Package] = rule
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !inTable {
		return nil, fmt.Errorf("DESIGN.md has no table under %q", Heading)
	}
	if rs.Every == nil {
		rs.Every = &Rule{Package: "*"}
	}
	return rs, nil
}

func names(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// Package is what the check needs of a package: its path relative to the module and the
// module's packages it imports (relative too), from its own files and from its tests'.
type Package struct {
	Path        string
	Imports     []string
	TestImports []string // TestImports and XTestImports
}

// Check returns one message per violation: an import the rules do not allow, a package
// without a row, a row or a pattern that names no package.
func (rs *Rules) Check(pkgs []Package) []string {
	var errs []string
	exists := map[string]bool{}
	for _, p := range pkgs {
		exists[p.Path] = true
	}
	for _, p := range pkgs {
		rule := rs.ByPackage[p.Path]
		if rule == nil {
			errs = append(errs, fmt.Sprintf("%s has no row in DESIGN.md's import rules: add one (what it may import, and why)", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if !rs.allows(rule, imp) {
				errs = append(errs, fmt.Sprintf("%s imports %s, which DESIGN.md's import rules do not allow", p.Path, imp))
			}
		}
		for _, imp := range p.TestImports {
			if imp == p.Path || rs.allows(rule, imp) || rs.helper(imp) || rs.match(rule.TestsMay, imp) {
				continue
			}
			errs = append(errs, fmt.Sprintf("%s's tests import %s, which DESIGN.md's import rules do not allow", p.Path, imp))
		}
	}
	var stale []string
	for path, rule := range rs.ByPackage {
		if !exists[path] {
			stale = append(stale, fmt.Sprintf("DESIGN.md:%d: the import rules name %s, which is not a package any more: remove its row", rule.Line, path))
		}
	}
	for _, rule := range append(rs.rules(), rs.Every) {
		if rule != rs.Every && !exists[rule.Package] {
			continue // reported above
		}
		for _, pat := range slices.Concat(rule.May, rule.TestsMay) {
			if !slices.ContainsFunc(pkgs, func(p Package) bool { return rs.matches(pat, p.Path) }) {
				stale = append(stale, fmt.Sprintf("DESIGN.md:%d: the import rule of %s names %s, which matches no package", rule.Line, rule.Package, pat))
			}
		}
	}
	slices.Sort(stale)
	return append(errs, stale...)
}

func (rs *Rules) rules() []*Rule {
	out := make([]*Rule, 0, len(rs.ByPackage))
	for _, r := range rs.ByPackage {
		out = append(out, r)
	}
	return out
}

// allows reports whether a package of rule may import imp from its own files.
func (rs *Rules) allows(rule *Rule, imp string) bool {
	return rs.match(rule.May, imp) || rs.match(rs.Every.May, imp)
}

func (rs *Rules) match(pats []string, imp string) bool {
	return slices.ContainsFunc(pats, func(pat string) bool { return rs.matches(pat, imp) })
}

// matches: a path names itself; p/* every package below p but test helpers.
func (rs *Rules) matches(pat, path string) bool {
	if base, ok := strings.CutSuffix(pat, "/*"); ok {
		return strings.HasPrefix(path, base+"/") && !rs.helper(path)
	}
	return pat == path
}

func (rs *Rules) helper(path string) bool {
	r := rs.ByPackage[path]
	return r != nil && r.TestHelper
}
