package test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/test/nfsfs"
)

// The process-level failover tests again, with the shared WAL root served by test/nfsfs
// on the FSx profile: every broker process mounts it separately (its own page,
// attribute and entry caches; writes reach the other brokers only at fsync or close),
// every operation pays the modelled FSx latency, and the throughput cap is shared.
// What the plain tests prove on one ext4 directory and one page cache, these prove
// through per-host NFS-like caches.

// fsxConfig is the lab file system of a cluster: the server model, and the options
// of every broker's mount (Name is set per broker).
type fsxConfig struct {
	model *nfsfs.Model
	mount nfsfs.Options
}

// fsxLab is the FSx server of one cluster and its mounts, one per broker process.
type fsxLab struct {
	t       testing.TB
	backing string
	cfg     fsxConfig
	mu      sync.Mutex
	mounts  map[string]*nfsfs.Mount
}

func newFSxLab(t testing.TB, backing string, cfg *fsxConfig) *fsxLab {
	t.Helper()
	nfsfs.Require(t)
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fsxLab{t: t, backing: backing, cfg: *cfg, mounts: map[string]*nfsfs.Mount{}}
}

// mount returns the mount point of the process named name (mounted on first use, with
// NFS's default attribute timeouts).
func (l *fsxLab) mount(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.mounts[name]; m != nil {
		return m.Dir
	}
	o := l.cfg.mount
	o.Name = name
	m := nfsfs.MountT(l.t, filepath.Join(filepath.Dir(l.backing), "mnt-"+name), l.backing, l.cfg.model, o)
	l.mounts[name] = m
	if o.WritebackAfter > 0 {
		l.t.Cleanup(func() { l.t.Logf("%s: %d bytes reached the server by background writeback", name, m.BackgroundBytes()) })
	}
	return m.Dir
}

// fsxModel is the lab file system of the FSx variants: the FSx profile, mounts with
// NFS's default timeouts.
func fsxModel(t *testing.T) *fsxConfig {
	nfsfs.Require(t)
	m := nfsfs.NewModel(nfsfs.FSx)
	t.Cleanup(func() {
		q, n := m.CommitStats(0.5, 0.99, 0.999)
		t.Logf("FSx model: %d COMMITs, p50 %v p99 %v p99.9 %v", n, q[0].Round(time.Microsecond), q[1].Round(time.Microsecond), q[2].Round(time.Microsecond))
	})
	return &fsxConfig{model: m}
}

// SIGKILL of the coordinator on FSx (TestProcFailoverKillOne).
func TestFSxFailoverKillOne(t *testing.T) { testFailoverKillOne(t, fsxModel(t)) }

// SIGSTOP past the fence on FSx (TestProcFailoverPausedBroker).
func TestFSxFailoverPausedBroker(t *testing.T) { testFailoverPausedBroker(t, fsxModel(t)) }

// SIGSTOP past the fence on FSx with background writeback: the paused broker's data
// written and not yet fsynced reaches the server 3 s after it was written, while the
// process is stopped, after the takers sealed its WAL — as a Linux NFS client's
// writeback thread flushes a stopped process's dirty pages. A write landing after the
// seal must change nothing acked.
func TestFSxFailoverPausedBrokerLateWriteback(t *testing.T) {
	cfg := fsxModel(t)
	cfg.mount.WritebackAfter = 3 * time.Second
	testFailoverPausedBroker(t, cfg)
}

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
	cfg := fsxModel(t)
	model := cfg.model
	e := startFailoverEnv(t, "fz", 9, cfg)
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
// with each file system and zone fault but errors (TestFSxStorageErrors: a broker
// whose WAL failed stays down until restarted): a storage freeze, a slow mount, a zone
// partition (the zone's brokers cut off the controllers while the file system
// stays reachable) and a zone outage (the zone's brokers and controller SIGKILLed).
// The checker must find nothing lost, duplicated or out of place, no idempotent
// produce may fail, and every fault must have run.
func TestChaosFSxScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster for a minute")
	}
	nfsfs.Require(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(weirBin, "chaos", "--weir", weirBin, "--fsx", "fsx", "--duration", "36s", "--settle", "3s",
		"--partitions", "12", "--rate", "500", "--restart-after", "3s", "--cut-for", "4s", "--storage-for", "3s", "--slow-by", "100ms",
		"--fault", "storage-freeze@3s", "--fault", "storage-slow@9s",
		"--fault", "zone-partition:a@15s", "--fault", "zone-outage:b@23s", "--json")
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
	if len(r.Faults) != 4 {
		t.Fatalf("faults run: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			t.Fatalf("fault %s: %+v", f.Fault, f)
		}
	}
}

