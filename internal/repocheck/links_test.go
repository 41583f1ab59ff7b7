package repocheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/weir-io/weir/internal/testutil"
)

var (
	// mdLink is an inline Markdown link or image: [text](target) or ![alt](target).
	mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	// docsMention is a docs/ page named in prose or code spans, e.g. "docs/PERFORMANCE.md has the tables".
	docsMention = regexp.MustCompile(`\bdocs/[A-Za-z0-9_-]+\.md\b`)
	// headingLink is a link inside a heading, rendered as its text.
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// TestMarkdownLinks checks every relative link of the Markdown documents (README.md,
// docs/, the rest of the tree): the file exists and, for a #fragment, the target page has
// that heading. Pages moved between documents leave no dead links behind; the same for
// docs/X.md named in prose.
func TestMarkdownLinks(t *testing.T) {
	root := testutil.ModuleRoot(t)
	anchors := map[string]map[string]bool{} // file -> heading slugs, read on demand
	slugsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingSlugs(string(data))
		anchors[path] = a
		return a
	}
	n := 0
	walkFiles(t, root, ".md", func(rel string, data []byte) {
		page := filepath.Join(root, filepath.FromSlash(rel))
		for i, line := range proseLines(string(data)) {
			where := fmt.Sprintf("%s:%d", rel, i+1)
			for _, m := range docsMention.FindAllString(line, -1) {
				n++
				if _, err := os.Stat(filepath.Join(root, m)); err != nil {
					t.Errorf("%s: names %s, which does not exist", where, m)
				}
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: link %s: no such file", where, target)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !slugsOf(dest)[frag] {
					t.Errorf("%s: link %s: no heading with that anchor in %s", where, target, filepath.Base(dest))
				}
			}
		}
	})
	if n == 0 {
		t.Fatal("no links found: is the parser still right?")
	}
}

// proseLines returns the document's lines with fenced code blocks blanked, so that line
// numbers stay right and shell comments are not read as headings or links.
func proseLines(doc string) []string {
	lines := strings.Split(doc, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headingSlugs returns the anchors GitHub gives the document's headings: the text
// lower-cased, punctuation dropped, each space a hyphen; a repeated anchor gets -1, -2, ….
func headingSlugs(doc string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(doc) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		text = headingLink.ReplaceAllString(text, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if k := seen[slug]; k > 0 {
			slugs[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			slugs[slug] = true
		}
		seen[slug]++
	}
	return slugs
}
