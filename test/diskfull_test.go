package test

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/kafkatest"
)

// TestDiskFull runs a broker on a small tmpfs and fills it: produce must fail with
// KAFKA_STORAGE_ERROR (not crash, not hang), fetches must keep serving everything acked,
// and once space is freed produce must work again, with every acked record intact after
// a SIGKILL and restart.
func TestDiskFull(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	p := startWeir(t, dir, "", "--data-dir", data, "--wal-segment-bytes", "2097152")

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("full"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t, 20*time.Second), 1, 1, nil, "full"); err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 100<<10) // random: kgo compresses batches
	rand.Read(val)
	var acked []int64
	var storageErr error
	for i := 0; i < 400 && storageErr == nil; i++ {
		// Raw requests show the exact error code (a client would retry it).
		resp, err := kafkatest.Produce(ctxT(t, 30*time.Second), cl, "full", 0, kafkatest.Batch(-1, -1, -1, append([]byte(fmt.Sprintf("%05d", i)), val...)))
		if err != nil {
			t.Fatal(err)
		}
		switch resp.ErrorCode {
		case 0:
			if resp.BaseOffset != int64(len(acked)) {
				t.Fatalf("record %d acked at offset %d", i, resp.BaseOffset)
			}
			acked = append(acked, resp.BaseOffset)
		case kerr.KafkaStorageError.Code:
			storageErr = kerr.ErrorForCode(resp.ErrorCode)
		default:
			t.Fatalf("record %d: want success or KAFKA_STORAGE_ERROR, got %v", i, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	if storageErr == nil {
		t.Fatalf("the disk never filled up: %d acked", len(acked))
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acked before the disk filled")
	}
	t.Logf("%d records acked, then: %v", len(acked), storageErr)

	// Reads keep working on a full disk.
	readAll := func(addr string, want int) {
		t.Helper()
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := ctxT(t, 60*time.Second)
		n := 0
		for n < want {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", n, want)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != int64(n) || string(r.Value[:5]) != fmt.Sprintf("%05d", n) {
					t.Fatalf("record at %d: offset %d value %.5s", n, r.Offset, r.Value)
				}
				n++
			})
		}
	}
	readAll(p.addr, len(acked))

	// Free space: produce works again and continues the offsets.
	os.Remove(filler)
	r, err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte(fmt.Sprintf("%05d", len(acked)))}).First()
	if err != nil {
		t.Fatalf("produce after freeing space: %v", err)
	}
	if r.Offset != int64(len(acked)) {
		t.Fatalf("after freeing space got offset %d, want %d (a gap or overlap)", r.Offset, len(acked))
	}
	p.kill()
	p2 := startWeir(t, dir, p.addr, "--data-dir", data, "--wal-segment-bytes", "2097152")
	readAll(p2.addr, len(acked)+1)
}
