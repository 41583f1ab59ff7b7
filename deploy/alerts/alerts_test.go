// Package alerts holds deploy/alerts' tests: weir-alerts.yaml parsed by Prometheus's own
// rule parser, every metric it names checked against the metric names Weir's Go sources
// register, every alert given a runbook row in docs/OPERATIONS.md and a dashboard panel.
package alerts

import (
	"encoding/json"
	"go/scanner"
	"go/token"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const rulesFile = "weir-alerts.yaml"

// promql is the parser Prometheus's rule loader uses by default.
var promQL = parser.NewParser(parser.Options{})

// notWeir are series Prometheus itself makes.
var notWeir = map[string]bool{"up": true, "ALERTS": true, "ALERTS_FOR_STATE": true}

func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.LegacyValidation, promQL, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

// selectors lists the metric names an expression's vector selectors name.
func selectors(t *testing.T, expr string) []string {
	t.Helper()
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names
}

// weirMetricNames scans the Go sources of the main module (tests and deploy/ excluded)
// for the metric names they register: string literals weir_..., and prefix literals
// ("weir_tier_") joined with the other literals of the same file ("upload_lag_seconds"),
// as broker/tier and objectstore/objread build theirs.
func weirMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	root := filepath.Join("..", "..")
	full := regexp.MustCompile(`^weir_[a-z0-9_]*[a-z0-9]$`)
	word := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if b := d.Name(); path != root && (b == "deploy" || b == "testdata" || strings.HasPrefix(b, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var lits, prefixes []string
		var s scanner.Scanner
		fset := token.NewFileSet()
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.STRING {
				continue
			}
			v, err := strconv.Unquote(lit)
			if err != nil {
				continue
			}
			switch {
			case full.MatchString(v):
				names[v] = true
			case strings.HasPrefix(v, "weir_") && strings.HasSuffix(v, "_"):
				prefixes = append(prefixes, v)
			case word.MatchString(v):
				lits = append(lits, v)
			}
		}
		for _, p := range prefixes {
			for _, l := range lits {
				names[p+l] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !names["weir_broker_requests_total"] || !names["weir_tier_upload_lag_seconds"] {
		t.Fatalf("the source scan found %d names, not the known ones", len(names))
	}
	return names
}

// known: a registered name, or a histogram's series of one.
func known(names map[string]bool, n string) bool {
	for _, suf := range []string{"", "_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(n, suf); ok && names[b] {
			return true
		}
	}
	return false
}

func TestRulesParseAndNameRealMetrics(t *testing.T) {
	groups := loadRules(t)
	names := weirMetricNames(t)
	records := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			for _, n := range selectors(t, r.Expr) {
				if !known(names, n) && !records[n] && !notWeir[n] {
					t.Errorf("%s%s: %s is no metric Weir registers", r.Alert, r.Record, n)
				}
			}
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if want := "docs/OPERATIONS.md#" + strings.ToLower(r.Alert); r.Annotations["runbook"] != want {
				t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
			}
		}
	}
	// What the issue asks alerts for, by the metric each must watch.
	for _, m := range []string{"weir_controller_raft_state", "weir_controller_brokers", "weir_controller_partitions_leaderless",
		"weir_tier_wal_held_bytes", "weir_tier_upload_lag_seconds", "weir_objectstore_requests_total",
		"weir_traffic_bytes_total", "weir_broker_consumer_group_lag"} {
		if !alertWatches(t, groups, m) {
			t.Errorf("no alert watches %s", m)
		}
	}
	if alerts < 8 {
		t.Errorf("%d alerts", alerts)
	}
}

// alertWatches: an alert's expression names m, directly or through a recording rule.
func alertWatches(t *testing.T, groups *rulefmt.RuleGroups, m string) bool {
	exprOf := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				exprOf[r.Record] = r.Expr
			}
		}
	}
	var names func(expr string, depth int) []string
	names = func(expr string, depth int) []string {
		var out []string
		for _, n := range selectors(t, expr) {
			out = append(out, n)
			if e, ok := exprOf[n]; ok && depth < 3 {
				out = append(out, names(e, depth+1)...)
			}
		}
		return out
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			for _, n := range names(r.Expr, 0) {
				if n == m {
					return true
				}
			}
		}
	}
	return false
}

// TestEveryAlertHasARunbook: docs/OPERATIONS.md has a heading per alert (its anchor is
// the runbook annotation), saying what it means and what to do.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "#### "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !headings[r.Alert] {
				t.Errorf("docs/OPERATIONS.md has no heading \"#### %s\"", r.Alert)
			}
		}
	}
}

// TestDashboardShowsAlerts: deploy/grafana's dashboard has a panel querying each metric
// the alerts watch, and its new panels name only real metrics too.
func TestDashboardShowsAlerts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "grafana", "weir-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	names := weirMetricNames(t)
	groups := loadRules(t)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				names[r.Record] = true
			}
		}
	}
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			// Grafana's variables are not PromQL: give them values first.
			e := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$node", "x", "$group", "x").Replace(tg.Expr)
			for _, n := range selectors(t, e) {
				queried[n] = true
				if !known(names, n) && !notWeir[n] && !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
					t.Errorf("panel %q: %s is no metric Weir registers", p.Title, n)
				}
			}
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			for _, n := range selectors(t, r.Expr) {
				if strings.HasPrefix(n, "weir_") && !queried[n] {
					t.Errorf("alert %s watches %s, which no dashboard panel shows", r.Alert, n)
				}
			}
		}
	}
	if !queried["ALERTS"] {
		t.Errorf("no dashboard panel lists the firing alerts (ALERTS)")
	}
}
