package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"
)

func TestDiskLimit(t *testing.T) {
	dir := t.TempDir()
	r, err := DiskLimit(context.Background(), dir, 4096, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.WriteSize != 4096 || r.Writes <= 0 || r.Bytes != r.Writes*4096 || r.DurationS <= 0 {
		t.Fatalf("result = %+v", r)
	}
	if r.MBPerSec <= 0 || r.SyncsPerSec <= 0 || r.Latency.Count != r.Writes || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P50 {
		t.Fatalf("rates/latency = %+v", r)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("scratch file left behind: %v", ents)
	}
}

func TestDiskLimitErrors(t *testing.T) {
	if _, err := DiskLimit(context.Background(), "/nonexistent/dir", 4096, time.Millisecond); err == nil {
		t.Error("missing dir accepted")
	}
	if _, err := DiskLimit(context.Background(), t.TempDir(), 0, time.Millisecond); err == nil {
		t.Error("size 0 accepted")
	}
	if _, err := DiskLimit(context.Background(), t.TempDir(), 4096, 0); err == nil {
		t.Error("duration 0 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DiskLimit(ctx, t.TempDir(), 4096, time.Second); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

// `weir bench disk DIR --count N --json` prints one JSON object with a
// result per size.
func TestDiskCommandJSON(t *testing.T) {
	dir := t.TempDir()
	var out, progress bytes.Buffer
	err := Main(context.Background(), []string{"disk", dir, "--sizes", "1KiB,8KiB", "--count", "20", "--json"}, &out, &progress)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.Mode != "disk" || res.Disk == nil || len(res.Disk.Results) != 2 || res.Settings["dir"] != dir {
		t.Fatalf("result = %+v", res)
	}
	for i, size := range []int{1024, 8192} {
		r := res.Disk.Results[i]
		if r.WriteSize != size || r.Writes != 20 || r.MBPerSec <= 0 {
			t.Errorf("size %d: %+v", size, r)
		}
	}
	if !bytes.Contains(progress.Bytes(), []byte("syncs/s")) {
		t.Errorf("no progress table on stderr: %s", progress.String())
	}
}
