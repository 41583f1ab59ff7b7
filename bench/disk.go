package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// diskMaxFileBytes bounds the scratch file: once it would grow past this it
// is truncated and writing starts over, so a long --count on a fast disk (or
// a tmpfs) cannot fill it. The truncation is not timed.
const diskMaxFileBytes = 1 << 30

// DiskResult is what DiskLimit measured for one write size. Latency is per
// write+fdatasync pair: that is what one durable WAL append of this size
// costs (the write alone only copies into the page cache).
type DiskResult struct {
	WriteSize   int            `json:"write_size"`
	Writes      int64          `json:"writes"`
	Bytes       int64          `json:"bytes"`
	DurationS   float64        `json:"duration_s"`
	MBPerSec    float64        `json:"mb_per_sec"`
	SyncsPerSec float64        `json:"syncs_per_sec"`
	Latency     LatencySummary `json:"sync_latency_ms"`
}

// DiskLimit measures the physical limit of a WAL directory for one write
// size: it appends size bytes to a scratch file in dir and fdatasyncs after
// every write, for d. It removes the file afterwards. On cancellation it
// returns what was measured so far together with ctx's error.
func DiskLimit(ctx context.Context, dir string, size int, d time.Duration) (DiskResult, error) {
	if d <= 0 {
		return DiskResult{}, errors.New("DiskLimit: duration must be positive")
	}
	return diskLimit(ctx, dir, size, d, 0)
}

// diskLimit runs for d, or for count operations when count > 0.
func diskLimit(ctx context.Context, dir string, size int, d time.Duration, count int) (res DiskResult, err error) {
	res.WriteSize = size
	if size <= 0 || size > diskMaxFileBytes {
		return res, fmt.Errorf("disk bench: write size %d out of range (1 B .. 1 GiB)", size)
	}
	f, err := os.CreateTemp(dir, ".weir-bench-disk-*")
	if err != nil {
		return res, fmt.Errorf("disk bench: %w", err)
	}
	defer func() {
		cerr := f.Close()
		rerr := os.Remove(f.Name())
		if err == nil {
			err = errors.Join(cerr, rerr)
		}
	}()
	// Random bytes so that compressing or deduplicating file systems
	// (btrfs, zfs) cannot make the disk look faster than it is.
	buf := make([]byte, size)
	_, _ = rand.Read(buf)
	fd := int(f.Fd())

	lat := newLatencyStats()
	var (
		off     int64
		paused  time.Duration
		elapsed time.Duration
	)
	start := time.Now()
	for n := 0; ; n++ {
		elapsed = time.Since(start) - paused
		if (count > 0 && n >= count) || (count <= 0 && elapsed >= d) {
			break
		}
		if err = ctx.Err(); err != nil {
			break
		}
		if off+int64(size) > diskMaxFileBytes {
			t := time.Now()
			if err = f.Truncate(0); err != nil {
				return res, fmt.Errorf("disk bench: truncate: %w", err)
			}
			if _, err = f.Seek(0, io.SeekStart); err != nil {
				return res, fmt.Errorf("disk bench: seek: %w", err)
			}
			if err = unix.Fdatasync(fd); err != nil {
				return res, fmt.Errorf("disk bench: fdatasync: %w", err)
			}
			off = 0
			paused += time.Since(t)
		}
		t0 := time.Now()
		if _, err = f.Write(buf); err != nil {
			return res, fmt.Errorf("disk bench: write: %w", err)
		}
		if err = unix.Fdatasync(fd); err != nil {
			return res, fmt.Errorf("disk bench: fdatasync: %w", err)
		}
		lat.add(time.Since(t0))
		off += int64(size)
		res.Writes++
	}
	res.Bytes = res.Writes * int64(size)
	res.DurationS = elapsed.Seconds()
	if res.DurationS > 0 {
		res.MBPerSec = float64(res.Bytes) / res.DurationS / 1e6
		res.SyncsPerSec = float64(res.Writes) / res.DurationS
	}
	res.Latency = lat.summary()
	return res, err
}

// DiskReport is the disk section of a Result: the limits measured and, for
// the produce bench, its throughput as a ratio of them.
type DiskReport struct {
	Dir     string       `json:"dir"`
	Results []DiskResult `json:"results"`
	Ratios  []DiskRatio  `json:"ratios,omitempty"`
}

// DiskRatio compares produce throughput with the disk limit at one write size.
type DiskRatio struct {
	// Basis says which write size this is: "record" (one fdatasync per
	// record, a WAL without group commit) or "batch" (one per average
	// produce batch seen by the client).
	Basis         string  `json:"basis"`
	WriteSize     int     `json:"write_size"`
	LimitMBPerSec float64 `json:"limit_mb_per_sec"`
	// Ratio is produce MB/s divided by the disk limit MB/s; above 1 means
	// the broker syncs more than one such write at a time (or does not
	// sync every write).
	Ratio float64 `json:"ratio"`
}

func runDisk(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	out := progressWriter(cfg, stdout, stderr)
	res := &Result{Mode: "disk", Settings: cfg.settings, StartedAt: time.Now(), Disk: &DiskReport{Dir: cfg.dir}}
	what := fmt.Sprintf("%v per size", cfg.duration)
	if cfg.count > 0 {
		what = fmt.Sprintf("%d writes per size", cfg.count)
	}
	fmt.Fprintf(out, "disk %s: sequential write + fdatasync, %s (MB = 10^6 B, latency per write+fdatasync in ms)\n", cfg.dir, what)
	fmt.Fprintln(out, diskHeader())
	var runErr error
	for _, size := range cfg.sizes {
		r, err := diskLimit(ctx, cfg.dir, size, cfg.duration, cfg.count)
		if r.Writes > 0 {
			res.Disk.Results = append(res.Disk.Results, r)
			fmt.Fprintln(out, diskRow(r))
		}
		if err != nil {
			runErr = err
			break
		}
	}
	if err := finish(cfg, res, stdout, out); err != nil {
		return errors.Join(runErr, err)
	}
	if errors.Is(runErr, context.Canceled) {
		return nil // interrupted: partial results were printed
	}
	return runErr
}

func diskHeader() string {
	return fmt.Sprintf("  %8s %10s %10s %9s %9s %9s %9s %9s", "size", "MB/s", "syncs/s", "avg", "p50", "p99", "p99.9", "max")
}

func diskRow(r DiskResult) string {
	l := r.Latency
	return fmt.Sprintf("  %8s %10.2f %10.1f %9.3f %9.3f %9.3f %9.3f %9.3f",
		humanSize(r.WriteSize), r.MBPerSec, r.SyncsPerSec, l.Avg, l.P50, l.P99, l.P999, l.Max)
}
