//go:build linux

package wal

import (
	"errors"
	"io"
	"os"

	"github.com/weir-io/weir/internal/sysfile"
	"golang.org/x/sys/unix"
)

// OUncached is the OpenFile flag that bypasses the client's page cache (O_DIRECT);
// see ReadUncached.
const OUncached = unix.O_DIRECT

// readOnce is one pread(2): O_DIRECT refuses the unaligned retry os.File.ReadAt makes
// after a short read.
func (f *osFile) readOnce(p []byte, off int64) (int, error) {
	var n int
	err := sysfile.Call(f.File, "pread", func(fd int) error {
		var err error
		n, err = unix.Pread(fd, p, off)
		return err
	})
	if err == nil && n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return max(n, 0), err
}

func fdatasync(f *os.File) error {
	return sysfile.Call(f, "fdatasync", unix.Fdatasync)
}

func fallocate(f *os.File, size int64) error {
	err := sysfile.Call(f, "fallocate", func(fd int) error { return unix.Fallocate(fd, 0, 0, size) })
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return err
}

func isQuotaError(err error) bool { return errors.Is(err, unix.EDQUOT) }

func osFlags(flag int) int { return flag }
