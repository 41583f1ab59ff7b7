package chaos

import (
	"testing"
	"time"
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
	} {
		got, err := ParseFault(spec)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", spec, got, err, want)
		}
		if back, err := ParseFault(got.String()); err != nil || back != got {
			t.Errorf("%s does not round-trip: %q → %+v %v", spec, got.String(), back, err)
		}
	}
	for _, bad := range []string{"kill", "kill@", "kill:x@1s", "explode@1s", "rolling-restart:2@1s", "kill-many:0@1s", "storage-error:EBADF@1s", "storage-freeze:1@1s"} {
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
}
