package chaos

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// The read_committed checker: committed transactions all there once, aborted ones and
// ones never asked to commit absent, unknown ones all or nothing, nothing foreign.
func TestCheckTxns(t *testing.T) {
	const k = 3
	all := func(w, n int, times int) map[string]int {
		m := map[string]int{}
		for r := 0; r < k; r++ {
			m[txnValue(w, n, r)] = times
		}
		return m
	}
	txns := map[txnKey]*txnState{
		{0, 0}: {outcome: txnCommitted, commitSent: true},
		{0, 1}: {outcome: txnAborted},
		{0, 2}: {outcome: txnUnknown, commitSent: true, err: "timeout"}, // committed after all
		{1, 0}: {outcome: txnUnknown, commitSent: true},                 // aborted after all
		{1, 1}: {outcome: txnUnknown, err: "produce failed"},            // never asked to commit
	}
	good := all(0, 0, 1)
	for v, c := range all(0, 2, 1) {
		good[v] = c
	}
	r := checkTxns(txns, k, good)
	if r.Violations != 0 || r.Committed != 1 || r.Aborted != 1 || r.Unknown != 3 || r.Read != 6 || len(r.Errors) != 2 {
		t.Fatalf("good log: %+v", r)
	}
	for name, tc := range map[string]struct {
		change func(map[string]int)
		want   string
	}{
		"committed record lost":       {func(m map[string]int) { delete(m, txnValue(0, 0, 1)) }, "writer 0 txn 0 (committed): 2 of its 3"},
		"committed record twice":      {func(m map[string]int) { m[txnValue(0, 0, 2)] = 2 }, "more than once"},
		"aborted record visible":      {func(m map[string]int) { m[txnValue(0, 1, 0)] = 1 }, "writer 0 txn 1 (aborted), never asked to commit"},
		"unknown half there":          {func(m map[string]int) { delete(m, txnValue(0, 2, 0)) }, "not atomic"},
		"never committed but visible": {func(m map[string]int) { m[txnValue(1, 1, 2)] = 1 }, "writer 1 txn 1 (unknown), never asked to commit"},
		"foreign record":              {func(m map[string]int) { m["txn-7-0-0"] = 1 }, "no transaction wrote it"},
	} {
		m := map[string]int{}
		for v, c := range good {
			m[v] = c
		}
		tc.change(m)
		r := checkTxns(txns, k, m)
		if r.Violations != 1 || !strings.Contains(r.Examples[0], tc.want) {
			t.Errorf("%s: %+v, want one violation with %q", name, r, tc.want)
		}
	}
	if v, rec, ok := parseTxnValue(txnValue(12, 345, 6)); !ok || v != (txnKey{12, 345}) || rec != 6 {
		t.Fatalf("parse: %v %d %v", v, rec, ok)
	}
}

// TestChaosTxnScenario: the transactional mode on an own 6-process cluster with one
// broker kill: writers commit and abort on purpose while it happens, and the
// read_committed check finds no violation; the report (text and JSON) counts them.
func TestChaosTxnScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster for 20 s")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/weir").CombinedOutput(); err != nil {
		t.Fatalf("building weir: %v\n%s", err, out)
	}
	cfg := DefaultConfig()
	cfg.Bin, cfg.Duration, cfg.Settle, cfg.Partitions, cfg.Rate = bin, 16*time.Second, 3*time.Second, 12, 300
	cfg.RestartAfter, cfg.RackReaders, cfg.Members = 2*time.Second, false, 0
	cfg.Txn = true
	cfg.Dir = t.TempDir()
	f, err := ParseFault("kill@6s")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults = []Fault{f}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out testutil.Buffer
	r, err := Run(ctx, cfg, &out, slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Logf("progress:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	r.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	if r.Txn == nil {
		t.Fatal("no transaction report")
	}
	if !r.OK || r.Txn.Violations != 0 {
		t.Fatalf("violations: %+v, check %s", r.Txn, r.Check.String())
	}
	if r.Txn.Committed < 1 || r.Txn.Aborted < 1 || r.Txn.Read < r.Txn.Committed*cfg.TxnRecords {
		t.Fatalf("transactions: %+v", r.Txn)
	}
	if len(r.Faults) != 1 || r.Faults[0].Error != "" {
		t.Fatalf("faults: %+v", r.Faults)
	}
	if !strings.Contains(text.String(), "aborted on purpose") {
		t.Errorf("the text report has no transaction line")
	}
	b, _ := json.Marshal(r)
	var back struct {
		Txn map[string]json.RawMessage `json:"txn"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Txn["committed"] == nil || back.Txn["violations"] == nil {
		t.Fatalf("JSON txn: %s %v", back.Txn, err)
	}
}
