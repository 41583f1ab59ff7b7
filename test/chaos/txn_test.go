package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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
		{2, 0}: {outcome: txnExpired, err: "PRODUCER_FENCED"},           // aborted past its timeout
	}
	good := all(0, 0, 1)
	for v, c := range all(0, 2, 1) {
		good[v] = c
	}
	r := checkTxns(txns, k, good)
	if r.Violations != 0 || r.Committed != 1 || r.Aborted != 1 || r.Unknown != 3 || r.Expired != 1 || r.Read != 6 || len(r.Errors) != 2 {
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
		"expired but visible":         {func(m map[string]int) { m[txnValue(2, 0, 0)] = 1 }, "writer 2 txn 0 (expired), aborted by the coordinator past its timeout"},
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

// The consume-transform-produce checker: below the committed offset exactly once in
// the output, at or above it absent, the committed offset at the input's end, nothing
// foreign.
func TestCheckCTP(t *testing.T) {
	in := map[int32][]ctpInput{0: {{0, "in-0"}, {1, "in-2"}}, 1: {{0, "in-1"}, {1, "in-3"}, {2, "in-4"}}}
	good := func() (map[int32]int64, map[string]int) {
		return map[int32]int64{0: 2, 1: 3}, map[string]int{"0/0:in-0": 1, "0/1:in-2": 1, "1/0:in-1": 1, "1/1:in-3": 1, "1/2:in-4": 1}
	}
	c, out := good()
	if r := checkCTP(in, c, out); r.Violations != 0 || r.Input != 5 || r.Output != 5 || r.Committed != 5 {
		t.Fatalf("good: %s", r)
	}
	for name, tc := range map[string]struct {
		change func(map[int32]int64, map[string]int)
		want   string
	}{
		"output lost":                {func(_ map[int32]int64, o map[string]int) { delete(o, "1/1:in-3") }, "1/1 (in-3) below the committed offset 3 but not in the output"},
		"output twice":               {func(_ map[int32]int64, o map[string]int) { o["0/0:in-0"] = 2 }, "in the output 2 times"},
		"offsets behind output":      {func(c map[int32]int64, _ map[string]int) { c[0] = 1 }, "0/1 (in-2) in the output but at or above the committed offset 1"},
		"offsets ahead, not drained": {func(c map[int32]int64, o map[string]int) { c[1] = 2; delete(o, "1/2:in-4") }, "committed offset 2 short of the end 3"},
		"foreign output":             {func(_ map[int32]int64, o map[string]int) { o["0/0:in-9"] = 1 }, "no such input record"},
		"unreadable output":          {func(_ map[int32]int64, o map[string]int) { o["junk"] = 1 }, "not an output value"},
	} {
		c, out := good()
		tc.change(c, out)
		// Offsets behind the output are also short of the end: a violation or two.
		if r := checkCTP(in, c, out); r.Violations < 1 || !strings.Contains(r.String(), tc.want) {
			t.Errorf("%s: %s, want a violation with %q", name, r, tc.want)
		}
	}
}

// runTxnScenario runs the transactional mode on an own 6-process cluster (12
// partitions, a light load) with the given faults for d, and checks what every
// transactional scenario must show: no violation of the read_committed check nor of
// the consume-transform-produce one, transactions committed and aborted on purpose,
// the input all processed, every fault run without an error.
func runTxnScenario(t *testing.T, d time.Duration, faults ...string) (*Report, string) {
	t.Helper()
	r, text := runModeScenario(t, d, func(c *Config) { c.Txn = true }, faults...)
	if r.Txn == nil || r.Txn.CTP == nil {
		t.Fatal("no transaction report")
	}
	if !r.OK || !r.Txn.OK() {
		t.Fatalf("violations: %s, check %s", r.Txn, r.Check.String())
	}
	if r.Txn.Committed < 1 || r.Txn.Aborted < 1 || r.Txn.Read < r.Txn.Committed*DefaultConfig().TxnRecords {
		t.Fatalf("transactions: %+v", r.Txn)
	}
	if c := r.Txn.CTP; c.Input < 100 || c.Output != c.Input || c.Committed != int64(c.Input) || c.Commits < 1 {
		t.Fatalf("consume-transform-produce: %s", c)
	}
	return r, text
}

// TestChaosTxnScenario: one broker kill while writers commit and abort on purpose and
// the consume-transform-produce writer runs; the report (text and JSON) counts them.
func TestChaosTxnScenario(t *testing.T) {
	r, text := runTxnScenario(t, 16*time.Second, "kill@6s")
	if !strings.Contains(text, "aborted on purpose") || !strings.Contains(text, "consume-transform-produce") {
		t.Errorf("the text report has no transaction lines")
	}
	b, _ := json.Marshal(r)
	var back struct {
		Txn map[string]json.RawMessage `json:"txn"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Txn["committed"] == nil || back.Txn["violations"] == nil || back.Txn["ctp"] == nil {
		t.Fatalf("JSON txn: %s %v", back.Txn, err)
	}
}

// TestChaosTxnCoordinatorKill: the broker coordinating the first writer's transactional
// id is killed while it commits (the writers commit back to back).
func TestChaosTxnCoordinatorKill(t *testing.T) {
	r, _ := runTxnScenario(t, 14*time.Second, "txn-coordinator-kill@5s")
	if !strings.Contains(r.Faults[0].Note, "FindCoordinator named broker") || !strings.Contains(r.Faults[0].Note, "first transaction ended") || len(r.Faults[0].Brokers) != 1 {
		t.Fatalf("fault: %+v", r.Faults[0])
	}
}

// TestChaosTxnLeaderKill: the leader of a partition of an open transaction (added and
// produced to) is killed before the commit; the commit goes through the failover.
func TestChaosTxnLeaderKill(t *testing.T) {
	r, _ := runTxnScenario(t, 14*time.Second, "txn-leader-kill@5s")
	if note := r.Faults[0].Note; !strings.Contains(note, "commit asked at once: committed") || r.Txn.Writers != DefaultConfig().TxnWriters+1 {
		t.Fatalf("fault: %+v; transactions %s", r.Faults[0], r.Txn)
	}
}

// TestChaosTxnProducerPause: a writer stops mid-transaction past its timeout; the
// coordinator aborts it, the commit fails, its records are never read, and the
// writer's next transactions commit.
func TestChaosTxnProducerPause(t *testing.T) {
	r, _ := runTxnScenario(t, 14*time.Second, "txn-producer-pause@3s")
	if r.Txn.Expired != 1 || !strings.Contains(r.Faults[0].Note, "the commit then failed") {
		t.Fatalf("fault: %+v; transactions %s", r.Faults[0], r.Txn)
	}
}
