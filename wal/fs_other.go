//go:build !linux

package wal

import (
	"errors"
	"os"
)

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

func fallocate(f *os.File, size int64) error {
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
}

func isQuotaError(error) bool { return false }