// TestFSxStorageErrors: WRITE and COMMIT fail with EIO (then ENOSPC) on every mount for
// 2 s under load. As on NFS, the error surfaces at fdatasync, and a WAL whose fdatasync
// failed stops for good (docs/DESIGN.md, error table): the brokers answer
// KAFKA_STORAGE_ERROR and ack nothing more. Nothing acked before may be lost, and no
// record may be acked twice at different offsets. The brokers do not recover by
// themselves (reported as a finding in docs/FSXLAB.md), so the test then restarts them
// one by one, as an operator would, and checks that produce resumes everywhere and
// every acked record reads back.
func TestFSxStorageErrors(t *testing.T) { testFSxStorageErrors(t, false) }

// TestFSxStorageErrorsReplayed: the same with the mounts re-sending failed writes at
// their next write-back (nfsfs.Options.ReplayFailedWrites, as NFS re-sends unstable
// writes after a server failover) and background writeback after 1 s: a killed
// broker's failed, never-acked WAL writes reach the server after its WAL was sealed.
func TestFSxStorageErrorsReplayed(t *testing.T) { testFSxStorageErrors(t, true) }

func testFSxStorageErrors(t *testing.T, replay bool) {
	cfg := fsxModel(t)
	if replay {
		cfg.mount.ReplayFailedWrites, cfg.mount.WritebackAfter = true, time.Second
	}
	model := cfg.model
	e := startFailoverEnv(t, "se", 9, cfg)
	all := make([]int32, e.parts)
	for i := range all {
		all[i] = int32(i)
	}
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		fault := time.Now()
		model.Fail(nfsfs.OpWrite|nfsfs.OpCommit, errno)
		time.Sleep(2 * time.Second) // on purpose: the errors last this long
		model.Clear()
		cleared := time.Now()
		time.Sleep(3 * time.Second) // on purpose: time for a recovery that does not come
		t.Logf("%v for 2 s: %d records acked in the 3 s after it cleared (records sent after it: %d partitions acked); produce failures so far %d",
			errno, e.load.ackedBetween(all, cleared, time.Now()), e.load.partitionsAckedAfter(cleared), e.load.failed.Load())
		for i := range e.pc.brokers {
			e.pc.brokers[i].kill()
			e.pc.restartBroker(t, i)
		}
		e.waitWritable(time.Now())
		t.Logf("%v: every partition acked again %v after the fault (brokers restarted)", errno, time.Since(fault).Round(time.Millisecond))
	}
	e.finish()
}

