//go:build !linux

package wal

import (
	"errors"
	"os"
)

// OUncached would bypass the page cache; outside Linux it is a flag bit osFS strips
// (reads are plain fresh opens there), which test file systems still see.
const OUncached = 1 << 28

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

func fallocate(f *os.File, size int64) error {
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
}

func isQuotaError(error) bool { return false }

func osFlags(flag int) int { return flag &^ OUncached }

// sharedPageCache: outside Linux the file system's type is not checked, so the fence
// check always reads uncached (see the Linux version).
func sharedPageCache(string) bool { return false }
