package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

func TestParseFault(t *testing.T) {
	for spec, want := range map[string]Fault{
		"kill:2@10s":                {Kind: Kill, Broker: 2, At: 10 * time.Second},
		"pause@1m":                  {Kind: Pause, At: time.Minute},
		"kill-many:3@5s":            {Kind: KillMany, N: 3, At: 5 * time.Second},
		"kill-many@5s":              {Kind: KillMany, N: 2, At: 5 * time.Second},
		"controller-leader-kill@0s": {Kind: ControllerLeaderKill},
		"rolling-restart@90s":       {Kind: RollingRestart, At: 90 * time.Second},
		"isolate:1@2s":              {Kind: Isolate, Broker: 1, At: 2 * time.Second},
		"storage-freeze@3s":         {Kind: StorageFreeze, At: 3 * time.Second},
		"storage-slow:2@3s":         {Kind: StorageSlow, Broker: 2, At: 3 * time.Second},
		"storage-error@3s":          {Kind: StorageError, Arg: "EIO", At: 3 * time.Second},
		"storage-error:enospc@3s":   {Kind: StorageError, Arg: "ENOSPC", At: 3 * time.Second},
		"zone-outage:b@4s":          {Kind: ZoneOutage, Arg: "b", At: 4 * time.Second},
		"zone-partition@4s":         {Kind: ZonePartition, At: 4 * time.Second},
		"coordinator-move@5s":       {Kind: CoordinatorMove, At: 5 * time.Second},
		"coordinator-move:3@5s":     {Kind: CoordinatorMove, Broker: 3, At: 5 * time.Second},
		"coordinator-kill@6s":       {Kind: CoordinatorKill, At: 6 * time.Second},
		"txn-coordinator-kill@7s":   {Kind: TxnCoordinatorKill, At: 7 * time.Second},
	} {
		got, err := ParseFault(spec)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", spec, got, err, want)
		}
		if back, err := ParseFault(got.String()); err != nil || back != got {
			t.Errorf("%s does not round-trip: %q → %+v %v", spec, got.String(), back, err)
		}
	}
	for _, bad := range []string{"kill", "kill@", "kill:x@1s", "explode@1s", "rolling-restart:2@1s", "kill-many:0@1s", "storage-error:EBADF@1s", "storage-freeze:1@1s",
		"coordinator-kill:2@1s", "coordinator-move:x@1s"} {
		if _, err := ParseFault(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRandomFaultsFollowTheSeed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration, cfg.Every, cfg.Settle = 5*time.Minute, 30*time.Second, 10*time.Second
	a, err := randomFaults(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := randomFaults(cfg)
	cfg.Seed++
	c, _ := randomFaults(cfg)
	if len(a) != 10 || len(a) != len(b) {
		t.Fatalf("%d and %d faults", len(a), len(b))
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different schedules: %v vs %v", a, b)
		}
		same = same && a[i] == c[i]
		if a[i].At < cfg.Settle || a[i].At >= cfg.Duration-cfg.Settle {
			t.Fatalf("fault %v outside the settled middle of the run", a[i])
		}
	}
	if same {
		t.Fatal("another seed gave the same schedule")
	}
}

// maxGap is the outage a fault caused a partition: the longest time without an ack,
// counting from the last ack before the window.
func TestMaxGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []time.Time{at(0), at(100), at(200), at(1500), at(1600), at(5000)}
	if g := maxGap(acks, at(150), at(2000)); g != 1300*time.Millisecond {
		t.Fatalf("gap %v, want 1.3s (200 → 1500)", g)
	}
	if g := maxGap(acks, at(1550), at(3000)); g != 1400*time.Millisecond {
		t.Fatalf("gap %v, want 1.4s (1600 → the window's end)", g)
	}
	if g := maxGap(nil, at(0), at(500)); g != 500*time.Millisecond {
		t.Fatalf("no acks: %v", g)
	}
	// The group's pause counts a quiet time under way at the fault's start from the start.
	if g := longestQuiet(acks, at(1000), at(2000)); g != 500*time.Millisecond {
		t.Fatalf("quiet %v, want 500ms (the start → 1500, not 200 → 1500)", g)
	}
	if g := longestQuiet(acks, at(150), at(2000)); g != 1300*time.Millisecond {
		t.Fatalf("quiet %v, want 1.3s (200 → 1500)", g)
	}
}

func TestRandomFaultsDrawCoordinatorFaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration, cfg.Every, cfg.Settle = 10*time.Minute, 10*time.Second, 10*time.Second
	cfg.Kinds = "coordinator-move, coordinator-kill"
	fs, err := randomFaults(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[FaultKind]int{}
	for _, f := range fs {
		seen[f.Kind]++
	}
	if len(seen) != 2 || seen[CoordinatorMove] == 0 || seen[CoordinatorKill] == 0 {
		t.Fatalf("drew %v", seen)
	}
}

// The coordinator is the leader of partition FNV-32a(group) mod N of __consumer_offsets,
// as broker/offsets_topic.go computes it.
func TestCoordinatorPartition(t *testing.T) {
	// FNV-1a, 32 bits, from its definition (offset basis, then xor and multiply by the prime).
	h := uint32(2166136261)
	for _, c := range []byte("chaos-chaos") {
		h ^= uint32(c)
		h *= 16777619
	}
	for _, n := range []int{1, 16, 50} {
		if got, want := coordinatorPartition("chaos-chaos", n), int32(h%uint32(n)); got != want {
			t.Fatalf("%d partitions: %d, want %d", n, got, want)
		}
	}
	cfg := DefaultConfig()
	if cfg.group() != "chaos-chaos" {
		t.Fatalf("group %q", cfg.group())
	}
}