// TestFSxProduceLatencyMeasure (WEIR_FSXLAB_MEASURE=1; docs/FSXLAB.md) measures
// produce latency (send to ack, acks=all) at a fixed rate on three WAL roots in turn:
// the shared directory itself (no FUSE), the lab file system without a model (FUSE
// cost alone), and the FSx profile with its throughput cap set so that the run uses
// about half of it; beside the model's own COMMIT p50/p99 of the same run.
func TestFSxProduceLatencyMeasure(t *testing.T) {
	if os.Getenv("WEIR_FSXLAB_MEASURE") == "" {
		t.Skip("a measurement: WEIR_FSXLAB_MEASURE=1")
	}
	rate := envInt(t, "WEIR_FSXLAB_RATE", 2000)   // records/s
	size := envInt(t, "WEIR_FSXLAB_SIZE", 1024)   // bytes per record
	capMiB := envInt(t, "WEIR_FSXLAB_CAP_MIB", 0) // throughput cap of the FSx run; 0: the profile's
	dur := envDuration(t, "WEIR_FSXLAB_FOR", 20*time.Second)
	fsxProf := nfsfs.FSx
	if capMiB > 0 {
		fsxProf.Throughput = int64(capMiB) << 20
	}
	for _, run := range []struct {
		name  string
		model *nfsfs.Model
	}{{"shared directory, no FUSE", nil}, {"lab file system, no model (FUSE only)", nfsfs.NewModel(nfsfs.Local)}, {"FSx profile", nfsfs.NewModel(fsxProf)}} {
		t.Run(run.name, func(t *testing.T) {
			if run.model != nil {
				nfsfs.Require(t)
			}
			var fsx *fsxConfig
			if run.model != nil {
				fsx = &fsxConfig{model: run.model}
			}
			pc := startProcClusterWith(t, procClusterOptions{fsx: fsx})
			lat, took := measureProduce(t, pc, rate, size, dur, run.model)
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(x float64) time.Duration {
				return lat[min(len(lat)-1, int(x*float64(len(lat))))].Round(10 * time.Microsecond)
			}
			line := fmt.Sprintf("%s: %d records of %d B at %d/s for %v: produce p50 %v p99 %v p99.9 %v max %v", run.name, len(lat), size, rate, took.Round(time.Second),
				q(0.5), q(0.99), q(0.999), lat[len(lat)-1].Round(time.Millisecond))
			if m := run.model; m != nil {
				c, n := m.CommitStats(0.5, 0.99, 0.999)
				secs := took.Seconds()
				used := float64(m.Bytes(nfsfs.OpWrite)+m.Bytes(nfsfs.OpRead)) / secs / (1 << 20)
				line += fmt.Sprintf("; model COMMIT p50 %v p99 %v p99.9 %v (%d); file system throughput %.1f MiB/s (write %.1f, read %.1f)",
					c[0].Round(10*time.Microsecond), c[1].Round(10*time.Microsecond), c[2].Round(10*time.Microsecond), n, used,
					float64(m.Bytes(nfsfs.OpWrite))/secs/(1<<20), float64(m.Bytes(nfsfs.OpRead))/secs/(1<<20))
				if p := m.Profile(); p.Throughput > 0 {
					line += fmt.Sprintf(" of a %d MiB/s cap (%.0f%%)", p.Throughput>>20, 100*used/float64(p.Throughput>>20))
				}
			}
			t.Log(line)
		})
	}
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// measureProduce creates a 12-partition topic, warms up for 5 s, then produces rate
// records/s of size bytes for dur (4 producers, acks=all) and returns every record's
// send-to-ack latency. The model's statistics are reset after the warm-up.
func measureProduce(t *testing.T, pc *procCluster, rate, size int, dur time.Duration, model *nfsfs.Model) ([]time.Duration, time.Duration) {
	const producers, parts = 4, 12
	admin, err := kgo.NewClient(kgo.SeedBrokers(pc.kafka...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctxT(t, time.Minute), parts, 1, nil, "lat"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lat []time.Duration
	measuring := atomic.Bool{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Random bytes, uncompressed: what reaches the WAL is the records' size.
	noise := make([]byte, size+4096)
	crand.Read(noise)
	for w := 0; w < producers; w++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(pc.kafka...), kgo.DefaultProduceTopic("lat"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			every := time.Second * time.Duration(producers) / time.Duration(rate)
			next := time.Now()
			for ctx.Err() == nil {
				next = next.Add(every)
				time.Sleep(time.Until(next)) // on purpose: the fixed rate
				sent := time.Now()
				on := measuring.Load()
				o := int(sent.UnixNano() % 4096)
				cl.Produce(ctx, &kgo.Record{Value: noise[o : o+size]}, func(_ *kgo.Record, err error) {
					if err == nil && on {
						mu.Lock()
						lat = append(lat, time.Since(sent))
						mu.Unlock()
					}
				})
			}
			cl.Flush(context.Background())
		}()
	}
	time.Sleep(5 * time.Second) // on purpose: warm-up, not measured
	if model != nil {
		model.ResetStats()
	}
	start := time.Now()
	measuring.Store(true)
	time.Sleep(dur) // on purpose: the measured run
	measuring.Store(false)
	took := time.Since(start)
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		t.Fatal("nothing acked")
	}
	return lat, took
}
