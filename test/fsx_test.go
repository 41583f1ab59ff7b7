package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/test/nfsfs"
)

// The process-level failover tests again, with the shared WAL root served by test/nfsfs
// on the FSx profile: every broker process mounts it separately (its own page,
// attribute and entry caches; writes reach the other brokers only at fsync or close),
// every operation pays the modelled FSx latency, and the throughput cap is shared.
// What the plain tests prove on one ext4 directory and one page cache, these prove
// through per-host NFS-like caches.

// fsxLab is the FSx server of one cluster and its mounts, one per broker process.
type fsxLab struct {
	t       testing.TB
	backing string
	model   *nfsfs.Model
	mu      sync.Mutex
	mounts  map[string]*nfsfs.Mount
}

func newFSxLab(t testing.TB, backing string, model *nfsfs.Model) *fsxLab {
	t.Helper()
	nfsfs.Require(t)
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fsxLab{t: t, backing: backing, model: model, mounts: map[string]*nfsfs.Mount{}}
}

// mount returns the mount point of the process named name (mounted on first use, with
// NFS's default attribute timeouts).
func (l *fsxLab) mount(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.mounts[name]; m != nil {
		return m.Dir
	}
	m := nfsfs.MountT(l.t, filepath.Join(filepath.Dir(l.backing), "mnt-"+name), l.backing, l.model, nfsfs.Options{Name: name})
	l.mounts[name] = m
	return m.Dir
}

// fsxModel is the model of the FSx variants: the FSx profile.
func fsxModel(t *testing.T) *nfsfs.Model {
	nfsfs.Require(t)
	m := nfsfs.NewModel(nfsfs.FSx)
	t.Cleanup(func() {
		q, n := m.CommitStats(0.5, 0.99, 0.999)
		t.Logf("FSx model: %d COMMITs, p50 %v p99 %v p99.9 %v", n, q[0].Round(time.Microsecond), q[1].Round(time.Microsecond), q[2].Round(time.Microsecond))
	})
	return m
}

// SIGKILL of the coordinator on FSx (TestProcFailoverKillOne).
func TestFSxFailoverKillOne(t *testing.T) { testFailoverKillOne(t, fsxModel(t)) }

// SIGSTOP past the fence on FSx (TestProcFailoverPausedBroker).
func TestFSxFailoverPausedBroker(t *testing.T) { testFailoverPausedBroker(t, fsxModel(t)) }

// A second process with a live broker's ID, on another host (its own mount), on FSx
// (TestProcFailoverDuplicateBrokerID).
func TestFSxFailoverDuplicateBrokerID(t *testing.T) { testFailoverDuplicateBrokerID(t, fsxModel(t)) }

// envDuration is the duration in environment variable name, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// TestFSxStorageFreeze: the whole file system freezes under load (a Multi-AZ failover
// of FSx: every I/O of every broker blocks) for WEIR_FSX_FREEZE (default 5 s; docs/
// FSXLAB.md runs 30 s), then thaws. Nothing acked may be lost, no offset may have two
// values, and produce must resume on every partition; the time from the thaw to the
// first ack per partition and what the clients saw are logged.
func TestFSxStorageFreeze(t *testing.T) {
	freeze := envDuration(t, "WEIR_FSX_FREEZE", 5*time.Second)
	model := fsxModel(t)
	e := startFailoverEnv(t, "fz", 9, model)
	all := make([]int32, e.parts)
	for i := range all {
		all[i] = int32(i)
	}
	failedBefore := e.load.failed.Load()
	fault := time.Now()
	model.Freeze()
	time.Sleep(freeze) // on purpose: the freeze lasts this long
	thaw := time.Now()
	model.Thaw()
	inFlight := e.load.inFlightAcross(all, fault)
	e.waitWritable(thaw)
	e.logUnavailability("freeze", fault, nil)
	un := e.load.unavailability(thaw)
	var resume []time.Duration
	for _, d := range un {
		resume = append(resume, d)
	}
	t.Logf("storage frozen %v: from the thaw to the first ack of a record produced after it: %s", freeze, percentiles(resume))
	t.Logf("during the freeze: %d acks (sent before it), %d records handed to the producers before the freeze acked after it, %d produce failures; brokers in the controllers' view after the thaw: %+v",
		e.load.ackedBetween(all, fault.Add(time.Second), thaw), inFlight, e.load.failed.Load()-failedBefore, e.adm.View().Brokers)
	e.finish()
}

// A short `weir chaos` run on the lab file system (FSx profile, one mount per broker)
// with each file system and zone fault: a storage freeze, a slow mount, injected EIO,
// a zone partition (the zone's brokers cut off the controllers while the file system
// stays reachable) and a zone outage (the zone's brokers and controller SIGKILLed).
// The checker must find nothing lost, duplicated or out of place, no idempotent
// produce may fail, and every fault must have run.
func TestChaosFSxScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster for a minute")
	}
	nfsfs.Require(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(weirBin, "chaos", "--weir", weirBin, "--fsx", "fsx", "--duration", "56s", "--settle", "3s",
		"--partitions", "12", "--rate", "500", "--restart-after", "3s", "--cut-for", "4s", "--storage-for", "3s", "--slow-by", "100ms",
		"--fault", "storage-freeze@4s", "--fault", "storage-slow@12s", "--fault", "storage-error:EIO@20s",
		"--fault", "zone-partition:a@28s", "--fault", "zone-outage:b@38s", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("progress:\n%s", errb.String())
	var r struct {
		OK     bool `json:"ok"`
		Acked  int  `json:"acked"`
		Failed int  `json:"failed"`
		Faults []struct {
			Fault string `json:"fault"`
			Error string `json:"error"`
		} `json:"faults"`
		Check struct {
			Lost, Duplicated, Inconsistent, Gaps, Group []string
		} `json:"check"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("weir chaos: %v, report: %v\n%s", err, jerr, out.String())
	}
	t.Logf("report:\n%s", out.String())
	if err != nil || !r.OK {
		t.Fatalf("weir chaos found violations (exit %v): %+v", err, r.Check)
	}
	if r.Failed != 0 {
		t.Fatalf("%d acked, %d failed", r.Acked, r.Failed)
	}
	if len(r.Faults) != 5 {
		t.Fatalf("faults run: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			t.Fatalf("fault %s: %+v", f.Fault, f)
		}
	}
}
