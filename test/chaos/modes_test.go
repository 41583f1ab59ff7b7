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

// The compacted topic's checker: each key's last record its latest acked version (or a
// later one sent) at its acked offset, versions and offsets increasing, nothing unsent.
func TestCheckCompacted(t *testing.T) {
	acked := func(p int32, o int64) compactedSent { return compactedSent{acked: true, partition: p, offset: o} }
	sent := map[string][]compactedSent{
		"a": {acked(0, 0), acked(0, 2), acked(0, 4)},
		"b": {acked(0, 1), acked(0, 3), {failed: true}}, // version 2 failed: may be there or not
		"c": {acked(1, 0), acked(1, 1)},
		"d": {{failed: true}}, // nothing acked: nothing required
	}
	ends := map[int32]int64{0: 6, 1: 2}
	good := func() map[int32][]compactedRead {
		return map[int32][]compactedRead{
			0: {{3, "b", 1}, {4, "a", 2}, {5, "b", 2}}, // b's failed version 2 was written after all
			1: {{1, "c", 1}},
		}
	}
	r := checkCompacted(sent, good(), ends)
	if r.Violations != 0 || r.Read != 4 || r.Offsets != 8 || r.Removed != 4 || r.Sent != 9 || r.Acked != 7 || r.Failed != 2 || r.Keys != 4 {
		t.Fatalf("good read: %s", r)
	}
	// Uncompacted (every version still there) is fine too.
	full := map[int32][]compactedRead{0: {{0, "a", 0}, {1, "b", 0}, {2, "a", 1}, {3, "b", 1}, {4, "a", 2}}, 1: {{0, "c", 0}, {1, "c", 1}}}
	if r := checkCompacted(sent, full, ends); r.Violations != 0 || r.Removed != 1 {
		t.Fatalf("full read: %s", r)
	}
	for name, tc := range map[string]struct {
		change func(map[int32][]compactedRead) map[int32][]compactedRead
		want   string
	}{
		"latest lost": {func(m map[int32][]compactedRead) map[int32][]compactedRead { m[1] = nil; return m }, "key c: its latest acked version 1 (at 1/1) lost"},
		"older survives": {func(m map[int32][]compactedRead) map[int32][]compactedRead {
			m[0][1] = compactedRead{4, "a", 1}
			return m
		}, "4: key a version 1, acked at 0/2"},
		"old after new": {func(m map[int32][]compactedRead) map[int32][]compactedRead {
			m[1] = []compactedRead{{1, "c", 1}, {2, "c", 0}}
			return m
		}, "key c version 0 after version 1"},
		"last read too old": {func(m map[int32][]compactedRead) map[int32][]compactedRead {
			m[0] = m[0][:1]
			m[0][0] = compactedRead{2, "a", 1}
			return m
		}, "key a: last read version 1 at 0/2, but version 2 was acked at 0/4"},
		"never sent": {func(m map[int32][]compactedRead) map[int32][]compactedRead {
			m[0] = append(m[0], compactedRead{6, "a", 7})
			return m
		}, "key a version 7 was never sent"},
		"offsets backwards": {func(m map[int32][]compactedRead) map[int32][]compactedRead {
			m[0][0], m[0][1] = m[0][1], m[0][0]
			return m
		}, "0/3 read after offset 4"},
		"wrong offset": {func(m map[int32][]compactedRead) map[int32][]compactedRead { m[1][0].offset = 0; return m }, "1/0: key c version 1, acked at 1/1"},
	} {
		r := checkCompacted(sent, tc.change(good()), ends)
		if r.Violations < 1 || !strings.Contains(r.String(), tc.want) {
			t.Errorf("%s: %s, want a violation with %q", name, r, tc.want)
		}
	}
	if k, v, ok := parseCompactedValue(compactedValue("k00012", 345)); !ok || k != "k00012" || v != 345 {
		t.Fatalf("parse: %q %d %v", k, v, ok)
	}
}

// The share group's checker: every acked record delivered, nothing foreign, the start
// offsets at the ends; redeliveries counted.
func TestCheckShare(t *testing.T) {
	acked := map[string]bool{"s-0": true, "s-1": true, "s-2": true, "s-3": false}
	delivered := map[string][]int32{"s-0": {1}, "s-1": {1, 2}, "s-2": {3}}
	ends := map[int32]int64{0: 2, 1: 2}
	r := checkShare(acked, delivered, nil, ends)
	if r.Violations != 0 || r.Acked != 3 || r.Failed != 1 || r.Delivered != 3 || r.Deliveries != 4 || r.Redelivered != 2 || r.MaxDeliveryCount != 3 || r.AtLimit != 0 {
		t.Fatalf("good: %s", r)
	}
	delete(delivered, "s-2")
	delivered["s-9"] = []int32{1, 5}
	r = checkShare(acked, delivered, map[int32]int64{1: 1}, ends)
	for _, want := range []string{"s-2 acked but never delivered", "s-9 delivered but never sent", "partition 1: share group start offset 1 below the end 2"} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("%s: no %q", r, want)
		}
	}
	if r.Violations != 3 || r.AtLimit != 1 {
		t.Fatalf("bad: %s", r)
	}
}

