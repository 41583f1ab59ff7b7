//go:build linux

package wal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fdCall runs call on f's descriptor, again while it is interrupted (EINTR), and
// returns its error as an *os.PathError naming op (nil if it succeeded).
func fdCall(f *os.File, op string, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = call(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: serr}
	}
	return nil
}

func fdatasync(f *os.File) error {
	return fdCall(f, "fdatasync", unix.Fdatasync)
}

func fallocate(f *os.File, size int64) error {
	err := fdCall(f, "fallocate", func(fd int) error { return unix.Fallocate(fd, 0, 0, size) })
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return err
}

func isQuotaError(err error) bool { return errors.Is(err, unix.EDQUOT) }

// writeBack writes [off, off+n) of f to the device and waits for it (RangeWriter).
func writeBack(f *os.File, off, n int64) error {
	return fdCall(f, "sync_file_range", func(fd int) error {
		return unix.SyncFileRange(fd, off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}
