package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// `weir bench failover` runs its own process cluster, kills a broker and reports; this
// keeps the command working and checks what it reports: every partition of the killed
// broker writable again, the dead WAL read (not copied: the takers' WALs grow by no more
// than the probes wrote), graceful moves measured to the first ack at the new leader, and
// every phase's figure judged against issue 22's targets.
func TestBenchFailoverCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(weirBin, "bench", "failover", "--weir", weirBin, "--partitions", "30", "--tail-mib", "8",
		"--moves", "5", "--record-size", "4096", "--json",
		"--baseline", "1s", "--stop-for", "2s", "--controller-window", "2s", "--spread-timeout", "5s")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir bench failover: %v\n%s", err, errb.String())
	}
	var r struct {
		VictimPartitions int   `json:"victim_partitions"`
		Unfinished       int   `json:"unfinished"`
		TailBytes        int64 `json:"tail_bytes"`
		DeadWALBytesRead int64 `json:"dead_wal_bytes_read"`
		TakerWALBytes    int64 `json:"taker_wal_bytes_written"`
		Moves            int   `json:"moves"`
		Unavailability   struct {
			N int `json:"n"`
		} `json:"unavailability"`
		Move struct {
			Unfinished int `json:"unfinished"`
			Pause      struct {
				N int `json:"n"`
			} `json:"pause"`
		} `json:"move"`
		Targets []struct {
			ID  int  `json:"id"`
			Ran bool `json:"ran"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("%s", out.String())
	if r.VictimPartitions == 0 || r.Unfinished != 0 || r.Unavailability.N != r.VictimPartitions {
		t.Fatalf("not every partition of the killed broker came back: %+v", r)
	}
	if r.DeadWALBytesRead < r.TailBytes {
		t.Fatalf("the takers read %d bytes of the dead WAL, its tail is %d", r.DeadWALBytesRead, r.TailBytes)
	}
	if r.TakerWALBytes > r.TailBytes/4 {
		t.Fatalf("the takers' WALs grew by %d bytes during the recovery of a %d-byte tail: data was copied", r.TakerWALBytes, r.TailBytes)
	}
	if r.Moves != 5 || r.Move.Pause.N+r.Move.Unfinished != 5 {
		t.Fatalf("moves measured: %d (pauses %d, unfinished %d)", r.Moves, r.Move.Pause.N, r.Move.Unfinished)
	}
	if len(r.Targets) != 5 {
		t.Fatalf("targets: %+v", r.Targets)
	}
	for _, tg := range r.Targets {
		if !tg.Ran {
			t.Fatalf("target %d not measured: %+v", tg.ID, r.Targets)
		}
	}
}
