package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// A short `weir chaos` scenario (a kill, a pause past fencing, a rolling restart with
// draining) on its own 6-process cluster: the checker must find nothing, no idempotent
// produce may fail, and each fault must have run and been measured.
func TestChaosShortScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster for a minute")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(weirBin, "chaos", "--weir", weirBin, "--duration", "42s", "--settle", "3s",
		"--partitions", "30", "--rate", "1000", "--restart-after", "2s", "--pause-for", "3s",
		"--fault", "kill@4s", "--fault", "pause@12s", "--fault", "rolling-restart@20s", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("progress:\n%s", errb.String())
	var r struct {
		OK     bool `json:"ok"`
		Acked  int  `json:"acked"`
		Failed int  `json:"failed"`
		Faults []struct {
			Fault    string `json:"fault"`
			Error    string `json:"error"`
			Affected int    `json:"affected_partitions"`
			Unavail  struct {
				N int `json:"n"`
			} `json:"unavailability"`
		} `json:"faults"`
		Check struct {
			Lost, Duplicated, Inconsistent, Gaps, Group []string
		} `json:"check"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("weir chaos: %v, report: %v\n%s", err, jerr, out.String())
	}
	if err != nil || !r.OK {
		t.Fatalf("weir chaos found violations (exit %v): %+v", err, r.Check)
	}
	if r.Acked < 20000 || r.Failed != 0 {
		t.Fatalf("%d acked, %d failed", r.Acked, r.Failed)
	}
	if len(r.Faults) != 3 {
		t.Fatalf("faults run: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" || f.Affected == 0 || f.Unavail.N == 0 {
			t.Fatalf("fault %s: %+v", f.Fault, f)
		}
	}
}
