package wal

import (
	"testing"
)

// BenchmarkFenceCheck measures the check alone (open, read 256 bytes, close of FENCE)
// on the real file system.
func BenchmarkFenceCheck(b *testing.B) {
	cfg := DefaultConfig(b.TempDir())
	cfg.Fence = true
	w, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ResetTimer()
	for range b.N {
		if err := w.checkFence(); err != nil {
			b.Fatal(err)
		}
	}
}
