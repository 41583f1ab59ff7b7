package wal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// BenchmarkAppendParallel appends 1 KiB records from many goroutines on the
// real file system and reports throughput and fdatasyncs per append, for each
// way of preparing segments.
func BenchmarkAppendParallel(b *testing.B) {
	modes := []struct {
		name string
		mut  func(*wal.Config)
	}{
		{"prealloc=zerofill", func(*wal.Config) {}},
		{"prealloc=fallocate", func(c *wal.Config) { c.NoZeroFill = true }},
		{"prealloc=none", func(c *wal.Config) { c.Preallocate = false }},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			fs := waltest.NewFaultFS(wal.OSFS())
			cfg := wal.DefaultConfig(b.TempDir())
			cfg.FS = fs
			m.mut(&cfg)
			w, _, _ := openWAL(b, cfg)
			p := make([]byte, 1024)
			fs.ResetCounts()
			b.SetBytes(int64(len(p)))
			b.SetParallelism(32) // 32 appenders per core: enough waiters to group
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := w.AppendSync(context.Background(), 1, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(fs.Count(waltest.OpSync, ".wal"))/float64(b.N), "syncs/op")
		})
	}
}

// BenchmarkSyncLatency measures one WriteAt + fdatasync of a small block at
// increasing offsets, in a file that is appended to, fallocated, or
// fallocated and zero-filled: the measurement behind Config.Preallocate.
func BenchmarkSyncLatency(b *testing.B) {
	const fileSize = 64 << 20
	for _, size := range []int{4 << 10, 64 << 10} {
		for _, mode := range []string{"append", "fallocate", "zerofill"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) {
				dir := b.TempDir()
				var f wal.File
				files := 0
				// fresh prepares a new file in this mode (timer stopped).
				fresh := func() {
					b.StopTimer()
					defer b.StartTimer()
					if f != nil {
						f.Close()
					}
					files++
					path := filepath.Join(dir, fmt.Sprint(files))
					os.Remove(filepath.Join(dir, fmt.Sprint(files-1)))
					var err error
					if f, err = wal.OSFS().OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644); err != nil {
						b.Fatal(err)
					}
					if mode != "append" {
						if err := f.Allocate(fileSize); err != nil {
							b.Skip(err)
						}
					}
					if mode == "zerofill" {
						z := make([]byte, 1<<20)
						for off := int64(0); off < fileSize; off += int64(len(z)) {
							if _, err := f.WriteAt(z, off); err != nil {
								b.Fatal(err)
							}
						}
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				defer func() { f.Close() }()
				buf := make([]byte, size)
				for i := range buf {
					buf[i] = byte(i)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				fresh()
				off := int64(0)
				for i := 0; i < b.N; i++ {
					if off+int64(size) > fileSize {
						fresh()
						off = 0
					}
					if _, err := f.WriteAt(buf, off); err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					off += int64(size)
				}
			})
		}
	}
}

// BenchmarkGroupCommitFence measures what the fence check (a fresh open and read of
// FENCE after every group's fdatasync) costs: group commits per second on the real file
// system with Config.Fence off and on, with one appender (one record per group: the
// check's share is largest) and with 64 (many records per group). Through FaultFS (to
// count syncs) the check reads FENCE uncached, as on NFS; on a local file system the
// OS file system reads it cached (BenchmarkFenceCheck: about 7 µs against 63 µs here).
func BenchmarkGroupCommitFence(b *testing.B) {
	for _, appenders := range []int{1, 64} {
		for _, fence := range []bool{false, true} {
			b.Run(fmt.Sprintf("appenders=%d/fence=%v", appenders, fence), func(b *testing.B) {
				fs := waltest.NewFaultFS(wal.OSFS())
				cfg := wal.DefaultConfig(b.TempDir())
				cfg.FS = fs
				cfg.Fence = fence
				w, _, _ := openWAL(b, cfg)
				p := make([]byte, 128)
				fs.ResetCounts()
				b.ResetTimer()
				if appenders == 1 {
					for range b.N {
						if _, err := w.AppendSync(context.Background(), 1, p); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(appenders / max(1, runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := w.AppendSync(context.Background(), 1, p); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				groups := float64(fs.Count(waltest.OpSync, ".wal"))
				b.ReportMetric(groups/b.Elapsed().Seconds(), "groups/s")
				b.ReportMetric(float64(b.N)/groups, "records/group")
			})
		}
	}
}
