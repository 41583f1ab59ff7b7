package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// `weir bench suite` orchestrates the other bench modes against processes it starts;
// this keeps it working end to end in a short run: every row it measured has a value and
// its limit, the broker's own Produce p99 was read from the broker's histogram (its
// native buckets), the
// end-to-end row and the cost rows (PUTs per GB, WAL held, file-system reads) came
// from the 3+3 process cluster, and the rows other commands measure
// say which command (here: a scale command that does not exist) instead of a number.
func TestBenchSuiteCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a standalone broker and a 6-process cluster")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(weirBin, "bench", "suite", "--weir", weirBin, "--warmup", "1s", "--duration", "3s",
		"--skip", "cold", "--scale-cmd", "{weir} bench no-such-scale-bench", "--e2e-rate", "2000", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir bench suite: %v\n%s", err, errb.String())
	}
	t.Logf("%s", errb.String())
	var r struct {
		Rows []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Limit float64 `json:"limit"`
			Ratio float64 `json:"ratio"`
			Pass  *bool   `json:"pass"`
			Note  string  `json:"note"`
		} `json:"rows"`
		FixedRate float64 `json:"fixed_rate_records_per_s"`
		Machine   struct {
			CPUs int `json:"cpus"`
		} `json:"machine"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if r.FixedRate <= 0 || r.Machine.CPUs <= 0 {
		t.Fatalf("no fixed rate or machine: %s", out.String())
	}
	seen := map[string]bool{}
	for _, row := range r.Rows {
		t.Logf("%-45s %10.3f / %10.3f = %.2f %s", row.Name, row.Value, row.Limit, row.Ratio, row.Note)
		switch {
		case strings.HasPrefix(row.Name, "scale"):
			if !strings.Contains(row.Note, "no-such-scale-bench") || row.Pass != nil {
				t.Errorf("scale row should name its command and have no mark: %+v", row)
			}
		case strings.HasPrefix(row.Name, "S3 PUTs") && row.Value == 0:
			// A 3 s window may hold no upload (one per broker per 10 s at this rate):
			// then the row says so rather than claiming 0 PUTs per GB.
			if !strings.Contains(row.Note, "no PUT in the") || row.Pass != nil {
				t.Errorf("a PUTs row without PUTs should say why and have no mark: %+v", row)
			}
		case row.Value <= 0 || row.Limit <= 0 || row.Ratio <= 0:
			t.Errorf("row without a measurement: %+v", row)
		case strings.HasPrefix(row.Name, "broker Produce") && !strings.Contains(row.Note, "native"):
			// The broker's request histogram has native (narrow) buckets for this.
			t.Errorf("broker p99 not from native buckets: %+v", row)
		}
		seen[strings.Fields(row.Name)[0]+" "+strings.Fields(row.Name)[1]] = true
	}
	for _, want := range []string{"throughput per", "produce ack", "broker Produce", "e2e p99", "scale: 10,000", "S3 PUTs", "WAL held,", "WAL file-system"} {
		if !seen[want] {
			t.Errorf("no %q row in %v", want, seen)
		}
	}
}
