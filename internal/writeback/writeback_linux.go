//go:build linux

// Package writeback writes a file's dirty pages in a range to the device and waits for
// them (sync_file_range), without a cache flush or metadata: background writers (the
// WAL's zero-fill of its next segment, the local object store's puts) call it step by
// step so a group commit's fdatasync never queues behind megabytes of their writeback.
// It is no durability guarantee; fsync still is.
package writeback

import (
	"os"

	"golang.org/x/sys/unix"
)

// Range writes [off, off+n) of f back to the device and waits for it.
func Range(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.SyncFileRange(int(fd), off, n,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: serr}
	}
	return nil
}