// The group's pause per fault is the longest time between reads in the fault's window,
// to the millisecond; its rebalances are the new generations members were assigned in
// the window (plus one left unfinished); the baseline is the gaps outside faults.
func TestGroupPauseAndRebalances(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cfg := DefaultConfig()
	cfg.Members, cfg.Settle, cfg.Rate, cfg.Partitions = 3, 2*time.Second, 1000, 4
	l := &load{cfg: cfg, start: t0, acks: map[int32][]time.Time{}}
	for ms := 0; ms <= 30000; ms += 10 {
		switch {
		case ms > 5000 && ms < 5050: // a 50 ms gap in the baseline
		case ms > 10100 && ms < 10440: // fault A: 340 ms
		case ms > 24000 && ms < 25500: // fault B: 1.5 s
		default:
			l.groupReads = append(l.groupReads, at(ms))
		}
	}
	// Members stamp reads before taking the lock: analyze must not rely on their order.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(l.groupReads), func(i, j int) {
		l.groupReads[i], l.groupReads[j] = l.groupReads[j], l.groupReads[i]
	})
	ev := func(ms, m int, kind string, n int, gen int32, first bool) groupEvent {
		return groupEvent{At: at(ms), Member: m, Kind: kind, Partitions: n, Generation: gen, First: first}
	}
	l.groupEvents = []groupEvent{
		// Start-up: member 0 joins (gen 1), member 1 joins (gen 2): not in a fault.
		ev(500, 0, "assigned", 4, 1, true), ev(600, 0, "revoked", 2, 1, false),
		ev(650, 1, "assigned", 2, 2, true), ev(640, 0, "assigned", 0, 2, false),
		// Fault A: one rebalance (gen 3), seen by both members; member 1 gets nothing new.
		ev(10100, 0, "revoked", 1, 2, false), ev(10400, 0, "assigned", 0, 3, false), ev(10410, 1, "assigned", 1, 3, false),
		// Fault B: member 1 fenced (lost), a rebalance to gen 4, then a revoke the window
		// ends in: two.
		ev(24000, 1, "lost", 3, 3, false), ev(25000, 1, "assigned", 3, 4, false), ev(25010, 0, "assigned", 0, 4, false),
		ev(29000, 0, "revoked", 1, 4, false),
	}
	events := []Event{
		{Fault: Fault{Kind: Pause, At: 10 * time.Second}, Start: at(10000), End: at(11000)},
		{Fault: Fault{Kind: Kill, At: 22 * time.Second}, Start: at(22000), End: at(23000), Brokers: []int32{2}},
	}
	r := analyze(cfg, l, &watcher{}, events, at(30000))
	if len(r.Faults) != 2 {
		t.Fatalf("faults: %+v", r.Faults)
	}
	a, b := r.Faults[0], r.Faults[1]
	if time.Duration(a.GroupPause) != 340*time.Millisecond || time.Duration(b.GroupPause) != 1500*time.Millisecond {
		t.Fatalf("pauses %v and %v, want 340ms and 1.5s", a.GroupPause, b.GroupPause)
	}
	if a.GroupRebalances != 1 || b.GroupRebalances != 2 {
		t.Fatalf("rebalances %d and %d, want 1 and 2", a.GroupRebalances, b.GroupRebalances)
	}
	if a.GroupGenerationBefore != 2 || a.GroupGenerationAfter != 3 || b.GroupGenerationBefore != 3 || b.GroupGenerationAfter != 4 {
		t.Fatalf("generations %d→%d and %d→%d, want 2→3 and 3→4", a.GroupGenerationBefore, a.GroupGenerationAfter, b.GroupGenerationBefore, b.GroupGenerationAfter)
	}
	if len(a.GroupEvents) != 3 || len(b.GroupEvents) != 4 || time.Duration(a.GroupEvents[0].At) != 10100*time.Millisecond {
		t.Fatalf("events %+v and %+v", a.GroupEvents, b.GroupEvents)
	}
	// Baseline: from the settle (2 s) to a second before fault A (9 s); fault A's
	// window runs to 21 s and fault B's covers the rest.
	bg := r.BaselineGroupGap
	if time.Duration(bg.P50) != 10*time.Millisecond || time.Duration(bg.Max) != 50*time.Millisecond || bg.N != 696 {
		t.Fatalf("baseline gap %+v, want p50 10ms, max 50ms over 696 gaps", bg)
	}
	var out bytes.Buffer
	r.WriteText(&out)
	if !strings.Contains(out.String(), "consumer group paused 340ms, 1 rebalances (generation 2 → 3)") {
		t.Fatalf("text:\n%s", out.String())
	}
	// No group: nothing measured.
	cfg.Members = 0
	if r := analyze(cfg, l, &watcher{}, events, at(30000)); r.Faults[0].GroupPause != 0 || r.Faults[0].GroupRebalances != 0 {
		t.Fatalf("without a group: %+v", r.Faults[0])
	}
}

