//go:build linux

package wal

import (
	"errors"
	"os"

	"github.com/weir-io/weir/internal/sysfile"
	"golang.org/x/sys/unix"
)

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
