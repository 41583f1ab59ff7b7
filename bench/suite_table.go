package bench

import (
	"fmt"
	"io"
	"strings"
)

// SuiteRow is one figure of `weir bench suite` beside the physical limit it is judged
// against: Ratio = Value / Limit (for "≤ k×" targets, lower is better; for "≥ k×"
// targets, higher is better). A row that was not measured has a Note and no Pass.
type SuiteRow struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	LimitName string  `json:"limit_name,omitempty"`
	Limit     float64 `json:"limit,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	Target    string  `json:"target,omitempty"`
	// Pass is nil when the row has no target or was not measured.
	Pass *bool  `json:"pass,omitempty"`
	Note string `json:"note,omitempty"`
}

// target kinds of a row: the targets are all "value within k× of the limit",
// "value at least k× the limit" or "value within limit + d".
type target struct {
	text  string
	check func(value, limit float64) bool
}

func atMost(k float64) target {
	return target{fmt.Sprintf("≤ %g× limit", k), func(v, l float64) bool { return v <= k*l }}
}

func atLeast(k float64) target {
	return target{fmt.Sprintf("≥ %g× limit", k), func(v, l float64) bool { return v >= k*l }}
}

func within(d float64, unit string) target {
	return target{fmt.Sprintf("≤ limit + %g %s", d, unit), func(v, l float64) bool { return v <= l+d }}
}

// row builds a measured row; t may be nil (informational).
func row(name string, value float64, unit, limitName string, limit float64, t *target) SuiteRow {
	r := SuiteRow{Name: name, Value: value, Unit: unit, LimitName: limitName, Limit: limit}
	if limit > 0 {
		r.Ratio = value / limit
	}
	if t != nil {
		r.Target = t.text
		if limit > 0 {
			ok := t.check(value, limit)
			r.Pass = &ok
		}
	}
	return r
}

// notRun is a row whose figure another command measures or that failed.
func notRun(name, note string) SuiteRow { return SuiteRow{Name: name, Note: note} }

func printSuiteTable(w io.Writer, rows []SuiteRow) {
	const f = "%-44s %12s  %-34s %12s %8s  %-18s %s\n"
	fmt.Fprintf(w, f, "figure", "value", "limit", "limit value", "ratio", "target", "")
	fmt.Fprintln(w, strings.Repeat("-", 140))
	for _, r := range rows {
		if r.Note != "" && r.Value == 0 && r.Limit == 0 {
			fmt.Fprintf(w, "%-44s %s\n", r.Name, r.Note)
			continue
		}
		mark := ""
		if r.Pass != nil {
			mark = "FAIL"
			if *r.Pass {
				mark = "pass"
			}
		}
		limit, ratio := "", ""
		if r.Limit > 0 {
			limit = num(r.Limit) + " " + r.Unit
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		fmt.Fprintf(w, f, r.Name, num(r.Value)+" "+r.Unit, r.LimitName, limit, ratio, r.Target, mark)
		if r.Note != "" {
			fmt.Fprintf(w, "%-44s   (%s)\n", "", r.Note)
		}
	}
}

func num(v float64) string {
	if v >= 1000 {
		return Commas(int64(v + 0.5))
	}
	return ms(v)
}