// A short scenario on an own 6-process cluster: the group's coordinator moved gracefully,
// then killed. Each fault must run, the report must carry the group's figures per fault
// (to the millisecond), the group must not rebalance (the new coordinator resumes it from
// its records) and the checker must find nothing. The pause is printed, not asserted:
// timing belongs in benchmarks.
func TestCoordinatorFaultsScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 6-process cluster for half a minute")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/weir").CombinedOutput(); err != nil {
		t.Fatalf("building weir: %v\n%s", err, out)
	}
	cfg := DefaultConfig()
	cfg.Bin, cfg.Duration, cfg.Settle, cfg.Partitions, cfg.Rate = bin, 30*time.Second, 3*time.Second, 12, 500
	cfg.RestartAfter, cfg.RackReaders = 2*time.Second, false
	cfg.Dir = t.TempDir() // kept until the end of the test: a failure prints the brokers' group lines
	// The controllers' balancer would move the offsets partition back (seen within 8 s):
	// one move per fault.
	cfg.controllerArgs = []string{"--balance=false"}
	// The group reads some 7 s after the load starts (the offsets topic is created and
	// the members join): the faults come after.
	for _, spec := range []string{"coordinator-move@12s", "coordinator-kill@20s"} {
		f, err := ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out testutil.Buffer // the progress lines and the tool's log, written from several goroutines
	r, err := Run(ctx, cfg, &out, slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Logf("progress:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	if !r.OK {
		t.Fatalf("violations: %+v", r.Check)
	}
	if len(r.Faults) != 2 {
		t.Fatalf("faults: %+v", r.Faults)
	}
	// Issue 22's figures beside their targets: the kill's first ack (1) and the time to
	// leaders spread again after the killed broker returned (5; the balancer is off
	// here: not spread, with a note); in the text as in the JSON. (The move is of an
	// offsets partition, which the load does not write: no write wait, no target 3.)
	rows := map[int]TargetResult{}
	for _, x := range r.Targets {
		rows[x.Target] = x
	}
	if x, ok := rows[1]; !ok || !strings.HasPrefix(x.Fault, "coordinator-kill") || x.Figure <= 0 || x.Limit != Dur(time.Second) {
		t.Errorf("target 1: %+v in %+v", x, r.Targets)
	}
	if x, ok := rows[3]; ok {
		t.Errorf("target 3 without a moved partition of the load: %+v", x)
	}
	if x, ok := rows[5]; !ok || x.Pass || x.Note == "" {
		t.Errorf("target 5 with the balancer off: %+v in %+v", x, r.Targets)
	}
	if !strings.Contains(text.String(), "issue 22 targets") {
		t.Errorf("the text report has no targets")
	}
	move, kill := r.Faults[0], r.Faults[1]
	if !strings.HasPrefix(move.Fault, "coordinator-move") || move.Error != "" || len(move.Brokers) != 2 || move.Note == "" {
		t.Fatalf("coordinator-move: %+v", move)
	}
	if !strings.HasPrefix(kill.Fault, "coordinator-kill") || kill.Error != "" || len(kill.Brokers) != 1 {
		t.Fatalf("coordinator-kill: %+v", kill)
	}
	// Not asserted: whether the broker killed is the one the move went to
	// (FindCoordinator may lag).
	t.Logf("coordinator-move: %s; coordinator-kill hit broker %d: %s", move.Note, kill.Brokers[0], kill.Note)
	for _, f := range r.Faults {
		t.Logf("%s: group paused %v, %d rebalances (generation %d → %d); baseline gap between group reads %v; members' callbacks %+v",
			f.Fault, f.GroupPause, f.GroupRebalances, f.GroupGenerationBefore, f.GroupGenerationAfter, r.BaselineGroupGap, f.GroupEvents)
		if f.GroupPause <= 0 {
			t.Errorf("%s: no group pause measured", f.Fault)
		}
		// The new coordinator resumes the group from its records (issue 21): a move or a
		// failover of the coordinator is no rebalance. (The pause is timing: printed.)
		if f.GroupRebalances != 0 || f.GroupGenerationBefore != f.GroupGenerationAfter {
			t.Errorf("%s: the group rebalanced: %d rebalances, generation %d → %d, callbacks %+v",
				f.Fault, f.GroupRebalances, f.GroupGenerationBefore, f.GroupGenerationAfter, f.GroupEvents)
		}
	}
	if t.Failed() {
		for _, name := range []string{"broker-1", "broker-2", "broker-3"} {
			b, _ := os.ReadFile(filepath.Join(cfg.Dir, name+".log"))
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "group") || strings.Contains(l, "coordinator") || strings.Contains(l, "fenced") || strings.Contains(l, "recover") {
					lines = append(lines, l)
				}
			}
			t.Logf("%s.log, lines about groups, fences and recoveries (last 40):\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	// Millisecond resolution: the gaps between reads outside faults are a few ms (whole
	// seconds without a read could only say 0).
	if r.BaselineGroupGap.N == 0 || time.Duration(r.BaselineGroupGap.P50) >= time.Second {
		t.Errorf("baseline gap between group reads %v", r.BaselineGroupGap)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Faults []map[string]json.RawMessage `json:"faults"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, f := range back.Faults {
		var pause string
		if err := json.Unmarshal(f["group_pause"], &pause); err != nil {
			t.Fatalf("group_pause %s: %v", f["group_pause"], err)
		}
		if d, err := time.ParseDuration(pause); err != nil || d <= 0 {
			t.Errorf("group_pause %q", pause)
		}
		if _, ok := f["group_rebalances"]; !ok {
			t.Errorf("no group_rebalances in %s", f["fault"])
		}
	}
}
