//go:build linux

package localfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeBack writes [off, off+n) of f to the device and waits for it (no cache flush,
// no metadata: the final fsync still makes the object durable).
func writeBack(f *os.File, off, n int64) error {
	for {
		err := unix.SyncFileRange(int(f.Fd()), off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
