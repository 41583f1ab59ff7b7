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