// The KIP-848 members' epoch changes: not a member's first epoch, only in the window.
func TestEpochChanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []groupEvent{
		{At: at(1), Member: 0, Kind: "epoch", Generation: 1, First: true},
		{At: at(2), Member: 1, Kind: "epoch", Generation: 2, First: true},
		{At: at(3), Member: 0, Kind: "epoch", Generation: 2},
		{At: at(3), Member: 0, Kind: "assigned", Generation: 2},
		{At: at(9), Member: 1, Kind: "epoch", Generation: 3},
	}
	if n := epochChanges(evs, at(0), at(5)); n != 1 {
		t.Fatalf("%d changes, want 1", n)
	}
	if g := generation(evs, at(10)); g != 3 {
		t.Fatalf("epoch %d at the end, want 3 (the last epoch event)", g)
	}
}

// runModeScenario runs an own 6-process cluster (12 partitions, a light load, no
// group or rack readers unless set adds them) with the mode set by set and the faults,
// for d, and checks what every scenario must show: the verified load's checker and the
// modes' (--txn's too) found nothing, every fault ran without an error.
func runModeScenario(t *testing.T, d time.Duration, set func(*Config), faults ...string) (*Report, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a 6-process cluster")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/weir").CombinedOutput(); err != nil {
		t.Fatalf("building weir: %v\n%s", err, out)
	}
	cfg := DefaultConfig()
	cfg.Bin, cfg.Duration, cfg.Settle, cfg.Partitions, cfg.Rate = bin, d, 3*time.Second, 12, 300
	cfg.RestartAfter, cfg.RackReaders, cfg.Members = 2*time.Second, false, 0
	cfg.Dir = t.TempDir()
	set(&cfg)
	for _, spec := range faults {
		f, err := ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	if !r.OK {
		t.Fatalf("violations: %s", text.String())
	}
	if len(r.Faults) != len(faults) {
		t.Fatalf("faults: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			t.Fatalf("fault %s: %s", f.Fault, f.Error)
		}
	}
	return r, text.String()
}

// TestChaosGroup848: the consumer group on the KIP-848 protocol while its coordinator
// is killed: the group resumes at its commits, nothing acked is lost, the report names
// the protocol and the group is a consumer group at the end (ConsumerGroupDescribe).
func TestChaosGroup848(t *testing.T) {
	r, text := runModeScenario(t, 18*time.Second, func(c *Config) {
		c.Members, c.GroupProtocol = 3, "consumer"
	}, "coordinator-kill@9s")
	if r.GroupProtocol != "consumer" || r.Group == nil || r.Group.Epoch < 1 || r.Group.Assignor == "" {
		t.Fatalf("group: %q %+v", r.GroupProtocol, r.Group)
	}
	if r.Check.Read < r.Acked {
		t.Fatalf("check: %s", r.Check.String())
	}
	f := r.Faults[0]
	if len(f.Brokers) != 1 || f.GroupGenerationAfter < 1 {
		t.Fatalf("no member epoch seen: %+v", f)
	}
	if !strings.Contains(text, "consumer group (KIP-848) paused") || !strings.Contains(text, "member epoch changes") {
		t.Errorf("text report without the KIP-848 group line")
	}
	t.Logf("%s: paused %v, %d rebalances, epoch %d → %d, %d epoch changes; %s", f.Fault, f.GroupPause, f.GroupRebalances,
		f.GroupGenerationBefore, f.GroupGenerationAfter, f.GroupEpochChanges, r.Group)
}

// TestChaosCompacted: the keyed writer to a compacted topic through a broker kill; the
// cleaner must have run (offsets without records, objects written) and every key's
// latest acked version be read at its offset.
func TestChaosCompacted(t *testing.T) {
	r, _ := runModeScenario(t, 24*time.Second, func(c *Config) {
		c.Compacted, c.CompactedKeys, c.CompactedRate = true, 100, 200
	}, "kill@8s")
	c := r.Compacted
	if c == nil || c.Violations != 0 || c.Acked < 2000 || c.Keys != 100 {
		t.Fatalf("compacted: %+v", c)
	}
	if c.Removed <= 0 || c.Read >= c.Sent || c.ObjectsWritten < 1 {
		t.Fatalf("the cleaner did not run, or readers do not see it: %s", c)
	}
	b, _ := json.Marshal(r)
	var back struct {
		Compacted map[string]json.RawMessage `json:"compacted"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Compacted["removed"] == nil || back.Compacted["violations"] == nil {
		t.Fatalf("JSON compacted: %s %v", back.Compacted, err)
	}
}

// TestChaosShare: two share consumers read a queue through a broker kill; every acked
// record delivered and acknowledged, redeliveries counted.
func TestChaosShare(t *testing.T) {
	r, _ := runModeScenario(t, 18*time.Second, func(c *Config) {
		c.Share, c.ShareMembers, c.ShareRate = true, 2, 200
	}, "kill@8s")
	s := r.Share
	if s == nil || s.Violations != 0 || s.Acked < 1500 || s.Delivered < s.Acked || s.MaxDeliveryCount < 1 {
		t.Fatalf("share: %+v", s)
	}
	t.Logf("%s", s)
}
